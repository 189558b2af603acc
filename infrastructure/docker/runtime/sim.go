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

package runtime

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/talon-capi/talon/infrastructure/docker/lb"
	"github.com/talon-capi/talon/sim"
)

// loopback is where the in-process runtime places its networks: every 127.x.y.z address
// can be bound on Linux without creating anything.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// Sim runs a cluster's nodes as simulated Talos nodes (sim.Node) and its load balancer as
// an lb.Balancer in this process, on loopback addresses: no Docker needed. A network is a
// /24 of 127.0.0.0/8. Everything lives as long as the process: a restarted manager starts
// with no nodes, and the provider creates them again from their Machines.
type Sim struct {
	// BinDir holds the kube-apiserver and kube-controller-manager binaries control-plane
	// nodes run.
	BinDir string
	// StateDir holds each node's state, in <namespace>/<cluster>/<node>.
	StateDir string
	// Log receives the nodes' log lines.
	Log logr.Logger
	// light, when set, makes every node a light node (sim.Light): the simulator's scale mode.
	light *sim.Light

	// ctx is the lifetime of everything started; nodes outlive the reconcile that started them.
	ctx context.Context //nolint:containedctx // the runtime's lifetime, given to NewSim

	mu       sync.Mutex
	networks map[Cluster]Network
	lbs      map[Cluster]*simBalancer
	nodes    map[Cluster]map[string]*simNode // by Machine
}

type simBalancer struct {
	balancer *lb.Balancer
	address  netip.Addr
	stop     func()
}

type simNode struct {
	node    *sim.Node
	spec    NodeSpec
	address netip.Addr
}

// NewSim returns an in-process runtime whose nodes and load balancers run until ctx ends.
func NewSim(ctx context.Context, binDir, stateDir string, log logr.Logger) *Sim {
	return &Sim{
		BinDir: binDir, StateDir: stateDir, Log: log, ctx: ctx,
		networks: map[Cluster]Network{}, lbs: map[Cluster]*simBalancer{}, nodes: map[Cluster]map[string]*simNode{},
	}
}

// NewLightSim returns an in-process runtime of light nodes (the simulator's scale mode, see
// sim.Light): their etcd and Kubernetes API are held in memory, so no Kubernetes binaries are
// needed and a node costs about a megabyte. They run until ctx ends.
func NewLightSim(ctx context.Context, stateDir string, log logr.Logger) (*Sim, error) {
	light, err := sim.NewLight(ctx, log.WithName("light"))
	if err != nil {
		return nil, err
	}
	s := NewSim(ctx, "", stateDir, log)
	s.light = light
	return s, nil
}

var _ Runtime = &Sim{}

// Name is "sim".
func (s *Sim) Name() string { return "sim" }

// EnsureNetwork reserves a /24 of 127.0.0.0/8 for the cluster: spec.Subnet if given (it
// must lie in 127.0.0.0/8 and overlap no other cluster's), else the first free one from
// 127.100.0.0/24 on.
func (s *Sim) EnsureNetwork(_ context.Context, cluster Cluster, spec NetworkSpec) (Network, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.networks[cluster]; ok {
		return n, nil
	}
	if spec.Subnet.IsValid() {
		if !loopback.Contains(spec.Subnet.Addr()) || spec.Subnet.Bits() < loopback.Bits() {
			return Network{}, fmt.Errorf("subnet %s cannot be used by the in-process runtime: its nodes listen on loopback addresses, so the subnet must lie in %s", spec.Subnet, loopback)
		}
		for other, n := range s.networks {
			if n.Subnet.Overlaps(spec.Subnet) {
				return Network{}, fmt.Errorf("subnet %s overlaps subnet %s of network %s (cluster %s): %w", spec.Subnet, n.Subnet, n.Name, other, ErrConflict)
			}
		}
		n := Network{Name: spec.Name, Subnet: spec.Subnet.Masked()}
		s.networks[cluster] = n
		return n, nil
	}
	for a := netip.AddrFrom4([4]byte{127, 100, 0, 0}); loopback.Contains(a); a = netip.AddrFrom4(nextSlash24(a)) {
		candidate := netip.PrefixFrom(a, 24)
		if !slices.ContainsFunc(mapValues(s.networks), func(n Network) bool { return n.Subnet.Overlaps(candidate) }) {
			n := Network{Name: spec.Name, Subnet: candidate}
			s.networks[cluster] = n
			return n, nil
		}
	}
	return Network{}, fmt.Errorf("no free /24 left in %s: %w", loopback, ErrConflict)
}

func nextSlash24(a netip.Addr) [4]byte {
	b := a.As4()
	if b[2] == 255 {
		return [4]byte{b[0], b[1] + 1, 0, 0}
	}
	return [4]byte{b[0], b[1], b[2] + 1, 0}
}

func mapValues[K comparable, V any](m map[K]V) []V {
	values := make([]V, 0, len(m))
	for _, v := range m {
		values = append(values, v)
	}
	return values
}

// DeleteNetwork releases the cluster's subnet; light nodes' etcd clusters in it are dropped
// with their Kubernetes objects.
func (s *Sim) DeleteNetwork(_ context.Context, cluster Cluster) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.networks[cluster]; ok && s.light != nil {
		s.light.Forget(n.Subnet)
	}
	delete(s.networks, cluster)
	return nil
}

