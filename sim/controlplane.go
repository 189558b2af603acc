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
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	stdslices "slices"
	"time"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	machinetype "github.com/siderolabs/talos/pkg/machinery/config/machine"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// retryInterval is how often background work of a node (joining etcd, starting services)
// retries while it waits for the rest of the cluster.
const retryInterval = time.Second

// startControlPlane runs what a control-plane node runs once its etcd member is up:
// kube-apiserver; once it answers, the cluster's bootstrap manifests,
// kube-controller-manager, and the kubelet stand-in with the mirror Pods of the static
// control-plane pods. It returns when they run or ctx ends.
func (n *Node) startControlPlane(ctx context.Context, cfg talosconfig.Provider, etcdTLS transport.TLSInfo) error {
	n.controlPlaneStart.Lock()
	defer n.controlPlaneStart.Unlock()
	if ctx.Err() != nil {
		return ctx.Err() // the node stopped before this start began (Stop waits for one under way)
	}
	s, err := n.startAPIServer(ctx, cfg, etcdTLS)
	if err != nil {
		return err
	}
	if !n.adopt(ctx, &n.apiServer, s) {
		return ctx.Err()
	}
	go n.supervise(ctx, &n.apiServer, s, func() (*component, error) { return n.startAPIServer(ctx, cfg, etcdTLS) })
	admin, err := kubeClient(cfg, n.apiServerURL(), "admin", "system:masters")
	if err == nil {
		err = waitForAPIServer(ctx, admin, 90*time.Second)
	}
	if err == nil {
		err = applyBootstrapManifests(ctx, cfg, admin)
	}
	var kcm *component
	if err == nil {
		kcm, err = n.startControllerManager(ctx, cfg)
	}
	if err != nil {
		// Free the ports for the next attempt; the logs in the state directory say why.
		n.stopComponents()
		return err
	}
	if !n.adopt(ctx, &n.controllerManager, kcm) {
		return ctx.Err()
	}
	go n.supervise(ctx, &n.controllerManager, kcm, func() (*component, error) { return n.startControllerManager(ctx, cfg) })
	n.opts.Log.Info("Control plane is up", "kube-apiserver", n.apiServerURL())
	n.mu.Lock()
	kubeletRunning := n.kubelet != nil
	n.mu.Unlock()
	if kubeletRunning {
		// The control plane restarted under a running kubelet: it reports the new pods.
		n.notifyConfigChanged()
		return nil
	}
	n.startKubelet(admin)
	return nil
}

// restartKubernetesIfChanged restarts the node's kube-apiserver and kube-controller-manager
// when a new config changes what they run (their images, that is their versions, or their
// arguments), as Talos replaces a static pod whose definition changed.
func (n *Node) restartKubernetesIfChanged(old, cfg talosconfig.Provider) {
	if cfg.Machine().Type() != machinetype.TypeControlPlane || old == nil {
		return
	}
	wasAPIServer, nowAPIServer := old.K8sAPIServerConfig(), cfg.K8sAPIServerConfig()
	wasControllerManager, nowControllerManager := old.K8sControllerManagerConfig(), cfg.K8sControllerManagerConfig()
	sameArgs := func(a, b map[string][]string) bool { return maps.EqualFunc(a, b, stdslices.Equal) }
	if wasAPIServer.Image() == nowAPIServer.Image() && sameArgs(wasAPIServer.ExtraArgs(), nowAPIServer.ExtraArgs()) &&
		wasControllerManager.Image() == nowControllerManager.Image() &&
		sameArgs(wasControllerManager.ExtraArgs(), nowControllerManager.ExtraArgs()) {
		return
	}
	n.mu.Lock()
	ctx, running := n.servicesCtx, n.apiServer != nil
	n.mu.Unlock()
	if !running || ctx == nil {
		return
	}
	n.opts.Log.Info("Restarting the control plane for the new config",
		"kube-apiserver", nowAPIServer.Image(), "kube-controller-manager", nowControllerManager.Image())
	tlsInfo := etcdTLSInfo(n.stateDir("etcd-pki"))
	go func() {
		// After a start under way, if any: it would otherwise start its components too.
		n.controlPlaneStart.Lock()
		n.stopComponents()
		n.controlPlaneStart.Unlock()
		_ = n.retry(ctx, "Waiting to restart the control plane", func() error { return n.startControlPlane(ctx, cfg, tlsInfo) })
	}()
}

// adopt records a started component in *slot, unless the node stopped or was reset while it
// started: then it stops the component and reports false.
func (n *Node) adopt(ctx context.Context, slot **component, c *component) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ctx.Err() != nil {
		c.stop()
		return false
	}
	*slot = c
	return true
}

// The kubelet's back-off between restarts of a static pod's container that exited: it
// starts at restartBackoff and doubles up to maxRestartBackoff, and starts over once a
// container has run for backoffReset.
const (
	restartBackoff    = 10 * time.Second
	maxRestartBackoff = 5 * time.Minute
	backoffReset      = 10 * time.Minute
)

