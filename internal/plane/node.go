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

package plane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The binaries a plane with a node (Options.Node) runs besides the control plane's.
const (
	SchedulerBinary  = "kube-scheduler"
	KubeletBinary    = "kubelet"
	ProxyBinary      = "kube-proxy"
	CRIDockerdBinary = "cri-dockerd"
)

// NodeName is the name of a plane's node.
const NodeName = "talon-plane"

// DefaultPauseImage is the Pod sandbox image `make pause-image` builds (no image is
// pulled, so it must exist in the Docker Engine).
const DefaultPauseImage = "ghcr.io/talon-capi/talon-pause:dev"

// podContainerLabel marks every container cri-dockerd makes for a Pod.
const podContainerLabel = "io.kubernetes.docker.type"

// kubeletSysctls are the host settings the kubelet changes (it sets what Kubernetes
// expects of a node) and the plane puts back when it stops.
var kubeletSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// kubeletChains are the iptables chains the kubelet makes; kube-proxy --cleanup removes
// only its own.
var kubeletChains = []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}

// dockerUserRules let Pods on Docker's default bridge reach containers on other bridge
// networks (the Docker clusters' nodes and load balancers), and the answers come back:
// Docker isolates its networks from each other otherwise. docs/install.md tells users of a
// Docker management host to add the same two rules.
var dockerUserRules = [][]string{
	{"-i", "docker0", "-o", "br-+", "-j", "ACCEPT"},
	{"-i", "br-+", "-o", "docker0", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
}

// kubeletHostDirs are the host directories the kubelet makes whatever its root directory:
// its device plugins' socket directory lives under /var/lib/kubelet, and it links every
// container's log from /var/log/containers.
var kubeletHostDirs = []string{"/var/lib/kubelet", "/var/log/containers"}

// nodeLockPath is the lock a plane with a node holds while it runs, so that two on one
// machine (say, tests of two packages run in parallel) take turns: they would share the
// Docker Engine's Pods, the kubelet's host directories and kube-proxy's chains.
const nodeLockPath = "/run/talon-plane-node.lock"

// nodeState is what a plane with a node records about its host, so that Stop puts it
// back as it found it.
type nodeState struct {
	// HostIP is the address Pods reach the API server at (kube-apiserver advertises it).
	HostIP string `json:"hostIP"`
	// PodCIDR is Docker's default bridge network, where Pods get their addresses.
	PodCIDR string `json:"podCIDR"`
	// Sysctls are the values of kubeletSysctls before the kubelet started.
	Sysctls map[string]string `json:"sysctls"`
	// NFTables are the nftables tables ("family name") that existed before.
	NFTables []string `json:"nfTables"`
	// DockerUserRules are the indexes of the dockerUserRules the plane added (a rule that
	// was there before, say a user's own, is left alone).
	DockerUserRules []int `json:"dockerUserRules,omitempty"`
	// CreatedDirs are the kubelet's fixed host directories (kubeletHostDirs) that did not
	// exist before; Stop removes them.
	CreatedDirs []string `json:"createdDirs,omitempty"`
	// KubeProxyStarted says kube-proxy may have programmed the host: only then does Stop
	// clean up after it and the kubelet.
	KubeProxyStarted bool `json:"kubeProxyStarted,omitempty"`
	// Cleaned says Stop has put the host back: a second Stop does nothing.
	Cleaned bool `json:"cleaned,omitempty"`
	// ProxyHealthzPort and ProxyMetricsPort are kube-proxy's loopback ports.
	ProxyHealthzPort int `json:"proxyHealthzPort"`
	ProxyMetricsPort int `json:"proxyMetricsPort"`
}

// CheckNode says why a plane with a node cannot run on this machine from binDir with
// pauseImage as the Pod sandbox, or nil if it can.
func CheckNode(ctx context.Context, binDir, pauseImage string) error {
	for _, name := range []string{EtcdBinary, APIServerBinary, ControllerManagerBinary, SchedulerBinary, KubeletBinary, ProxyBinary, CRIDockerdBinary} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("%s not found in %s: run 'make tools' first", name, binDir)
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("a kubelet needs root: it mounts volumes, sets sysctls and, with kube-proxy, iptables rules")
	}
	for _, tool := range []string{"docker", "iptables", "nft", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("a plane with a node needs %s: %w", tool, err)
		}
	}
	if _, err := command(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", pauseImage); err != nil {
		return fmt.Errorf("the Pod sandbox image %s is not in the Docker Engine (run 'make pause-image'): %w", pauseImage, err)
	}
	return nil
}