// EnsureLoadBalancer serves the cluster endpoint at spec.Address. HostPort is not
// supported: the address is reachable from the host already.
func (s *Sim) EnsureLoadBalancer(_ context.Context, spec LoadBalancerSpec) (LoadBalancer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.lbs[spec.Cluster]; ok {
		return LoadBalancer{Name: spec.Name, Address: b.address, Backends: b.balancer.Backends()}, nil
	}
	b := lb.New(APIServerPort, TrustdPort)
	// Every balancer of this runtime shares the manager's file limit.
	b.NoSplice = true
	if s.light != nil {
		// Thousands of light clusters share two cores: TLS probes of each backend twice a
		// second would take most of them. The nodes are in this process: ask them.
		cluster := spec.Cluster
		b.Probe = func(_ context.Context, backend netip.Addr, port int) bool { return s.serves(cluster, backend, port) }
		// Asking costs next to nothing: notice a failing backend within a tenth of a second.
		b.CheckInterval = 100 * time.Millisecond
	}
	stop, err := b.Listen(s.ctx, spec.Address.String())
	if err != nil {
		return LoadBalancer{}, fmt.Errorf("start the load balancer of cluster %s: %w", spec.Cluster, err)
	}
	s.lbs[spec.Cluster] = &simBalancer{balancer: b, address: spec.Address, stop: stop}
	return LoadBalancer{Name: spec.Name, Address: spec.Address}, nil
}

// SetBackends points the cluster's load balancer at backends.
func (s *Sim) SetBackends(_ context.Context, cluster Cluster, backends []netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lbs[cluster]
	if !ok {
		return fmt.Errorf("cluster %s has no load balancer", cluster)
	}
	b.balancer.SetBackends(backends...)
	return nil
}

// DeleteLoadBalancer stops the cluster's load balancer.
func (s *Sim) DeleteLoadBalancer(_ context.Context, cluster Cluster) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.lbs[cluster]; ok {
		b.stop()
		delete(s.lbs, cluster)
	}
	return nil
}

// CreateNode boots a simulated node with the spec's config at spec.Address.
func (s *Sim) CreateNode(_ context.Context, spec NodeSpec) (Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.nodes[spec.Cluster][spec.Machine]; ok {
		return n.status(), nil
	}
	for _, nodes := range s.nodes {
		for _, n := range nodes {
			if n.spec.Name == spec.Name {
				return Node{}, fmt.Errorf("node name %s is taken by Machine %s of cluster %s: %w", spec.Name, n.spec.Machine, n.spec.Cluster, ErrConflict)
			}
			if n.address == spec.Address {
				return Node{}, fmt.Errorf("address %s is taken by node %s: %w", spec.Address, n.spec.Name, ErrConflict)
			}
		}
	}
	stateDir := filepath.Join(s.StateDir, spec.Cluster.Namespace, spec.Cluster.Name, spec.Name)
	if err := os.RemoveAll(stateDir); err != nil {
		return Node{}, err
	}
	node, err := sim.NewNode(sim.Options{
		Address: spec.Address.String(), StateDir: stateDir, BinDir: s.BinDir, Hostname: spec.Name,
		TalosVersion: spec.TalosVersion, Light: s.light, Log: s.Log.WithValues("node", spec.Name),
	})
	if err != nil {
		return Node{}, fmt.Errorf("create node %s of cluster %s: %w", spec.Name, spec.Cluster, err)
	}
	if err := node.Start(s.ctx, spec.UserData); err != nil {
		return Node{}, fmt.Errorf("start node %s of cluster %s: %w", spec.Name, spec.Cluster, err)
	}
	if s.nodes[spec.Cluster] == nil {
		s.nodes[spec.Cluster] = map[string]*simNode{}
	}
	n := &simNode{node: node, spec: spec, address: spec.Address}
	s.nodes[spec.Cluster][spec.Machine] = n
	return n.status(), nil
}

func (n *simNode) status() Node {
	return Node{Name: n.spec.Name, Machine: n.spec.Machine, Role: n.spec.Role, Address: n.address, Running: true}
}

// Nodes lists the cluster's nodes.
func (s *Sim) Nodes(_ context.Context, cluster Cluster) ([]Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes := make([]Node, 0, len(s.nodes[cluster]))
	for _, n := range s.nodes[cluster] {
		nodes = append(nodes, n.status())
	}
	slices.SortFunc(nodes, func(a, b Node) int { return a.Address.Compare(b.Address) })
	return nodes, nil
}

// DeleteNode shuts the node down and removes its state.
func (s *Sim) DeleteNode(_ context.Context, cluster Cluster, machine string) error {
	s.mu.Lock()
	n, ok := s.nodes[cluster][machine]
	delete(s.nodes[cluster], machine)
	if len(s.nodes[cluster]) == 0 {
		delete(s.nodes, cluster)
	}
	s.mu.Unlock()
	if !ok {
		return nil
	}
	n.node.Stop()
	return os.RemoveAll(filepath.Join(s.StateDir, cluster.Namespace, cluster.Name, n.spec.Name))
}

// serves tells whether the cluster's node at address serves port, as its load balancer's
// health check would find.
func (s *Sim) serves(cluster Cluster, address netip.Addr, port int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes[cluster] {
		if n.address == address {
			return n.node.Serves(port)
		}
	}
	return false
}

// LightClusters is the number of etcd clusters the runtime's light nodes hold in memory (0
// for a runtime of full nodes).
func (s *Sim) LightClusters() int {
	if s.light == nil {
		return 0
	}
	return s.light.Clusters()
}

// SimNode returns the simulated node of a Machine, for tests that inject faults; nil when
// there is none.
func (s *Sim) SimNode(cluster Cluster, machine string) *sim.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.nodes[cluster][machine]; ok {
		return n.node
	}
	return nil
}