// supervise restarts the component c of *slot with start when its process exits on its
// own, after the kubelet's back-off, as the kubelet restarts a static pod's container:
// kube-controller-manager exits when it loses its leader lease, as it does when its node
// was frozen longer than the lease. It leaves alone a component the node stopped or
// replaced (its slot no longer holds it), and returns when ctx ends.
func (n *Node) supervise(ctx context.Context, slot **component, c *component, start func() (*component, error)) {
	backoff, started := restartBackoff, c.started
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
		}
		if !n.holds(slot, c) {
			return
		}
		if time.Since(started) >= backoffReset {
			backoff = restartBackoff
		}
		n.opts.Log.Info("A control-plane component exited: restarting it after a back-off, as the kubelet does",
			"component", c.name, "backoff", backoff.String(), "log", n.stateDir(c.name+".previous.log"))
		n.notifyConfigChanged() // the kubelet stand-in reports its static pod not ready now
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff, started = min(2*backoff, maxRestartBackoff), time.Now()
		next, ok := n.restartComponent(ctx, slot, c, start)
		if !ok {
			return
		}
		if next != nil {
			c = next
			n.notifyConfigChanged()
		}
	}
}

// restartComponent starts the exited component old of *slot again and records the new one
// in the slot. It reports false when the node stopped or replaced old meanwhile, and a nil
// component when the start failed (the component's log says why), to be retried.
func (n *Node) restartComponent(ctx context.Context, slot **component, old *component, start func() (*component, error)) (*component, bool) {
	// Not beside a start or a restart of the whole control plane for a new config.
	n.controlPlaneStart.Lock()
	defer n.controlPlaneStart.Unlock()
	if ctx.Err() != nil || !n.holds(slot, old) {
		return nil, false
	}
	next, err := start()
	if err != nil {
		n.opts.Log.Info("Failed to restart a control-plane component", "component", old.name, "reason", err.Error())
		return nil, true
	}
	next.restarts = old.restarts + 1
	n.mu.Lock()
	defer n.mu.Unlock()
	if ctx.Err() != nil || *slot != old {
		next.stop()
		return nil, false
	}
	*slot = next
	return next, true
}

// holds reports whether *slot still holds c.
func (n *Node) holds(slot **component, c *component) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return *slot == c
}

// stopComponents stops the node's Kubernetes control-plane processes.
func (n *Node) stopComponents() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopComponentsLocked()
}

func (n *Node) stopComponentsLocked() {
	n.controllerManager.stop()
	n.apiServer.stop()
	n.controllerManager, n.apiServer = nil, nil
}

// joinControlPlane makes a configured control-plane node that was not bootstrapped a member
// of the cluster's etcd, the way Talos does: it finds the other control-plane nodes through
// the Kubernetes API at the cluster endpoint, adds itself as a learner, starts its member,
// and asks to be promoted once it has caught up. Then it starts its control plane.
func (n *Node) joinControlPlane(ctx context.Context, cfg talosconfig.Provider) {
	var tlsInfo transport.TLSInfo
	hasMember := false
	err := n.retry(ctx, "Waiting to join etcd", func() error {
		var err error
		tlsInfo, err = n.tryJoin(ctx, cfg)
		if errors.Is(err, errHasMember) {
			// Bootstrapped here, or restarted with a member: that path starts the rest.
			hasMember = true
			return nil
		}
		return err
	})
	if err != nil || hasMember {
		return
	}
	_ = n.retry(ctx, "Waiting to start the control plane", func() error { return n.startControlPlane(ctx, cfg, tlsInfo) })
}

// errHasMember means the node already runs (or has data of) an etcd member.
var errHasMember = errors.New("this node already has an etcd member")

