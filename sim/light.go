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
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
)

// Light is where light nodes keep their control planes: the scale mode of the simulator.
// A node whose Options.Light is set serves the same Talos API as any simulated node, from
// the same code, but its etcd member is a member of an in-memory cluster (membership,
// leader, the strict reconfiguration rules; no keys), and its kube-apiserver serves that
// cluster's Kubernetes objects from memory with Cluster API's in-memory API server
// (sigs.k8s.io/cluster-api/test/infrastructure/inmemory) instead of running
// kube-apiserver, kube-controller-manager and the etcd server library. A light node costs
// about a megabyte, not hundreds, so one process holds thousands.
//
// What light nodes cannot do: etcd snapshots and recovery (there is no database), CSR
// signing (workers' kubelets register with their bootstrap token; the in-memory API server
// authenticates nobody), Leases, EndpointSlices and evictions (not served), Layer 2 VIPs,
// and the SplitEtcd fault; Partition leaves the in-memory kube-apiserver answering. See
// docs/sim.md.
type Light struct {
	log     logr.Logger
	manager inmemoryruntime.Manager
	// apiHandler serves every cluster's Kubernetes API (newMemoryAPIHandler).
	apiHandler http.Handler

	mu       sync.Mutex
	rand     *rand.Rand
	clusters []*memEtcd
}

// NewLight starts the in-memory store light nodes share; it lives as long as ctx.
func NewLight(ctx context.Context, log logr.Logger) (*Light, error) {
	manager := inmemoryruntime.NewManager(kubescheme.Scheme)
	if err := manager.Start(logr.NewContext(ctx, log)); err != nil {
		return nil, fmt.Errorf("failed to start the in-memory API store: %w", err)
	}
	//nolint:gosec // etcd member and cluster IDs, not secrets
	l := &Light{log: log, manager: manager, rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	l.apiHandler = newMemoryAPIHandler(l)
	return l, nil
}

func (l *Light) newID() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return newMemberID(l.rand)
}

// Clusters is the number of etcd clusters light nodes hold.
func (l *Light) Clusters() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clusters)
}

func (l *Light) snapshot() []*memEtcd {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.clusters)
}

// newCluster makes the one-member cluster a Bootstrap starts.
func (l *Light) newCluster(peerURL string) *memEtcd {
	c := &memEtcd{light: l, id: l.newID()}
	c.members = []*memMember{{id: l.newID(), peerURLs: []string{peerURL}}}
	l.mu.Lock()
	l.clusters = append(l.clusters, c)
	l.mu.Unlock()
	return c
}

// cluster finds a cluster by ID.
func (l *Light) cluster(id uint64) *memEtcd {
	for _, c := range l.snapshot() {
		if c.id == id {
			return c
		}
	}
	return nil
}

// clusterOfPeer finds the newest cluster with a member at peerURL that does not run.
func (l *Light) clusterOfPeer(peerURL string) *memEtcd {
	clusters := l.snapshot()
	for i := len(clusters) - 1; i >= 0; i-- {
		c := clusters[i]
		c.mu.Lock()
		m := c.memberWithPeer(peerURL)
		found := m != nil && !m.running
		c.mu.Unlock()
		if found {
			return c
		}
	}
	return nil
}

// client is a client of the cluster whose running member serves one of endpoints, as an etcd
// client of those endpoints talks to the first that answers.
func (l *Light) client(endpoints []string) (*clientv3.Client, error) {
	for _, c := range l.snapshot() {
		c.mu.Lock()
		for _, m := range c.members {
			if m.running && slices.ContainsFunc(m.clientURLs, func(u string) bool { return slices.Contains(endpoints, u) }) {
				c.mu.Unlock()
				return c.client(m.id, endpoints...), nil
			}
		}
		c.mu.Unlock()
	}
	return nil, fmt.Errorf("failed to create etcd client: no etcd member answers at %s", strings.Join(endpoints, ", "))
}

