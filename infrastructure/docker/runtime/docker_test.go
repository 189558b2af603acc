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
	"encoding/base64"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	containertypes "github.com/moby/moby/api/types/container"
	networktypes "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	. "github.com/onsi/gomega"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/require"
)

// dockerTestSubnet is this package's subnet: no other test uses it.
var dockerTestSubnet = netip.MustParsePrefix("172.30.120.0/24")

// TestDockerLifecycle creates a cluster's network, a node and the load balancer with the
// simulator image standing in for Talos and `talon lb`, checks each container is what
// `talosctl cluster create` would run, and deletes everything again.
func TestDockerLifecycle(t *testing.T) {
	ctx := t.Context()
	d := newTestDocker(t)
	if !docker.CanRunPrivileged(ctx) {
		t.Log("This Docker Engine cannot run privileged containers: the nodes run unprivileged")
		d = newTestDocker(t, WithUnprivilegedNodes())
	}
	g := NewWithT(t)
	cluster := Cluster{Namespace: "talon-rt-test", Name: "lifecycle"}
	cleanUpCluster(t, cluster)

	spec := NetworkSpec{Name: "talon-rt-test-lifecycle", Subnet: dockerTestSubnet, MTU: 1400}
	network, err := d.EnsureNetwork(ctx, cluster, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(network).To(Equal(Network{Name: spec.Name, Subnet: dockerTestSubnet, Gateway: netip.MustParseAddr("172.30.120.1")}))
	g.Expect(d.EnsureNetwork(ctx, cluster, spec)).To(Equal(network))
	g.Expect(dockerCLI(t, "network", "inspect", "--format", `{{index .Options "com.docker.network.driver.mtu"}}`, spec.Name)).To(Equal("1400"))

	address := netip.MustParseAddr("172.30.120.10")
	userData := simtest.Render(t, bootstrapv1.GenerateTypeControlPlane, "talon-rt-test-cp-0", address.String())
	mountDir := t.TempDir()
	node := NodeSpec{
		Cluster: cluster, Machine: "cp-0", Name: "talon-rt-test-cp-0", Role: RoleControlPlane,
		Image: docker.SimImage(), TalosVersion: "v1.13.3", Network: spec.Name, Address: address,
		NanoCPUs: 1_500_000_000, MemoryBytes: 1 << 30, UserData: userData,
		Env:    map[string]string{"TALON_TEST": "yes"},
		Mounts: []Mount{{HostPath: mountDir, ContainerPath: "/mnt/extra", ReadOnly: true}},
		Ports:  []PortMapping{{ContainerPort: 50000, Protocol: "tcp", HostIP: "127.0.0.1"}},
	}
	want := Node{Name: node.Name, Machine: "cp-0", Role: RoleControlPlane, Address: address, Running: true}
	g.Expect(d.CreateNode(ctx, node)).To(Equal(want))
	g.Expect(d.CreateNode(ctx, node)).To(Equal(want), "a second CreateNode returns the same container")
	dockerCLI(t, "stop", node.Name)
	g.Expect(d.Nodes(ctx, cluster)).To(ConsistOf(HaveField("Running", false)))
	g.Expect(d.CreateNode(ctx, node)).To(Equal(want), "CreateNode starts a stopped container")
	g.Expect(strings.Fields(dockerCLI(t, "ps", "--all", "--quiet", "--filter", "label="+LabelMachine+"=cp-0"))).To(HaveLen(1))
	g.Expect(d.Nodes(ctx, cluster)).To(ConsistOf(want))
	dockerCLI(t, "pause", node.Name)
	g.Expect(d.Nodes(ctx, cluster)).To(ConsistOf(want), "a paused container is frozen, not stopped")
	g.Expect(d.CreateNode(ctx, node)).To(Equal(want), "CreateNode leaves a paused container as it is")
	dockerCLI(t, "unpause", node.Name)

	c := docker.Inspect(t, node.Name)
	g.Expect(c.Config.Hostname).To(Equal(node.Name))
	g.Expect(c.Config.Labels).To(Equal(map[string]string{
		LabelNamespace: "talon-rt-test", LabelCluster: "lifecycle", LabelMachine: "cp-0", LabelRole: RoleControlPlane,
	}))
	g.Expect(c.Config.Env).To(ContainElements("PLATFORM=container", "TALOSSKU=2CPU-1024RAM", "TALON_TEST=yes"))
	g.Expect(envValue(c.Config.Env, "USERDATA")).To(WithTransform(base64.StdEncoding.DecodeString, Equal(userData)))
	g.Expect(c.HostConfig.Privileged).To(Equal(d.privileged))
	g.Expect(c.HostConfig.SecurityOpt).To(ConsistOf("seccomp=unconfined"))
	g.Expect(c.HostConfig.ReadonlyRootfs).To(BeTrue())
	g.Expect(c.HostConfig.Tmpfs).To(HaveKey("/run"))
	g.Expect(c.HostConfig.Tmpfs).To(HaveKey("/system"))
	g.Expect(c.HostConfig.Tmpfs).To(HaveKey("/tmp"))
	g.Expect(c.HostConfig.Sysctls).To(Equal(map[string]string{"net.ipv6.conf.all.disable_ipv6": "0"}))
	g.Expect(c.HostConfig.NanoCPUs).To(Equal(node.NanoCPUs))
	g.Expect(c.HostConfig.Memory).To(Equal(node.MemoryBytes))
	g.Expect(c.HostConfig.RestartPolicy.Name).To(Equal(containertypes.RestartPolicyDisabled))
	g.Expect(c.NetworkSettings.Networks[spec.Name].IPAMConfig.IPv4Address).To(Equal(address))
	g.Expect(c.NetworkSettings.Networks[spec.Name].IPAddress).To(Equal(address))
	mounts := make([]string, 0, len(c.Mounts))
	for _, m := range c.Mounts {
		mounts = append(mounts, string(m.Type)+":"+m.Name+":"+m.Destination+":"+strconv.FormatBool(m.RW))
	}
	g.Expect(mounts).To(ConsistOf(
		"volume:talon-rt-test-cp-0-var:/var:true",
		"volume:talon-rt-test-cp-0-system-state:/system/state:true",
		"volume:talon-rt-test-cp-0-etc-cni:/etc/cni:true",
		"volume:talon-rt-test-cp-0-etc-kubernetes:/etc/kubernetes:true",
		"volume:talon-rt-test-cp-0-usr-libexec-kubernetes:/usr/libexec/kubernetes:true",
		"volume:talon-rt-test-cp-0-opt:/opt:true",
		"bind::/mnt/extra:false",
	))
	g.Expect(strings.Fields(dockerCLI(t, "volume", "ls", "--quiet", "--filter", "label="+LabelMachine+"=cp-0",
		"--filter", "label="+LabelCluster+"=lifecycle"))).To(HaveLen(6))
	g.Expect(dockerCLI(t, "port", node.Name, "50000/tcp")).To(HavePrefix("127.0.0.1:"))

	hostPort := freePort(t)
	lbSpec := LoadBalancerSpec{
		Cluster: cluster, Name: "talon-rt-test-lifecycle-lb", Image: docker.SimImage(),
		Network: spec.Name, Address: LoadBalancerAddress(dockerTestSubnet), HostPort: hostPort,
	}
	balancer, err := d.EnsureLoadBalancer(ctx, lbSpec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(balancer).To(Equal(LoadBalancer{Name: lbSpec.Name, Address: netip.MustParseAddr("172.30.120.2"), HostPort: hostPort}))
	g.Expect(d.EnsureLoadBalancer(ctx, lbSpec)).To(Equal(balancer))
	dockerCLI(t, "stop", lbSpec.Name)
	g.Expect(d.EnsureLoadBalancer(ctx, lbSpec)).To(Equal(balancer), "EnsureLoadBalancer starts a stopped container")
	g.Expect(dockerCLI(t, "inspect", "--format", "{{.State.Running}}", lbSpec.Name)).To(Equal("true"))
	c = docker.Inspect(t, lbSpec.Name)
	g.Expect(c.Config.Entrypoint).To(Equal([]string{"/usr/local/bin/talon", "lb", "--address", "0.0.0.0",
		"--port", "6443", "--port", "50001", "--backends-file", "/run/talon-lb/backends"}))
	g.Expect(c.Config.Labels).To(HaveKeyWithValue(LabelRole, RoleLoadBalancer))
	g.Expect(c.HostConfig.RestartPolicy.Name).To(Equal(containertypes.RestartPolicyUnlessStopped))
	g.Expect(readBackendsFile(t, lbSpec.Name)).To(BeEmpty())

	backends := []netip.Addr{netip.MustParseAddr("172.30.120.11"), address}
	g.Expect(d.SetBackends(ctx, cluster, backends)).To(Succeed())
	g.Expect(readBackendsFile(t, lbSpec.Name)).To(Equal("172.30.120.10\n172.30.120.11\n"))
	g.Expect(d.EnsureLoadBalancer(ctx, lbSpec)).To(HaveField("Backends", []netip.Addr{address, backends[0]}))
	written := backendsModTime(t, d, lbSpec.Name)
	time.Sleep(1100 * time.Millisecond) // the archive's times have whole seconds
	g.Expect(d.SetBackends(ctx, cluster, []netip.Addr{address, backends[0], address})).To(Succeed())
	g.Expect(backendsModTime(t, d, lbSpec.Name)).To(Equal(written), "the same backends are not written again")
	g.Expect(d.SetBackends(ctx, cluster, nil)).To(Succeed())
	g.Expect(readBackendsFile(t, lbSpec.Name)).To(BeEmpty())
	// The address of a container Docker has not given one yet is refused: written, it
	// made the file unreadable and the load balancer unmanageable.
	g.Expect(d.SetBackends(ctx, cluster, []netip.Addr{address, {}})).To(MatchError(ContainSubstring("invalid backend address")))
	g.Expect(readBackendsFile(t, lbSpec.Name)).To(BeEmpty())

	for range 2 { // deleting what is gone succeeds
		g.Expect(d.DeleteNode(ctx, cluster, "cp-0")).To(Succeed())
		g.Expect(d.DeleteLoadBalancer(ctx, cluster)).To(Succeed())
		g.Expect(d.DeleteNetwork(ctx, cluster)).To(Succeed())
	}
	g.Expect(d.Nodes(ctx, cluster)).To(BeEmpty())

	// Without a host port Docker chooses one.
	_, err = d.EnsureNetwork(ctx, cluster, spec)
	g.Expect(err).NotTo(HaveOccurred())
	lbSpec.HostPort = 0
	balancer, err = d.EnsureLoadBalancer(ctx, lbSpec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(balancer.HostPort).NotTo(BeZero())
	g.Expect(dockerCLI(t, "port", lbSpec.Name, "6443/tcp")).To(HavePrefix("0.0.0.0:" + strconv.Itoa(balancer.HostPort)))
	g.Expect(d.DeleteLoadBalancer(ctx, cluster)).To(Succeed())
	g.Expect(d.DeleteNetwork(ctx, cluster)).To(Succeed())
	expectNothingLeft(t, cluster)
}

// TestDockerNetworkConflicts asks for a subnet that overlaps another cluster's network and
// for a network name another cluster holds.
func TestDockerNetworkConflicts(t *testing.T) {
	ctx := t.Context()
	d := newTestDocker(t)
	g := NewWithT(t)
	first, second := Cluster{Namespace: "talon-rt-test", Name: "first"}, Cluster{Namespace: "talon-rt-test", Name: "second"}
	cleanUpCluster(t, first)
	cleanUpCluster(t, second)

	_, err := d.EnsureNetwork(ctx, first, NetworkSpec{Name: "talon-rt-test-first", Subnet: dockerTestSubnet})
	g.Expect(err).NotTo(HaveOccurred())

	overlapping := netip.MustParsePrefix("172.30.120.128/25")
	_, err = d.EnsureNetwork(ctx, second, NetworkSpec{Name: "talon-rt-test-second", Subnet: overlapping})
	g.Expect(err).To(MatchError(ErrConflict))
	g.Expect(err.Error()).To(ContainSubstring("subnet 172.30.120.128/25 overlaps subnet 172.30.120.0/24 of network talon-rt-test-first"))

	_, err = d.EnsureNetwork(ctx, second, NetworkSpec{Name: "talon-rt-test-first"})
	g.Expect(err).To(MatchError(ErrConflict))
	g.Expect(err.Error()).To(ContainSubstring("network talon-rt-test-first exists but does not belong to cluster talon-rt-test/second"))

	g.Expect(d.DeleteNetwork(ctx, second)).To(Succeed())
	g.Expect(dockerCLI(t, "network", "ls", "--quiet", "--filter", "name=talon-rt-test-first")).NotTo(BeEmpty(),
		"another cluster's network stays")
	g.Expect(d.DeleteNetwork(ctx, first)).To(Succeed())
	expectNothingLeft(t, first)
}

// TestDockerNodeConflicts creates nodes whose host port another process listens on, whose
// address another node holds and whose name another container has: each error names what is
// taken, and no container or volume of the refused Machine stays behind.
func TestDockerNodeConflicts(t *testing.T) {
	ctx := t.Context()
	d := newTestDocker(t, WithUnprivilegedNodes()) // the privileges are not under test
	g := NewWithT(t)
	cluster := Cluster{Namespace: "talon-rt-test", Name: "conflicts"}
	cleanUpCluster(t, cluster)

	listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp4", "0.0.0.0:0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = listener.Close() })
	port := listener.Addr().(*net.TCPAddr).Port

	network, err := d.EnsureNetwork(ctx, cluster, NetworkSpec{Name: "talon-rt-test-conflicts", Subnet: dockerTestSubnet})
	g.Expect(err).NotTo(HaveOccurred())
	worker := func(machine, address string) NodeSpec {
		return NodeSpec{
			Cluster: cluster, Machine: machine, Name: "talon-rt-test-conflicts-" + machine, Role: RoleWorker,
			Image: docker.SimImage(), Network: network.Name, Address: netip.MustParseAddr(address),
		}
	}
	expectNoNode := func(machine string) {
		t.Helper()
		g.Expect(d.Nodes(ctx, cluster)).NotTo(ContainElement(HaveField("Machine", machine)))
		g.Expect(dockerCLI(t, "volume", "ls", "--quiet", "--filter", "label="+LabelMachine+"="+machine)).To(BeEmpty())
	}

	spec := worker("worker-0", "172.30.120.20")
	spec.Ports = []PortMapping{{ContainerPort: 50000, HostPort: port}}
	_, err = d.CreateNode(ctx, spec)
	g.Expect(err).To(MatchError(ErrConflict))
	g.Expect(err.Error()).To(ContainSubstring("host port " + strconv.Itoa(port) + " is already in use"))
	expectNoNode("worker-0")

	_, err = d.CreateNode(ctx, worker("worker-1", "172.30.120.21"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = d.CreateNode(ctx, worker("worker-2", "172.30.120.21"))
	g.Expect(err).To(MatchError(ErrConflict))
	g.Expect(err.Error()).To(ContainSubstring("address 172.30.120.21 is already in use"))
	expectNoNode("worker-2")

	const stranger = "talon-rt-test-conflicts-worker-3"
	t.Cleanup(func() { _, _ = docker.Docker(context.WithoutCancel(ctx), "rm", "--force", stranger) })
	dockerCLI(t, "create", "--name", stranger, docker.SimImage())
	_, err = d.CreateNode(ctx, worker("worker-3", "172.30.120.23"))
	g.Expect(err).To(MatchError(ErrConflict))
	g.Expect(err.Error()).To(ContainSubstring("container " + stranger + " exists but does not belong to Machine worker-3"))
	expectNoNode("worker-3")

	g.Expect(d.DeleteNode(ctx, cluster, "worker-1")).To(Succeed())
	g.Expect(d.DeleteNetwork(ctx, cluster)).To(Succeed())
	expectNothingLeft(t, cluster)
}

// TestDockerNodeContainer checks the container of a Talos node against what `talosctl
// cluster create` runs.
func TestDockerNodeContainer(t *testing.T) {
	g := NewWithT(t)
	spec := NodeSpec{
		Cluster: Cluster{Namespace: "ns", Name: "c1"}, Machine: "m-1", Name: "c1-cp-0", Role: RoleControlPlane,
		Image: "ghcr.io/siderolabs/talos:v1.14.0", TalosVersion: "v1.14.0", Network: "c1", Address: netip.MustParseAddr("10.5.0.10"),
		UserData: []byte("version: v1alpha1\n"),
		Env:      map[string]string{"PLATFORM": "metal", "EXTRA": "1"},
		Mounts:   []Mount{{HostPath: "/srv", ContainerPath: "/mnt", ReadOnly: true}},
		Ports:    []PortMapping{{ContainerPort: 80, HostPort: 8080, Protocol: "TCP"}, {ContainerPort: 53, HostPort: 5353, Protocol: "UDP", HostIP: "127.0.0.1"}},
	}
	config, host, err := nodeContainer(spec, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(config.Hostname).To(Equal("c1-cp-0"))
	g.Expect(config.Env).To(Equal([]string{"EXTRA=1", "PLATFORM=container", "TALOSSKU=2CPU-2048RAM", "USERDATA=dmVyc2lvbjogdjFhbHBoYTEK"}),
		"PLATFORM, TALOSSKU and USERDATA are the provider's")
	g.Expect(config.Labels).To(Equal(map[string]string{LabelNamespace: "ns", LabelCluster: "c1", LabelMachine: "m-1", LabelRole: RoleControlPlane}))
	g.Expect(host.Privileged).To(BeTrue())
	g.Expect(host.SecurityOpt).To(Equal([]string{"seccomp=unconfined"}))
	g.Expect(host.ReadonlyRootfs).To(BeTrue())
	g.Expect(host.Tmpfs).To(Equal(map[string]string{"/run": "rw", "/system": "rw", "/tmp": "rw"}))
	g.Expect(host.Sysctls).To(Equal(map[string]string{"net.ipv6.conf.all.disable_ipv6": "0"}))
	g.Expect(host.RestartPolicy.Name).To(Equal(containertypes.RestartPolicyDisabled))
	mounts := make([]string, 0, len(host.Mounts))
	for _, m := range host.Mounts {
		mounts = append(mounts, string(m.Type)+":"+m.Source+":"+m.Target+":"+strconv.FormatBool(m.ReadOnly))
	}
	g.Expect(mounts).To(Equal([]string{
		"volume:c1-cp-0-var:/var:false", "volume:c1-cp-0-system-state:/system/state:false", "volume:c1-cp-0-opt:/opt:false",
		"bind:/srv:/mnt:true",
	}))
	g.Expect(config.ExposedPorts).To(HaveLen(2))
	g.Expect(host.PortBindings).To(HaveKeyWithValue(networktypes.MustParsePort("80/tcp"), []networktypes.PortBinding{{HostPort: "8080"}}))
	g.Expect(host.PortBindings).To(HaveKeyWithValue(networktypes.MustParsePort("53/udp"),
		[]networktypes.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: "5353"}}))

	_, host, err = nodeContainer(spec, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(host.Privileged).To(BeFalse())
}

func TestDockerTalosVolumePaths(t *testing.T) {
	old := []string{"/var", "/system/state", "/etc/cni", "/etc/kubernetes", "/usr/libexec/kubernetes", "/opt"}
	current := []string{"/var", "/system/state", "/opt"}
	for _, tc := range []struct {
		version string
		want    []string
		wantErr bool
	}{
		{version: "", want: old},
		{version: "v1.13", want: old},
		{version: "v1.13.3", want: old},
		{version: "1.12.0", want: old},
		{version: "v1.14", want: current},
		{version: "v1.14.0-alpha.1", want: current},
		{version: "v2.0.0", want: current},
		{version: "v1", wantErr: true},
		{version: "latest", wantErr: true},
	} {
		t.Run(tc.version, func(t *testing.T) {
			g := NewWithT(t)
			paths, err := talosVolumePaths(tc.version)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(paths).To(Equal(tc.want))
		})
	}
}

func TestDockerTalosSKU(t *testing.T) {
	g := NewWithT(t)
	g.Expect(talosSKU(0, 0)).To(Equal("2CPU-2048RAM"))
	g.Expect(talosSKU(1_000_000_000, 512<<20)).To(Equal("1CPU-512RAM"))
	g.Expect(talosSKU(2_500_000_000, 4<<30)).To(Equal("3CPU-4096RAM"))
}

func TestDockerTakenResource(t *testing.T) {
	address := netip.MustParseAddr("172.30.120.10")
	for _, tc := range []struct {
		name, msg string
		ports     []int
		want      string
	}{
		{
			name:  "another container publishes the port",
			msg:   "driver failed programming external connectivity on endpoint x (abc): Bind for 0.0.0.0:30000 failed: port is already allocated",
			ports: []int{30000, 30001}, want: "host port 30000 is already in use",
		},
		{
			name:  "another process listens",
			msg:   "driver failed programming external connectivity on endpoint x (abc): Error starting userland proxy: listen tcp4 0.0.0.0:30001: bind: address already in use",
			ports: []int{30000, 30001}, want: "host port 30001 is already in use",
		},
		{name: "the static address is held", msg: "Address already in use", want: "address 172.30.120.10 is already in use"},
		{name: "something else", msg: "No such image: talos", ports: []int{30000}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(takenResource(errors.New(tc.msg), tc.ports, address)).To(Equal(tc.want))
		})
	}
}

func newTestDocker(t *testing.T, opts ...DockerOption) *Docker {
	t.Helper()
	require.Layer(t, docker.Layer, docker.Available(t.Context()))
	d, err := NewDocker(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// cleanUpCluster removes the cluster's containers, volumes and networks: now, in case an
// interrupted run left them, and when t ends.
func cleanUpCluster(t *testing.T, cluster Cluster) {
	t.Helper()
	docker.RemoveLabelled(t, cluster.Labels())
}

// expectNothingLeft asserts that no container, volume or network carries the cluster's labels.
func expectNothingLeft(t *testing.T, cluster Cluster) {
	t.Helper()
	NewWithT(t).Expect(docker.Leftovers(t.Context(), cluster.Labels())).To(BeEmpty())
}

func dockerCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := docker.Docker(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readBackendsFile copies the backends file out of a load-balancer container: the
// simulator image has no shell.
func readBackendsFile(t *testing.T, container string) string {
	t.Helper()
	dir := t.TempDir()
	dockerCLI(t, "cp", container+":"+lbBackendsFile, dir)
	content, err := os.ReadFile(filepath.Join(dir, filepath.Base(lbBackendsFile)))
	if err != nil {
		t.Fatal(err)
	}
	return string(content)
}

func backendsModTime(t *testing.T, d *Docker, container string) time.Time {
	t.Helper()
	stat, err := d.client.ContainerStatPath(t.Context(), container, client.ContainerStatPathOptions{Path: lbBackendsFile})
	if err != nil {
		t.Fatal(err)
	}
	return stat.Stat.Mtime
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// freePort is a TCP port no one listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	listener, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = listener.Close() }()
	return listener.Addr().(*net.TCPAddr).Port
}

// TestDockerNetworkWithoutSubnet: a cluster that names no subnet gets a free one Docker
// picks, configured on the network as if asked for, so that nodes can have fixed addresses
// on it; the probe network used to find it is gone.
func TestDockerNetworkWithoutSubnet(t *testing.T) {
	ctx := t.Context()
	d := newTestDocker(t)
	g := NewWithT(t)
	cluster := Cluster{Namespace: "talon-rt-test", Name: "nosubnet"}
	cleanUpCluster(t, cluster)
	network, err := d.EnsureNetwork(ctx, cluster, NetworkSpec{Name: "talon-rt-test-nosubnet"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(network.Subnet.IsValid()).To(BeTrue())
	g.Expect(dockerCLI(t, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", network.Name)).
		To(Equal(network.Subnet.String()), "the subnet is configured on the network")
	g.Expect(dockerCLI(t, "network", "ls", "--quiet", "--filter", "name=talon-rt-test-nosubnet-subnet-probe")).To(BeEmpty())
	g.Expect(d.DeleteNetwork(ctx, cluster)).To(Succeed())
	expectNothingLeft(t, cluster)
}