// tryJoin makes this node an etcd member of the cluster; it returns the member's TLS files.
func (n *Node) tryJoin(ctx context.Context, cfg talosconfig.Provider) (transport.TLSInfo, error) {
	n.mu.Lock()
	name, hasMember := n.hostnameLocked(), n.etcd != nil || n.bootstrapping
	n.mu.Unlock()
	if hasMember || dirHasData(n.stateDir("etcd")) {
		return transport.TLSInfo{}, errHasMember
	}
	endpoint := clusterEndpoint(cfg)
	if endpoint == nil {
		return transport.TLSInfo{}, errors.New("the config has no cluster endpoint")
	}
	admin, err := kubeClient(cfg, endpoint.String(), "admin", "system:masters")
	if err != nil {
		return transport.TLSInfo{}, err
	}
	// Like Talos' Kubernetes discovery registry, find the other control-plane nodes through
	// their Node objects (EndpointSlices cannot hold the loopback addresses of in-process nodes).
	nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		return transport.TLSInfo{}, fmt.Errorf("no control plane answers at %s yet: %w", endpoint, err)
	}
	var peers []string
	for _, node := range nodes.Items {
		for _, address := range node.Status.Addresses {
			if address.Type == corev1.NodeInternalIP && address.Address != n.ip.String() {
				peers = append(peers, etcdEndpoint(net.ParseIP(address.Address)))
			}
		}
	}
	if len(peers) == 0 {
		return transport.TLSInfo{}, errors.New("no other control-plane node is registered yet")
	}
	tlsInfo, err := writeEtcdPKI(n.stateDir("etcd-pki"), cfg.Cluster().Etcd().CA(), name, n.ip)
	if err != nil {
		return transport.TLSInfo{}, err
	}
	c, err := n.etcdClient(tlsInfo, peers...)
	if err != nil {
		return transport.TLSInfo{}, err
	}
	defer func() { _ = c.Close() }()

	// Bound each membership call: etcd clients wait for a healthy endpoint otherwise.
	callCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	peerURL := etcdURL(n.ip, EtcdPeerPort)
	list, err := c.MemberList(callCtx)
	if err != nil {
		return transport.TLSInfo{}, fmt.Errorf("failed to list etcd members: %w", err)
	}
	// A previous attempt may have added this node already.
	if !stdslices.ContainsFunc(list.Members, func(m *etcdserverpb.Member) bool { return stdslices.Contains(m.PeerURLs, peerURL.String()) }) {
		added, err := c.MemberAddAsLearner(callCtx, []string{peerURL.String()})
		if err != nil {
			return transport.TLSInfo{}, fmt.Errorf("failed to add this node as an etcd learner: %w", err)
		}
		list.Members = added.Members
	}
	initial := ""
	for _, m := range list.Members {
		memberName := m.Name
		if stdslices.Contains(m.PeerURLs, peerURL.String()) {
			memberName = name
		}
		for _, u := range m.PeerURLs {
			if initial != "" {
				initial += ","
			}
			initial += memberName + "=" + u
		}
	}
	member, err := n.startEtcd(ctx, n.stateDir("etcd"), tlsInfo, name, initial, "existing")
	if err != nil {
		// Leave no half-made data directory behind: the next attempt starts afresh.
		_ = os.RemoveAll(n.stateDir("etcd"))
		return transport.TLSInfo{}, err
	}
	n.mu.Lock()
	n.etcd = member
	n.mu.Unlock()
	n.watchRemoval(member)
	n.opts.Log.Info("Started etcd as a learner", "member", name)
	// A learner serves no client requests: ask a voting member to promote it.
	if err := n.promote(ctx, c, member.id()); err != nil {
		return transport.TLSInfo{}, err
	}
	n.opts.Log.Info("Joined etcd", "member", name)
	return tlsInfo, nil
}

// restartControlPlane brings a control-plane node back after a restart: its etcd member
// from the data on disk, then its control plane.
func (n *Node) restartControlPlane(ctx context.Context, cfg talosconfig.Provider) {
	if err := n.retry(ctx, "Waiting to restart etcd", func() error { return n.startOwnEtcd(ctx, cfg) }); err != nil {
		return
	}
	tlsInfo := etcdTLSInfo(n.stateDir("etcd-pki"))
	if err := n.retry(ctx, "Waiting to start the control plane", func() error { return n.startControlPlane(ctx, cfg, tlsInfo) }); err != nil {
		return
	}
}

// startOwnEtcd starts the node's etcd member from its data directory: with data on disk,
// etcd ignores the initial cluster and rejoins its own.
func (n *Node) startOwnEtcd(ctx context.Context, cfg talosconfig.Provider) error {
	name := n.hostname()
	tlsInfo, err := writeEtcdPKI(n.stateDir("etcd-pki"), cfg.Cluster().Etcd().CA(), name, n.ip)
	if err != nil {
		return err
	}
	member, err := n.startEtcd(ctx, n.stateDir("etcd"), tlsInfo, name, name+"="+etcdPeer(n.ip), "existing")
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if ctx.Err() != nil {
		member.stop()
		return ctx.Err()
	}
	n.etcd = member
	n.watchRemoval(member)
	return nil
}

// promote asks the cluster to make this learner a voting member until it has caught up.
// Like Talos, it logs why a promotion failed (once for each new reason).
func (n *Node) promote(ctx context.Context, c *clientv3.Client, id uint64) error {
	last := ""
	for {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.MemberPromote(callCtx, id)
		cancel()
		if err == nil {
			return nil
		}
		if err.Error() != last {
			last = err.Error()
			n.opts.Log.Info("Waiting for promotion", "reason", last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retryInterval / 2):
		}
	}
}

// kubeconfigArchive is the admin kubeconfig for the cluster endpoint, packed as Talos packs
// it: a gzipped tar holding one file named kubeconfig.
func kubeconfigArchive(cfg talosconfig.Provider) ([]byte, error) {
	endpoint := clusterEndpoint(cfg)
	if endpoint == nil {
		return nil, errors.New("the config has no cluster endpoint")
	}
	data, err := adminKubeconfig(cfg, endpoint.String())
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "kubeconfig", Mode: 0o600, Size: int64(len(data)), ModTime: time.Now()}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
