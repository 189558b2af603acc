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
	"net/netip"
	"testing"

	"github.com/talon-capi/talon/infrastructure/docker/lb"
)

// LoadBalancer is the cluster endpoint in front of simulated control-plane nodes
// (kube-apiserver on 6443, trustd on 50001): the load balancer of the Docker infrastructure
// provider, serving in the test's process.
type LoadBalancer struct {
	tb       testing.TB
	balancer *lb.Balancer
}

// NewLoadBalancer listens on address at ports until the test ends.
func NewLoadBalancer(tb testing.TB, address string, ports ...int) *LoadBalancer {
	tb.Helper()
	balancer := lb.New(ports...)
	stop, err := balancer.Listen(tb.Context(), address)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return &LoadBalancer{tb: tb, balancer: balancer}
}

// SetBackends replaces the addresses connections are forwarded to.
func (l *LoadBalancer) SetBackends(addresses ...string) {
	l.tb.Helper()
	backends := make([]netip.Addr, 0, len(addresses))
	for _, address := range addresses {
		backend, err := netip.ParseAddr(address)
		if err != nil {
			l.tb.Fatalf("invalid backend of the load balancer: %v", err)
		}
		backends = append(backends, backend)
	}
	l.balancer.SetBackends(backends...)
}
