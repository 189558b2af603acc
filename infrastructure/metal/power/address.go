/*
Copyright 2026 The Talon Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package power

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// protocol is the management protocol a BMC address selects.
type protocol string

const (
	protocolRedfish protocol = "redfish"
	protocolIPMI    protocol = "ipmi"
)

// The address schemes New accepts, in the order error messages list them.
const (
	schemeRedfish     = "redfish"
	schemeRedfishHTTP = "redfish+http"
	schemeIPMI        = "ipmi"
)

var supportedSchemes = []string{schemeRedfish + "://", schemeRedfishHTTP + "://", schemeIPMI + "://"}

// redfishSystemsPath is where Redfish keeps ComputerSystems; a path in a Redfish address
// must name one of them.
const redfishSystemsPath = "/redfish/v1/Systems/"

// address is a parsed BMC address. It never holds credentials: parseAddress rejects them.
type address struct {
	// raw is the address as the user wrote it, for messages.
	raw string
	// scheme is the address's scheme, e.g. "redfish".
	scheme string
	// protocol is the management protocol.
	protocol protocol
	// httpScheme is "https" or "http" for Redfish.
	httpScheme string
	// host is host[:port].
	host string
	// path selects a Redfish ComputerSystem; empty when the BMC has to have exactly one.
	path string
}

// String returns the address as written, which names the BMC in messages.
func (a address) String() string {
	return a.raw
}

// endpoint is the Redfish service's base URL, without a path.
func (a address) endpoint() string {
	return a.httpScheme + "://" + a.host
}

// parseAddress parses a BMC address. Its errors never repeat credentials the address may
// carry by mistake.
func parseAddress(raw string) (address, error) {
	if raw == "" {
		return address{}, errors.New("empty BMC address: want one of " + strings.Join(supportedSchemes, ", "))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the whole input and some reasons repeat part of it, either of
		// which may hold a password.
		if strings.Contains(raw, "@") {
			return address{}, fmt.Errorf("invalid BMC address %s: want scheme://host[:port][/path], credentials belong in the Secret", redactAddress(raw))
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return address{}, fmt.Errorf("invalid BMC address %s: %w", redactAddress(raw), err)
	}
	if u.User != nil {
		return address{}, fmt.Errorf("invalid BMC address %q: credentials belong in the Secret, not in the address", u.Redacted())
	}
	shown := redactAddress(raw)
	a := address{raw: raw, scheme: u.Scheme}
	switch u.Scheme {
	case schemeRedfish:
		a.protocol, a.httpScheme = protocolRedfish, "https"
	case schemeRedfishHTTP:
		a.protocol, a.httpScheme = protocolRedfish, "http"
	case schemeIPMI:
		a.protocol = protocolIPMI
	case "":
		return address{}, fmt.Errorf("BMC address %s has no scheme: want one of %s", shown, strings.Join(supportedSchemes, ", "))
	default:
		return address{}, fmt.Errorf("BMC address %s has unsupported scheme %q: want one of %s", shown, u.Scheme, strings.Join(supportedSchemes, ", "))
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return address{}, fmt.Errorf("BMC address %s has no host: want %s://host[:port]", shown, u.Scheme)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return address{}, fmt.Errorf("BMC address %s must not have a query or fragment", shown)
	}
	a.host = u.Host
	path := strings.TrimSuffix(u.Path, "/")
	switch {
	case path == "":
	case a.protocol == protocolIPMI:
		return address{}, fmt.Errorf("IPMI address %s must not have a path", shown)
	case !strings.HasPrefix(path, redfishSystemsPath) || strings.Contains(strings.TrimPrefix(path, redfishSystemsPath), "/"):
		return address{}, fmt.Errorf("BMC address %s: the path must name one ComputerSystem, e.g. %s1", shown, redfishSystemsPath)
	default:
		a.path = path
	}
	return a, nil
}

// redactAddress hides whatever stands between "://" and the last "@" of an address that
// does not parse, so a mistyped password is not printed.
func redactAddress(raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return fmt.Sprintf("%q", raw)
	}
	start := strings.Index(raw, "://")
	if start < 0 || start > at {
		start = -3
	}
	return fmt.Sprintf("%q", raw[:start+3]+"xxxxx"+raw[at:])
}
