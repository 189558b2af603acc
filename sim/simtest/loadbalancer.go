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

package simtest

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// LoadBalancer forwards TCP connections on address to the same port of its backends: the
// cluster endpoint in front of simulated control-plane nodes (kube-apiserver on 6443,
// trustd on 50001), like the load balancer in front of real ones. Like such a load balancer
// it checks its backends twice a second and sends connections only to healthy ones: a
// kube-apiserver is healthy when /readyz answers 200, any other port when it accepts.
type LoadBalancer struct {
	mu       sync.Mutex
	backends []string
	// healthy holds, per port, the backends that passed their last check.
	healthy map[int]map[string]bool
	next    atomic.Uint64
}

// NewLoadBalancer listens on address at ports until the test ends.
func NewLoadBalancer(tb testing.TB, address string, ports ...int) *LoadBalancer {
	tb.Helper()
	lb := &LoadBalancer{healthy: map[int]map[string]bool{}}
	for _, port := range ports {
		l, err := (&net.ListenConfig{}).Listen(tb.Context(), "tcp", net.JoinHostPort(address, strconv.Itoa(port)))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = l.Close() })
		go lb.serve(tb.Context(), l, port)
	}
	go lb.check(tb.Context(), ports)
	return lb
}

// SetBackends replaces the addresses connections are forwarded to.
func (lb *LoadBalancer) SetBackends(addresses ...string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.backends = append([]string(nil), addresses...)
}

// check probes every backend on every port twice a second.
func (lb *LoadBalancer) check(ctx context.Context, ports []int) {
	//nolint:gosec // a health probe of the test's own API servers, as load balancers probe them
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for {
		lb.mu.Lock()
		backends := append([]string(nil), lb.backends...)
		lb.mu.Unlock()
		results := map[int]map[string]bool{}
		for _, port := range ports {
			results[port] = map[string]bool{}
			for _, backend := range backends {
				results[port][backend] = probe(ctx, client, backend, port)
			}
		}
		lb.mu.Lock()
		lb.healthy = results
		lb.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func probe(ctx context.Context, client *http.Client, backend string, port int) bool {
	address := net.JoinHostPort(backend, strconv.Itoa(port))
	if port != 6443 {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", address)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+address+"/readyz", http.NoBody)
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

func (lb *LoadBalancer) serve(ctx context.Context, l net.Listener, port int) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go lb.forward(ctx, conn, port)
	}
}

// candidates are the backends to try for port: the healthy ones, or all before the first
// check has passed any.
func (lb *LoadBalancer) candidates(port int) []string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var healthy []string
	for _, b := range lb.backends {
		if lb.healthy[port][b] {
			healthy = append(healthy, b)
		}
	}
	if len(healthy) == 0 {
		return append([]string(nil), lb.backends...)
	}
	return healthy
}

func (lb *LoadBalancer) forward(ctx context.Context, conn net.Conn, port int) {
	defer func() { _ = conn.Close() }()
	backends := lb.candidates(port)
	var upstream net.Conn
	start := int(lb.next.Add(1))
	for i := range backends {
		address := net.JoinHostPort(backends[(start+i)%len(backends)], strconv.Itoa(port))
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", address)
		if err == nil {
			upstream = c
			break
		}
	}
	if upstream == nil {
		return
	}
	defer func() { _ = upstream.Close() }()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			_ = dst.Close()
		}
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(upstream, conn)
	go pipe(conn, upstream)
	<-done
	<-done
}