// checkNoOtherNode fails when the Docker Engine runs Pods of another kubelet. Only a plane
// holding the node lock asks: another plane with a node on this machine holds the lock
// while it runs, and its Pods are no reason to refuse, only to wait.
func checkNoOtherNode(ctx context.Context) error {
	// cri-dockerd finds Pods by their containers' labels, so a second node on the same
	// Docker Engine would take the first one's Pods for its own and remove them.
	out, err := command(ctx, "docker", "ps", "--all", "--quiet", "--filter", "label="+podContainerLabel)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return errors.New("this Docker Engine already runs Pods of a kubelet (a leftover of a plane with a node, or a kubelet not started by Talon): one node per Docker Engine; stop it first, or remove the containers labelled " + podContainerLabel)
	}
	return nil
}

// prepareNode checks what a node needs and records the host's state before anything
// changes it.
func (p *Plane) prepareNode(ctx context.Context, pauseImage string) error {
	if err := p.lockNode(ctx); err != nil {
		return err
	}
	if err := CheckNode(ctx, p.state.BinDir, pauseImage); err != nil {
		p.unlockNode()
		return err
	}
	if err := p.recoverKilledNode(ctx); err != nil {
		p.unlockNode()
		return err
	}
	if err := checkNoOtherNode(ctx); err != nil {
		p.unlockNode()
		return err
	}
	if out, err := command(ctx, "iptables-save"); err != nil {
		p.unlockNode()
		return err
	} else if bytes.Contains(out, []byte("\n:KUBE-")) {
		p.unlockNode()
		return errors.New("this machine's iptables hold KUBE-* chains: it is a Kubernetes node already, or a kubelet-run plane left them; a plane with a node would remove them when it stops")
	}
	if out, err := command(ctx, "iptables", "-S", "DOCKER-USER"); err != nil || !bytes.Contains(out, []byte("-N DOCKER-USER")) {
		p.unlockNode()
		return fmt.Errorf("no DOCKER-USER chain in iptables (Docker Engine runs without its iptables rules?): Pods could not reach Docker networks: %w", err)
	}
	hostIP, err := outboundAddress()
	if err != nil {
		return err
	}
	podCIDR, err := command(ctx, "docker", "network", "inspect", "bridge", "--format", "{{(index .IPAM.Config 0).Subnet}}")
	if err != nil {
		return fmt.Errorf("cannot find Docker's default bridge network: %w", err)
	}
	node := &nodeState{HostIP: hostIP.String(), PodCIDR: string(bytes.TrimSpace(podCIDR)), Sysctls: map[string]string{}}
	for _, dir := range kubeletHostDirs {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			node.CreatedDirs = append(node.CreatedDirs, dir)
		}
	}
	for _, key := range kubeletSysctls {
		out, err := command(ctx, "sysctl", "--values", key)
		if err != nil {
			continue // not on this kernel
		}
		node.Sysctls[key] = string(bytes.TrimSpace(out))
	}
	if node.NFTables, err = nftTables(ctx); err != nil {
		return err
	}
	if node.ProxyHealthzPort, err = freePort(ctx); err != nil {
		return err
	}
	if node.ProxyMetricsPort, err = freePort(ctx); err != nil {
		return err
	}
	p.state.Node = node
	if err := p.save(); err != nil {
		return err
	}
	return p.recordNodeOwner()
}

