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
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// LoadBalancer forwards TCP connections on address to the same port of the backends it is
// given, trying them in turn until one accepts: the cluster endpoint in front of simulated
// control-plane nodes (kube-apiserver on 6443, trustd on 50001), like the load balancer in
// front of real ones.
type LoadBalancer struct {
	mu       sync.Mutex
	backends []string
	next     atomic.Uint64
}

// NewLoadBalancer listens on address at ports until the test ends.
func NewLoadBalancer(tb testing.TB, address string, ports ...int) *LoadBalancer {
	tb.Helper()
	lb := &LoadBalancer{}
	for _, port := range ports {
		l, err := (&net.ListenConfig{}).Listen(tb.Context(), "tcp", net.JoinHostPort(address, strconv.Itoa(port)))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = l.Close() })
		go lb.serve(tb.Context(), l, port)
	}
	return lb
}

// SetBackends replaces the addresses connections are forwarded to.
func (lb *LoadBalancer) SetBackends(addresses ...string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.backends = append([]string(nil), addresses...)
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

func (lb *LoadBalancer) forward(ctx context.Context, conn net.Conn, port int) {
	defer func() { _ = conn.Close() }()
	lb.mu.Lock()
	backends := append([]string(nil), lb.backends...)
	lb.mu.Unlock()
	var upstream net.Conn
	start := int(lb.next.Add(1))
	for i := range backends {
		address := net.JoinHostPort(backends[(start+i)%len(backends)], strconv.Itoa(port))
		dialer := &net.Dialer{Timeout: time.Second}
		c, err := dialer.DialContext(ctx, "tcp", address)
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
