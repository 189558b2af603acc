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
	stdx509 "crypto/x509"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/siderolabs/crypto/x509"
)

// certValidity is how long the certificates a node issues itself are valid.
const certValidity = 365 * 24 * time.Hour

// issue signs a key pair with ca for the given names and usages.
func issue(ca *x509.PEMEncodedCertificateAndKey, commonName string, ips []net.IP, dnsNames []string,
	usages []stdx509.ExtKeyUsage, organizations ...string) (*x509.PEMEncodedCertificateAndKey, error) {
	authority, err := x509.NewCertificateAuthorityFromCertificateAndKey(ca)
	if err != nil {
		return nil, fmt.Errorf("failed to load CA: %w", err)
	}
	// Like Talos, SANs that are addresses (machine.certSANs may hold both) are IP SANs.
	ips = slices.Clone(ips)
	var names []string
	for _, name := range dnsNames {
		if ip := net.ParseIP(name); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, name)
		}
	}
	opts := []x509.Option{
		x509.CommonName(commonName),
		x509.IPAddresses(ips),
		x509.DNSNames(names),
		x509.ExtKeyUsage(usages),
		x509.NotAfter(time.Now().Add(certValidity)),
	}
	if len(organizations) > 0 {
		opts = append(opts, x509.Organization(organizations...))
	}
	keyPair, err := x509.NewKeyPair(authority, opts...)
	if err != nil {
		return nil, fmt.Errorf("failed to issue certificate for %s: %w", commonName, err)
	}
	return x509.NewCertificateAndKeyFromKeyPair(keyPair), nil
}

// selfSigned makes the certificate a node in maintenance mode serves: Talos clients in
// maintenance mode do not verify it.
func selfSigned(ip net.IP) (*x509.PEMEncodedCertificateAndKey, error) {
	ca, err := x509.NewSelfSignedCertificateAuthority(
		x509.CommonName("maintenance-service"),
		x509.IPAddresses([]net.IP{ip}),
		x509.NotAfter(time.Now().Add(certValidity)),
		x509.ECDSA(true),
	)
	if err != nil {
		return nil, fmt.Errorf("failed to make the maintenance certificate: %w", err)
	}
	return x509.NewCertificateAndKeyFromCertificateAuthority(ca), nil
}