// outboundAddress is the address this machine sends from on its default route: Pods on
// Docker's bridge reach the host there.
func outboundAddress() (net.IP, error) {
	// A UDP "connection" sends nothing; it only picks the route and source address.
	conn, err := net.Dial("udp4", "198.51.100.1:9") //nolint:noctx // no packet is sent
	if err != nil {
		return nil, fmt.Errorf("cannot find this machine's address on its default route (a plane with a node needs one): %w", err)
	}
	defer func() { _ = conn.Close() }()
	addr, ok := conn.LocalAddr().(*net.UDPAddr)
	if !ok {
		return nil, fmt.Errorf("unexpected local address %s", conn.LocalAddr())
	}
	return addr.IP, nil
}

// nodeSANs are the addresses the API server's certificate names besides loopback: Pods
// reach it at the host's address, and through the kubernetes Service (10.96.0.1).
func (p *Plane) nodeSANs() []net.IP {
	if p.state.Node == nil {
		return nil
	}
	return []net.IP{net.ParseIP(p.state.Node.HostIP)}
}

// startNode runs the scheduler, cri-dockerd, the kubelet and kube-proxy, lets Pods reach
// other Docker networks, and waits until the node is Ready and Pods can get service
// account tokens.
func (p *Plane) startNode(ctx context.Context, pauseImage string) error {
	node := p.state.Node
	bin := func(name string) string { return filepath.Join(p.state.BinDir, name) }
	p.logf("Starting kube-scheduler\n")
	if _, err := p.run(SchedulerBinary, bin(SchedulerBinary), []string{
		"--kubeconfig=" + p.Kubeconfig(), "--authentication-kubeconfig=" + p.Kubeconfig(), "--authorization-kubeconfig=" + p.Kubeconfig(),
		"--leader-elect=false", "--secure-port=0", "--v=0",
	}, nil); err != nil {
		return err
	}

	runDir := filepath.Join(p.dir, "node")
	socket := filepath.Join(runDir, "cri-dockerd.sock")
	p.logf("Starting cri-dockerd (Pods are containers of this Docker Engine, on its default bridge %s)\n", node.PodCIDR)
	crid, err := p.run(CRIDockerdBinary, bin(CRIDockerdBinary), []string{
		"--container-runtime-endpoint=unix://" + socket,
		"--cri-dockerd-root-directory=" + filepath.Join(runDir, "cri-dockerd"),
		"--pod-infra-container-image=" + pauseImage,
		// No network plugin: each Pod is a container on Docker's default bridge.
		"--network-plugin=", "--streaming-bind-addr=127.0.0.1:0",
	}, nil)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, crid, 60*time.Second, "serving", func(context.Context) error {
		_, err := os.Stat(socket)
		return err
	}); err != nil {
		return err
	}

	kubeletPort, err := freePort(ctx)
	if err != nil {
		return err
	}
	kubeletConfig := filepath.Join(runDir, "kubelet.yaml")
	if err := os.WriteFile(kubeletConfig, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[1]s}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://%[2]s
