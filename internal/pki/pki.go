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

// Package pki issues the certificates Talon's local programs need: the node simulator's
// Talos and Kubernetes certificates and the local management plane's.
package pki

import (
	stdx509 "crypto/x509"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/siderolabs/crypto/x509"
)

// Validity is how long the certificates issued here are valid.
const Validity = 365 * 24 * time.Hour

// Issue signs a new key pair with ca for commonName, the addresses ips and the names
// dnsNames, with the given extended usages and organizations (Kubernetes groups). Like
// Talos, names that are addresses (machine.certSANs may hold both) become IP SANs.
func Issue(ca *x509.PEMEncodedCertificateAndKey, commonName string, ips []net.IP, dnsNames []string,
	usages []stdx509.ExtKeyUsage, organizations ...string) (*x509.PEMEncodedCertificateAndKey, error) {
	authority, err := x509.NewCertificateAuthorityFromCertificateAndKey(ca)
	if err != nil {
		return nil, fmt.Errorf("failed to load CA: %w", err)
	}
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
		x509.NotAfter(time.Now().Add(Validity)),
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

// NewCA makes a self-signed ECDSA certificate authority named commonName (Kubernetes
// components read ECDSA and RSA keys, not Ed25519).
func NewCA(commonName string) (*x509.PEMEncodedCertificateAndKey, error) {
	ca, err := x509.NewSelfSignedCertificateAuthority(
		x509.CommonName(commonName),
		x509.Organization(commonName),
		x509.ECDSA(true),
		x509.NotAfter(time.Now().Add(Validity)),
	)
	if err != nil {
		return nil, fmt.Errorf("failed to make the %s CA: %w", commonName, err)
	}
	return x509.NewCertificateAndKeyFromCertificateAuthority(ca), nil
}
