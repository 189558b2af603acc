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

// Package runtime is where the Docker infrastructure provider's nodes run: the Docker
// Engine (containers running the Talos image) or this process (simulated Talos nodes).
// Both find everything they made again by labels, so a restarted manager neither
// duplicates nor leaks anything.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
)

// Labels that tie every container, volume and network to its cluster and Machine.
const (
	// LabelCluster holds the name of the Cluster.
	LabelCluster = "talon.dev/cluster"
	// LabelNamespace holds the namespace of the Cluster.
	LabelNamespace = "talon.dev/cluster-namespace"
	// LabelMachine holds the name of the Machine a node belongs to.
	LabelMachine = "talon.dev/machine"
	// LabelRole is RoleControlPlane, RoleWorker or RoleLoadBalancer.
	LabelRole = "talon.dev/role"
)

// Roles of the containers of a cluster.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
	RoleLoadBalancer = "load-balancer"
)

// Ports the load balancer forwards to the control-plane nodes: kube-apiserver and trustd.
const (
	APIServerPort = 6443
	TrustdPort    = 50001
)

// ErrConflict marks a request the runtime refuses because something already holds the
// resource (a subnet, a host port, a container name); its message names the holder.
var ErrConflict = errors.New("conflict")

// Cluster names the Cluster a runtime object belongs to.
type Cluster struct {
	Namespace string
	Name      string
}

// Labels are the labels of the cluster's objects.
func (c Cluster) Labels() map[string]string {
	return map[string]string{LabelNamespace: c.Namespace, LabelCluster: c.Name}
}

// String is namespace/name.
func (c Cluster) String() string { return c.Namespace + "/" + c.Name }

// NetworkSpec is the network a cluster's nodes and load balancer share.
type NetworkSpec struct {
	// Name of the network.
	Name string
	// Subnet is the IPv4 subnet; invalid (zero) lets the runtime choose one.
	Subnet netip.Prefix
	// MTU of the network; 0 is the runtime's default.
	MTU int
}

// Network is a cluster's network as it exists.
type Network struct {
	Name   string
	Subnet netip.Prefix
	// Gateway is the host's address on the network (Docker) or invalid (in-process).
	Gateway netip.Addr
}

// LoadBalancerSpec is the cluster endpoint in front of the control-plane nodes.
type LoadBalancerSpec struct {
	Cluster Cluster
	// Name of the load balancer (the container name).
	Name string
	// Image runs `talon lb` (Docker only).
	Image string
	// Network and Address place the load balancer on the cluster network.
	Network string
	Address netip.Addr
	// HostPort publishes APIServerPort on the host; 0 picks a free port.
	HostPort int
}

// LoadBalancer is a cluster's load balancer as it exists.
type LoadBalancer struct {
	Name    string
	Address netip.Addr
	// HostPort is where APIServerPort is published on the host (0 if it is not).
	HostPort int
	// Backends are the control-plane addresses connections go to.
	Backends []netip.Addr
}

// Mount is a host path mounted into a node.
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// PortMapping publishes a node's port on the host.
type PortMapping struct {
	ContainerPort int
	HostPort      int
	// Protocol is tcp or udp.
	Protocol string
	// HostIP is the host address to bind; empty means all.
	HostIP string
}

// NodeSpec is one Machine's node.
type NodeSpec struct {
	Cluster Cluster
	// Machine is the name of the Machine; Name is the container name and hostname.
	Machine string
	Name    string
	// Role is RoleControlPlane or RoleWorker.
	Role string
	// Image is the Talos image (Docker only); TalosVersion the version it runs (e.g. v1.13),
	// which decides the volumes Talos needs.
	Image        string
	TalosVersion string
	// Network and Address place the node on the cluster network.
	Network string
	Address netip.Addr
	// NanoCPUs and MemoryBytes limit the node; 0 is unlimited.
	NanoCPUs    int64
	MemoryBytes int64
	// UserData is the machine config the node boots with.
	UserData []byte
	// Env, Mounts and Ports are extras from the TalosDockerMachine spec.
	Env    map[string]string
	Mounts []Mount
	Ports  []PortMapping
}

// Node is a Machine's node as it exists.
type Node struct {
	Name    string
	Machine string
	Role    string
	Address netip.Addr
	// Running is false for a node that is stopped; a paused one runs, frozen.
	Running bool
}

// Runtime creates, finds and removes the nodes, network and load balancer of clusters.
// Every method is idempotent: Ensure* returns what exists when it exists, Delete* of
// something gone succeeds.
type Runtime interface {
	// Name is "docker" or "sim".
	Name() string

	// EnsureNetwork creates the cluster's network unless it exists.
	EnsureNetwork(ctx context.Context, cluster Cluster, spec NetworkSpec) (Network, error)
	// DeleteNetwork removes the cluster's network.
	DeleteNetwork(ctx context.Context, cluster Cluster) error

	// EnsureLoadBalancer starts the cluster's load balancer unless it runs.
	EnsureLoadBalancer(ctx context.Context, spec LoadBalancerSpec) (LoadBalancer, error)
	// SetBackends points the load balancer at the control-plane addresses.
	SetBackends(ctx context.Context, cluster Cluster, backends []netip.Addr) error
	// DeleteLoadBalancer stops and removes the cluster's load balancer.
	DeleteLoadBalancer(ctx context.Context, cluster Cluster) error

	// CreateNode creates and starts a Machine's node unless it exists.
	CreateNode(ctx context.Context, spec NodeSpec) (Node, error)
	// Nodes lists the cluster's nodes.
	Nodes(ctx context.Context, cluster Cluster) ([]Node, error)
	// DeleteNode stops the Machine's node gracefully, then removes it with its volumes.
	DeleteNode(ctx context.Context, cluster Cluster, machine string) error
}

// FindNode returns the Machine's node among the cluster's nodes, or nil.
func FindNode(ctx context.Context, r Runtime, cluster Cluster, machine string) (*Node, error) {
	nodes, err := r.Nodes(ctx, cluster)
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		if nodes[i].Machine == machine {
			return &nodes[i], nil
		}
	}
	return nil, nil
}

// LoadBalancerAddress is where a cluster's load balancer sits on its network: the first
// address after the gateway. Nodes take the addresses after it (see NextAddress).
func LoadBalancerAddress(subnet netip.Prefix) netip.Addr {
	return subnet.Masked().Addr().Next().Next()
}

// NextAddress is the lowest address in subnet after the load balancer's that none of taken
// holds.
func NextAddress(subnet netip.Prefix, taken []netip.Addr) (netip.Addr, error) {
	used := map[netip.Addr]bool{}
	for _, a := range taken {
		used[a] = true
	}
	for a := LoadBalancerAddress(subnet).Next(); subnet.Contains(a); a = a.Next() {
		if !subnet.Contains(a.Next()) { // the broadcast address
			break
		}
		if !used[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("subnet %s has no free address left: %w", subnet, ErrConflict)
}