# Docker Engine's cgroup driver; cri-dockerd cannot report it.
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
localStorageCapacityIsolation: false
# The Docker Engine is shared and nothing can be pulled again: never collect images.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
clusterDomain: cluster.local
healthzPort: 0
port: %[3]d
readOnlyPort: 0
podCIDR: %[4]s
podLogsDir: %[5]s
serializeImagePulls: false
`, p.pki("ca.crt"), socket, kubeletPort, node.PodCIDR, filepath.Join(runDir, "pod-logs"))), 0o600); err != nil {
		return err
	}
	p.logf("Starting the kubelet of node %s (%s)\n", NodeName, node.HostIP)
	kubelet, err := p.run(KubeletBinary, bin(KubeletBinary), []string{
		"--config=" + kubeletConfig, "--kubeconfig=" + filepath.Join(p.dir, "kubelet.kubeconfig"),
		"--root-dir=" + filepath.Join(runDir, "kubelet"), "--cert-dir=" + filepath.Join(runDir, "kubelet", "pki"),
		"--hostname-override=" + NodeName, "--node-ip=" + node.HostIP,
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}

	proxyConfig := filepath.Join(runDir, "kube-proxy.yaml")
	if err := os.WriteFile(proxyConfig, []byte(fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %[1]s}
mode: iptables
hostnameOverride: %[2]s
clusterCIDR: %[3]s
# Leave the host's conntrack and route_localnet settings alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
healthzBindAddress: 127.0.0.1:%[4]d
metricsBindAddress: 127.0.0.1:%[5]d
`, p.Kubeconfig(), NodeName, node.PodCIDR, node.ProxyHealthzPort, node.ProxyMetricsPort)), 0o600); err != nil {
		return err
	}
	p.logf("Starting kube-proxy (iptables)\n")
	node.KubeProxyStarted = true // recorded first: Stop cleans up after it however far it got
	if err := p.save(); err != nil {
		return err
	}
	if _, err := p.run(ProxyBinary, bin(ProxyBinary), []string{"--config=" + proxyConfig, "--v=0"}, nil); err != nil {
		return err
	}

	p.logf("Letting Pods reach the containers of other Docker networks (DOCKER-USER)\n")
	for i, rule := range slices.Backward(dockerUserRules) {
		if _, err := command(ctx, "iptables", append([]string{"-C", "DOCKER-USER"}, rule...)...); err == nil {
			continue // there already, and stays when the plane stops
		}
		node.DockerUserRules = append(node.DockerUserRules, i) // recorded first
		if err := p.save(); err != nil {
			return err
		}
		if _, err := command(ctx, "iptables", append([]string{"-I", "DOCKER-USER"}, rule...)...); err != nil {
			return err
		}
	}

	c, err := p.Client(client.Options{})
	if err != nil {
		return err
	}
	if err := waitFor(ctx, kubelet, 120*time.Second, "serving (node Ready)", func(ctx context.Context) error {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: NodeName}, &n); err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready", NodeName)
	}); err != nil {
		return err
	}
	return waitFor(ctx, kubelet, 60*time.Second, "serving (default ServiceAccount)", func(ctx context.Context) error {
		return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
	})
}

// cleanNode undoes what the node did to the host once its processes have stopped: the
// Pods' containers, kube-proxy's and the kubelet's iptables chains, the nftables tables
// they made, the DOCKER-USER rules, the kubelet's mounts and sysctls.
func (p *Plane) cleanNode(ctx context.Context) error {
	node := p.state.Node
	if node == nil || node.Cleaned {
		p.unlockNode()
		return nil
	}
	var errs []error
	if ids, err := command(ctx, "docker", "ps", "--all", "--quiet", "--filter", "label="+podContainerLabel); err != nil {
		errs = append(errs, err)
	} else if ids := strings.Fields(string(ids)); len(ids) > 0 {
		p.logf("Removing %d Pod containers\n", len(ids))
		_, err := command(ctx, "docker", append([]string{"rm", "--force", "--volumes"}, ids...)...)
		errs = append(errs, err)
	}
	if node.KubeProxyStarted {
		p.cleanKubeChains(ctx)
	}
	for _, i := range node.DockerUserRules {
		if _, err := command(ctx, "iptables", append([]string{"-D", "DOCKER-USER"}, dockerUserRules[i]...)...); err != nil {
			errs = append(errs, err)
		}
	}
	node.DockerUserRules = nil
	errs = append(errs, p.removeNewNFTables(ctx, node.NFTables), unmountUnder(filepath.Join(p.dir, "node")))
	for _, dir := range node.CreatedDirs {
		errs = append(errs, unmountUnder(dir), os.RemoveAll(dir))
	}
	// The kubelet links each container's log from /var/log/containers.
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, link := range links {
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, p.dir+"/") {
			errs = append(errs, os.Remove(link))
		}
	}
	for key, value := range node.Sysctls {
		if _, err := command(ctx, "sysctl", "--write", key+"="+value); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return errors.Join(err, p.save())
	}
	node.Cleaned = true
	err := p.save()
	p.unlockNode()
	return err
}

