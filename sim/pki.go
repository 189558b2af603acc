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
	"fmt"
	"net"
	"time"

	"github.com/siderolabs/crypto/x509"

	"github.com/talon-capi/talon/internal/pki"
)

// issue signs a key pair with ca for the given names and usages (see pki.Issue).
var issue = pki.Issue

// selfSigned makes the certificate a node in maintenance mode serves: Talos clients in
// maintenance mode do not verify it.
func selfSigned(ip net.IP) (*x509.PEMEncodedCertificateAndKey, error) {
	ca, err := x509.NewSelfSignedCertificateAuthority(
		x509.CommonName("maintenance-service"),
		x509.IPAddresses([]net.IP{ip}),
		x509.NotAfter(time.Now().Add(pki.Validity)),
		x509.ECDSA(true),
	)
	if err != nil {
		return nil, fmt.Errorf("failed to make the maintenance certificate: %w", err)
	}
	return x509.NewCertificateAndKeyFromCertificateAuthority(ca), nil
}
