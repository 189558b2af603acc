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

package configgen

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/role"
)

// Talosconfig is a client configuration for the Talos API of one cluster.
type Talosconfig struct {
	// Data is the talosconfig file.
	Data []byte
	// Expires is when its client certificate expires.
	Expires time.Time
}

// NewTalosconfig issues a talosconfig for clusterName with an os:admin client certificate,
// valid for ttl from now, whose context talks to endpoints.
func NewTalosconfig(bundle *secrets.Bundle, clusterName string, endpoints []string, now time.Time, ttl time.Duration) (*Talosconfig, error) {
	cert, err := secrets.NewAdminCertificateAndKey(now, bundle.Certs.OS, role.MakeSet(role.Admin), ttl)
	if err != nil {
		return nil, fmt.Errorf("failed to issue the talosconfig client certificate: %w", err)
	}
	data, err := clientconfig.NewConfig(clusterName, endpoints, bundle.Certs.OS.Crt, cert).Bytes()
	if err != nil {
		return nil, fmt.Errorf("failed to encode talosconfig: %w", err)
	}
	expires, err := certificateExpiry(cert.Crt)
	if err != nil {
		return nil, err
	}
	return &Talosconfig{Data: data, Expires: expires}, nil
}

// certificateExpiry reads NotAfter from a PEM certificate.
func certificateExpiry(certPEM []byte) (time.Time, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return time.Time{}, errors.New("the client certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, fmt.Errorf("failed to parse the client certificate: %w", err)
	}
	return cert.NotAfter, nil
}