// cleanKubeChains removes kube-proxy's and the kubelet's iptables chains (prepareNode
// made sure there were none before); a chain already gone is no error.
func (p *Plane) cleanKubeChains(ctx context.Context) {
	if _, err := os.Stat(filepath.Join(p.state.BinDir, ProxyBinary)); err == nil {
		// It exits non-zero when some chain it would remove is absent.
		_, _ = command(ctx, filepath.Join(p.state.BinDir, ProxyBinary), "--cleanup")
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, chain := range []string{"INPUT", "OUTPUT"} {
			for {
				if _, err := command(ctx, ipt, "-t", "filter", "-D", chain, "-j", "KUBE-FIREWALL"); err != nil {
					break
				}
			}
		}
		for _, table := range []string{"filter", "nat", "mangle"} {
			for _, chain := range kubeletChains {
				if _, err := command(ctx, ipt, "-t", table, "-F", chain); err == nil {
					_, _ = command(ctx, ipt, "-t", table, "-X", chain)
				}
			}
		}
	}
}

// lockNode takes nodeLockPath, waiting while another plane with a node holds it, unless
// the plane was started with the lock held already (Options.nodeLock).
func (p *Plane) lockNode(ctx context.Context) error {
	if p.nodeLock != nil {
		return nil
	}
	f, err := takeNodeLock(ctx, p.log)
	if err != nil {
		return err
	}
	p.nodeLock = f
	return nil
}

// takeNodeLock takes nodeLockPath and returns it open: closing it lets the next plane with a
// node start. It says on log when it has to wait.
func takeNodeLock(ctx context.Context, log io.Writer) (*os.File, error) {
	f, err := os.OpenFile(nodeLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	waiting := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("failed to lock %s: %w", nodeLockPath, err)
		}
		if !waiting {
			_, _ = fmt.Fprintf(log, "Waiting for the other plane with a node on this machine to stop (%s)\n", nodeLockPath)
			waiting = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// recoverKilledNode puts the host back after the plane with a node that held the node lock
// before (recordNodeOwner) when that plane never stopped and none of its processes runs any
// more: they were all killed, or the machine restarted. Its Pods' containers, iptables
// chains and mounts would otherwise refuse every later plane with a node. A plane with a
// live process, such as one "talon up" left running, is left alone (checkNoOtherNode then
// refuses to start beside it), and so is one recorded from another PID namespace, whose
// processes this one cannot see.
func (p *Plane) recoverKilledNode(ctx context.Context) error {
	record, err := io.ReadAll(io.NewSectionReader(p.nodeLock, 0, 4096))
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", nodeLockPath, err)
	}
	dir, pidNamespace, _ := strings.Cut(strings.TrimSpace(string(record)), "\n")
	if dir == "" || dir == p.dir || pidNamespace != ownPIDNamespace() {
		return nil
	}
	old, err := Open(dir, p.log)
	if err != nil || old.state.Node == nil || old.state.Node.Cleaned {
		return nil //nolint:nilerr // no state left behind (removed, or never a node): nothing to put back
	}
	for _, proc := range old.state.Processes {
		if proc.Alive() {
			return nil
		}
	}
	p.logf("The plane with a node in %s ended without stopping (killed?): putting the host back as it recorded it\n", dir)
	if err := old.Stop(ctx); err != nil {
		return fmt.Errorf("failed to put the host back after the plane with a node in %s, whose processes are gone: %w", dir, err)
	}
	return nil
}

// recordNodeOwner writes into the node lock this plane's directory and PID namespace, once
// its node state is saved, for recoverKilledNode of the next plane: until then the lock
// keeps naming the plane before, whose state is still to be put back.
func (p *Plane) recordNodeOwner() error {
	if err := p.nodeLock.Truncate(0); err != nil {
		return fmt.Errorf("failed to record this plane in %s: %w", nodeLockPath, err)
	}
	if _, err := p.nodeLock.WriteAt([]byte(p.dir+"\n"+ownPIDNamespace()+"\n"), 0); err != nil {
		return fmt.Errorf("failed to record this plane in %s: %w", nodeLockPath, err)
	}
	return nil
}

// ownPIDNamespace names this process's PID namespace (pid:[inode]); empty if unknown.
func ownPIDNamespace() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
}