// forgetCluster drops a cluster and its Kubernetes objects. Callers hold c.mu.
func (l *Light) forgetCluster(c *memEtcd) {
	l.mu.Lock()
	l.clusters = slices.DeleteFunc(l.clusters, func(other *memEtcd) bool { return other == c })
	l.mu.Unlock()
	c.forgotten, c.leader = true, 0
	if c.api != nil {
		c.api.drop()
		c.api = nil
	}
}

// Forget drops the clusters whose members all have addresses in prefix, with their
// Kubernetes objects: their nodes are gone for good, as a deleted cluster's disks.
func (l *Light) Forget(prefix netip.Prefix) {
	for _, c := range l.snapshot() {
		c.mu.Lock()
		inside := len(c.members) > 0 && !slices.ContainsFunc(c.members, func(m *memMember) bool {
			return !slices.ContainsFunc(m.peerURLs, func(u string) bool { return prefix.Contains(urlAddr(u)) })
		})
		if inside {
			for _, m := range c.members {
				if m.running {
					m.running = false
					close(m.stopped)
				}
			}
			l.forgetCluster(c)
		}
		c.mu.Unlock()
	}
}

// urlAddr is the IP address of a URL's host, invalid when it has none.
func urlAddr(raw string) netip.Addr {
	u, err := url.Parse(raw)
	if err != nil {
		return netip.Addr{}
	}
	addr, _ := netip.ParseAddr(u.Hostname())
	return addr
}

// memberFile, in a light member's data directory, holds the IDs of its cluster and itself:
// what a member's data on disk tells etcd when it starts again.
const memberFile = "member"

// startMemoryMember is startEtcd for a light node: "new" bootstraps a cluster of one, and
// "existing" runs the member this node was added as, or (with data) the member it was.
func (n *Node) startMemoryMember(dataDir, name, state string) (*etcdMember, error) {
	light, peer := n.opts.Light, etcdPeer(n.ip)
	var c *memEtcd
	if state == "new" {
		c = light.newCluster(peer)
	} else if data, err := os.ReadFile(filepath.Join(dataDir, memberFile)); err == nil { //nolint:gosec // the node's own state directory
		clusterID, _, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
		id, err := strconv.ParseUint(clusterID, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("etcd: bad member file in %s: %w", dataDir, err)
		}
		if c = light.cluster(id); c == nil {
			return nil, fmt.Errorf("etcd: the cluster %x of this member no longer exists", id)
		}
	} else if c = light.clusterOfPeer(peer); c == nil {
		return nil, errors.New("etcd: no cluster has a member with peer URL " + peer + ": add it first")
	}
	m, stopped, err := c.start(peer, name, etcdEndpoint(n.ip))
	if err == nil {
		err = writeFilesIn(dataDir, map[string][]byte{memberFile: fmt.Appendf(nil, "%x %x\n", c.id, m.id)})
		if err != nil {
			c.stop(m)
		}
	}
	if err != nil {
		if state == "new" {
			// Nothing was written: no node will ever find this cluster.
			c.mu.Lock()
			light.forgetCluster(c)
			c.mu.Unlock()
		}
		return nil, err
	}
	return &etcdMember{mem: m, memStopped: stopped, memCluster: c, client: c.client(m.id, etcdEndpoint(n.ip)), dir: dataDir}, nil
}

// startEtcd starts the node's etcd member: the etcd server library, or on a light node a
// member of an in-memory cluster. initialCluster is "name=peerURL,..."; state is "new" for
// the bootstrap member and "existing" for a joining one.
func (n *Node) startEtcd(ctx context.Context, dataDir string, tlsInfo transport.TLSInfo, name, initialCluster, state string) (*etcdMember, error) {
	if n.opts.Light != nil {
		return n.startMemoryMember(dataDir, name, state)
	}
	return startEtcdServer(ctx, dataDir, tlsInfo, name, n.ip, initialCluster, state, n.opts.SharedNetworkNamespace, n.logs.of("etcd"))
}

// etcdClient is a client of the etcd members at endpoints.
func (n *Node) etcdClient(tlsInfo transport.TLSInfo, endpoints ...string) (*clientv3.Client, error) {
	if n.opts.Light != nil {
		return n.opts.Light.client(endpoints)
	}
	return newEtcdClient(tlsInfo, endpoints...)
}
