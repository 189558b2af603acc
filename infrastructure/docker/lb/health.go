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

package lb

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

const (
	// apiServerPort is the kube-apiserver port, whose backends are checked at /readyz.
	apiServerPort = 6443
	// checkInterval is how often every backend is checked on every port, by default.
	checkInterval = 500 * time.Millisecond
	// probeTimeout bounds one check of one backend on one port.
	probeTimeout = time.Second
)

// checkHealth checks every backend on every port at each interval and whenever the backends
// change, until ctx is done.
func (b *Balancer) checkHealth(ctx context.Context) {
	client := &http.Client{
		Timeout: probeTimeout,
		Transport: &http.Transport{
			// A load balancer probes API servers whose certificates name other addresses.
			//nolint:gosec // no data is sent; a probe only reads the status code
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			// Every probe opens a connection of its own, like the connections it stands for.
			DisableKeepAlives: true,
		},
	}
	interval := b.CheckInterval
	if interval == 0 {
		interval = checkInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		b.checkOnce(ctx, client)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-b.backendsChanged:
		}
	}
}

// checkOnce probes every backend on every port at once and records which are healthy.
func (b *Balancer) checkOnce(ctx context.Context, client *http.Client) {
	backends := b.Backends()
	results := make(map[int]map[netip.Addr]bool, len(b.ports))
	var mu sync.Mutex
	var probing sync.WaitGroup
	for _, port := range b.ports {
		// The probes write only their port's map: the loop adds the next port's to results
		// while they run.
		perPort := make(map[netip.Addr]bool, len(backends))
		results[port] = perPort
		for _, backend := range backends {
			probing.Go(func() {
				var healthy bool
				if b.Probe != nil {
					healthy = b.Probe(ctx, backend, port)
				} else {
					healthy = probe(ctx, client, backend, port)
				}
				mu.Lock()
				perPort[backend] = healthy
				mu.Unlock()
			})
		}
	}
	probing.Wait()
	if ctx.Err() != nil {
		return
	}

	log := logr.FromContextOrDiscard(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	for port, healthy := range results {
		others := 0
		for _, ok := range healthy {
			if ok {
				others++
			}
		}
		for backend, ok := range healthy {
			if was, checked := b.healthy[port][backend]; checked && was == ok {
				continue
			}
			endpoint := netip.AddrPortFrom(backend, uint16(port))
			if ok {
				log.Info("Backend is healthy", "backend", endpoint.String())
				continue
			}
			log.Info("Backend is unhealthy", "backend", endpoint.String())
			// Like a load balancer that shuts down the sessions of a server marked down:
			// clients of a failing API server (one whose etcd member left, say) connect
			// again, to a healthy one, instead of waiting on it. Not when none is healthy:
			// then there is nowhere better to go.
			if others > 0 {
				b.closeLocked(endpoint)
			}
		}
	}
	b.healthy = results
}

// probe tells whether backend serves port: a kube-apiserver when /readyz answers 200, any
// other server when it accepts a connection.
func probe(ctx context.Context, client *http.Client, backend netip.Addr, port int) bool {
	if port != apiServerPort {
		conn, err := dialBackend(ctx, backend, port)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}
	url := "https://" + netip.AddrPortFrom(backend, uint16(port)).String() + "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