// unlockNode lets the next plane with a node start.
func (p *Plane) unlockNode() {
	if p.nodeLock != nil && !p.callerLocked {
		_ = p.nodeLock.Close() // closing releases the lock
	}
	p.nodeLock = nil
}

// nftTables lists the nftables tables as "family name".
func nftTables(ctx context.Context) ([]string, error) {
	out, err := command(ctx, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	var tables []string
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, rest)
		}
	}
	return tables, nil
}

// removeNewNFTables deletes the nftables tables that did not exist before (the kubelet
// makes some through iptables-nft) when no rule is left in them.
func (p *Plane) removeNewNFTables(ctx context.Context, before []string) error {
	now, err := nftTables(ctx)
	if err != nil {
		return err
	}
	for _, table := range now {
		if slices.Contains(before, table) {
			continue
		}
		family, name, _ := strings.Cut(table, " ")
		listing, err := command(ctx, "nft", "list", "table", family, name)
		if err != nil {
			return err
		}
		if nftRules(listing) > 0 {
			p.logf("Leaving nftables table %s: it holds rules\n", table)
			continue
		}
		if _, err := command(ctx, "nft", "delete", "table", family, name); err != nil {
			return err
		}
	}
	return nil
}

// nftRules counts the rules in an `nft list table` listing.
func nftRules(listing []byte) int {
	rules := 0
	for line := range strings.Lines(string(listing)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "", line == "}", strings.HasPrefix(line, "table "), strings.HasPrefix(line, "chain "),
			strings.HasPrefix(line, "type "), strings.HasPrefix(line, "policy "):
		default:
			rules++
		}
	}
	return rules
}

// unmountUnder unmounts every mount below dir (the kubelet mounts Secret and projected
// volumes as tmpfs there), deepest first.
func unmountUnder(dir string) error {
	mounts, err := os.Open("/proc/self/mounts")
	if err != nil {
		return err
	}
	defer func() { _ = mounts.Close() }()
	var points []string
	scanner := bufio.NewScanner(mounts)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) > 1 && strings.HasPrefix(fields[1], dir+"/") {
			points = append(points, fields[1])
		}
	}
	slices.Sort(points)
	var errs []error
	for _, point := range slices.Backward(points) {
		if err := unmount(point); err != nil {
			errs = append(errs, fmt.Errorf("failed to unmount %s: %w", point, err))
		}
	}
	return errors.Join(append(errs, scanner.Err())...)
}

// command runs a host tool and returns its standard output; the error holds its standard
// error.
func command(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...) //nolint:gosec // host tools (docker, iptables, nft, sysctl) with arguments the plane makes
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// NodeHostIP is the address Pods reach this machine at, for a plane with a node.
func (p *Plane) NodeHostIP() string {
	if p.state.Node == nil {
		return ""
	}
	return p.state.Node.HostIP
}

// unmount detaches the mount at point, lazily when it is busy.
func unmount(point string) error {
	if err := syscall.Unmount(point, 0); err != nil {
		return syscall.Unmount(point, syscall.MNT_DETACH)
	}
	return nil
}
