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

package sim

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// UUID is the node's hardware UUID: Options.UUID, or one derived from its address so that
// it stays the same across restarts and resets, as a machine's does.
func (n *Node) UUID() string {
	if n.opts.UUID != "" {
		return n.opts.UUID
	}
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("talon-sim/"+n.opts.Address)).String()
}

// MAC is the node's hardware address: Options.MAC, or a locally administered one made from
// its IPv4 address.
func (n *Node) MAC() string {
	if n.opts.MAC != "" {
		return strings.ToLower(n.opts.MAC)
	}
	ip4 := n.ip.To4()
	if ip4 == nil {
		ip4 = n.ip[len(n.ip)-4:]
	}
	return net.HardwareAddr{0x02, 0x00, ip4[0], ip4[1], ip4[2], ip4[3]}.String()
}

// ConfigURL is the node's talos.config= URL with its variables replaced, as Talos replaces
// them: ${uuid}, ${mac}, ${serial} (the UUID here) and ${hostname}.
func (n *Node) ConfigURL() string {
	return strings.NewReplacer(
		"${uuid}", url.QueryEscape(n.UUID()),
		"${mac}", url.QueryEscape(n.MAC()),
		"${serial}", url.QueryEscape(n.UUID()),
		"${hostname}", url.QueryEscape("talos-"+strings.ReplaceAll(n.opts.Address, ".", "-")),
	).Replace(n.opts.ConfigURL)
}

// fetchConfig downloads the node's config from its ConfigURL, retrying until it gets one
// (the server may not be up yet, or may not know the node yet), and applies it. A config
// the node refuses stops the attempts: the node stays in maintenance mode and says why.
func (n *Node) fetchConfig(ctx context.Context) {
	target := n.ConfigURL()
	var data []byte
	if err := n.retry(ctx, "Waiting for the config at "+target, func() error {
		if n.configured() {
			// Applied through the API meanwhile.
			return nil
		}
		var err error
		data, err = download(ctx, target, n.ip)
		return err
	}); err != nil || data == nil {
		return
	}
	if err := n.applyConfig(ctx, data); err != nil {
		n.opts.Log.Error(err, "The config from talos.config is refused; the node stays in maintenance mode", "url", target)
		return
	}
	n.opts.Log.Info("Config fetched from talos.config", "url", target)
}

// download fetches the node's config from target, from the node's own address as Talos
// does (the boot service hands a config only to the address the host booted with).
func download(ctx context.Context, target string, from net.IP) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	data, err := httpGet(ctx, httpClientFrom(from), target)
	if err != nil {
		return nil, err
	}
	if len(data) > 4<<20 {
		return nil, errors.New("the config is larger than 4 MiB")
	}
	if len(data) == 0 {
		return nil, errors.New("the config server returned an empty config")
	}
	return data, nil
}
