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

package bmc

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"time"
)

// NewServer starts a BMC serving plain HTTP on a free port of 127.0.0.1.
func NewServer(cfg Config) *BMC {
	b := New(cfg)
	b.Start(listenLocal())
	return b
}

// NewTLSServer starts a BMC serving HTTPS on a free port of 127.0.0.1, with a self-signed
// certificate (see Certificate).
func NewTLSServer(cfg Config) *BMC {
	b := New(cfg)
	b.StartTLS(listenLocal())
	return b
}

// Start serves the BMC over plain HTTP on l, e.g. a simulated host's own loopback address.
func (b *BMC) Start(l net.Listener) {
	b.start(l, false)
}

// StartTLS serves the BMC over HTTPS on l, with httptest's self-signed certificate for
// 127.0.0.1, ::1 and example.com; clients of other addresses skip verification.
func (b *BMC) StartTLS(l net.Listener) {
	b.start(l, true)
}

func (b *BMC) start(l net.Listener, useTLS bool) {
	srv := &httptest.Server{
		Listener: l,
		Config: &http.Server{
			Handler:           b,
			ReadHeaderTimeout: 10 * time.Second,
			// Clients that fail TLS verification or hang up are what tests provoke.
			ErrorLog: log.New(io.Discard, "", 0),
		},
	}
	b.mu.Lock()
	if b.server != nil {
		b.mu.Unlock()
		panic("bmc: already started")
	}
	b.server = srv
	b.mu.Unlock()
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
}

// URL is the BMC's base URL, e.g. "https://127.0.0.1:41234", or "" before it starts.
func (b *BMC) URL() string {
	if srv := b.httpServer(); srv != nil {
		return srv.URL
	}
	return ""
}

// Address is the host:port the BMC listens on, or "" before it starts.
func (b *BMC) Address() string {
	if srv := b.httpServer(); srv != nil {
		return srv.Listener.Addr().String()
	}
	return ""
}

// Certificate is the BMC's TLS certificate, or nil when it serves plain HTTP.
func (b *BMC) Certificate() *x509.Certificate {
	if srv := b.httpServer(); srv != nil && srv.TLS != nil {
		return srv.Certificate()
	}
	return nil
}

// Close stops serving Redfish and IPMI, first dropping the requests an unreachable BMC
// holds.
func (b *BMC) Close() {
	b.mu.Lock()
	if b.release != nil {
		close(b.release)
		b.release = nil
	}
	srv := b.server
	b.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	b.closeIPMI()
}

func (b *BMC) httpServer() *httptest.Server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.server
}

// waitIfUnreachable holds a request while the BMC is unreachable, until the client gives
// up or the BMC answers again, and tells whether it did.
func (b *BMC) waitIfUnreachable(r *http.Request) bool {
	b.mu.Lock()
	release := b.release
	if release != nil {
		b.held++
	}
	b.mu.Unlock()
	if release == nil {
		return false
	}
	select {
	case <-release:
	case <-r.Context().Done():
	}
	b.mu.Lock()
	b.held--
	b.mu.Unlock()
	return true
}

// Held is how many requests the unreachable BMC holds right now.
func (b *BMC) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

func listenLocal() net.Listener {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("bmc: failed to listen on a port: %v", err))
	}
	return l
}
