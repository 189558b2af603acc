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
	"crypto/subtle"
	"crypto/tls"
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/api/security"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/talon-capi/talon/internal/pki"
)

// TrustdPort is where control-plane nodes serve Talos' SecurityService (trustd).
const TrustdPort = 50001

// tokenKey is the gRPC metadata key that carries the machine token to trustd.
const tokenKey = "token"

// securityService is trustd: it signs the Talos API server certificates of nodes whose
// config has no OS CA key (workers), for callers that present the cluster's machine token.
type securityService struct {
	security.UnimplementedSecurityServiceServer
	node *Node
}

// Certificate signs a node's certificate request with the OS CA.
func (s *securityService) Certificate(ctx context.Context, req *security.CertificateRequest) (*security.CertificateResponse, error) {
	s.node.mu.Lock()
	cfg := s.node.cfg
	s.node.mu.Unlock()
	if cfg == nil {
		return nil, status.Error(codes.Unavailable, "trustd runs once the node is configured")
	}
	ca := cfg.Machine().Security().IssuingCA()
	if len(ca.Key) == 0 {
		return nil, status.Error(codes.Unavailable, "trustd runs on control-plane nodes only")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	tokens := md.Get(tokenKey)
	if len(tokens) != 1 || subtle.ConstantTimeCompare([]byte(tokens[0]), []byte(cfg.Machine().Security().Token())) != 1 {
		return nil, status.Error(codes.Unauthenticated, "the machine token is missing or wrong")
	}
	crt, err := x509.NewCertificateFromCSRBytes(ca.Crt, ca.Key, req.GetCsr(),
		x509.NotAfter(time.Now().Add(pki.Validity)),
		x509.KeyUsage(stdx509.KeyUsageDigitalSignature|stdx509.KeyUsageKeyEncipherment),
		x509.ExtKeyUsage([]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth}))
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "failed to sign the certificate request: %v", err)
	}
	return &security.CertificateResponse{Ca: ca.Crt, Crt: crt.X509CertificatePEM}, nil
}

// requestServerCert obtains the node's Talos API server certificate from trustd on the
// control plane, the way a Talos worker does: a fresh key, a CSR for its hostname and
// address, and the machine token, sent to the first of hosts whose trustd answers with a
// certificate valid for that host.
func (n *Node) requestServerCert(ctx context.Context, cfg talosconfig.Provider, hosts []string) (*tls.Certificate, error) {
	if len(hosts) == 0 {
		return nil, errors.New("no endpoint to find trustd at: the config has no cluster endpoint")
	}
	hostname := n.hostname()
	ca, err := cfg.Machine().Security().IssuingCA().GetCert()
	if err != nil {
		return nil, fmt.Errorf("machine.ca: %w", err)
	}
	// A key of the CA's type: the CA signs with the CSR's signature algorithm.
	csr, identity, err := x509.NewCSRAndIdentityFromCA(ca,
		x509.CommonName(hostname),
		x509.IPAddresses([]net.IP{n.ip}),
		x509.DNSNames(append([]string{hostname}, cfg.Machine().Security().CertSANs()...)),
	)
	if err != nil {
		return nil, err
	}
	roots := stdx509.NewCertPool()
	roots.AddCert(ca)
	var errs []error
	for _, host := range hosts {
		resp, err := askTrustd(ctx, host, roots, cfg.Machine().Security().Token(), csr.X509CertificateRequestPEM)
		if err != nil {
			errs = append(errs, fmt.Errorf("trustd at %s: %w", host, err))
			continue
		}
		cert, err := tls.X509KeyPair(resp.GetCrt(), identity.Key)
		if err != nil {
			return nil, fmt.Errorf("trustd at %s returned an unusable certificate: %w", host, err)
		}
		return &cert, nil
	}
	return nil, errors.Join(errs...)
}

// askTrustd sends a certificate signing request to trustd at host, verifying that its
// certificate is issued by roots for host.
func askTrustd(ctx context.Context, host string, roots *stdx509.CertPool, token string, csr []byte) (*security.CertificateResponse, error) {
	conn, err := grpc.NewClient(net.JoinHostPort(host, strconv.Itoa(TrustdPort)),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: host})))
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	callCtx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, tokenKey, token), 10*time.Second)
	defer cancel()
	return security.NewSecurityServiceClient(conn).Certificate(callCtx, &security.CertificateRequest{Csr: csr})
}
