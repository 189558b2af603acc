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

package sim_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
)

// startLightNodes starts light nodes (the scale mode) in maintenance mode at addresses; they
// need no Kubernetes binaries.
func startLightNodes(t *testing.T, light *sim.Light, addresses ...string) []*sim.Node {
	t.Helper()
	return startNodesWith(t, sim.Options{Light: light, RebootDelay: 200 * time.Millisecond}, addresses...)
}

// TestLightCluster runs the cluster scenario (simtest.Scenario: three control-plane nodes
// and a worker, etcd joined, kube-apiserver at every control-plane address, Nodes and mirror
// Pods Ready) on light nodes, then checks that the in-memory etcd keeps etcd's rules: two of
// three members down leave no leader and the Kubernetes API unready, powering them on brings
// both back, removing a running voter while another is down is refused, a member removed
// through the Talos API stops and leaves the list, a removal without quorum is refused, and
// snapshots are refused with the reason.
func TestLightCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	light, err := sim.NewLight(ctx, testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())
	addresses := []string{"127.0.45.1", "127.0.45.2", "127.0.45.3", "127.0.45.4"}
	controlPlanes, workers := addresses[:3], addresses[3:]
	nodes := startLightNodes(t, light, addresses...)
	cluster := simtest.Scenario(t, controlPlanes, workers)
	g.Expect(light.Clusters()).To(Equal(1))

	t.Log("A worker's Node is in the same in-memory cluster as the control plane's")
	node, err := cluster.Kube.CoreV1().Nodes().Get(ctx, "worker-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.45.4"}))

	statusOf := func(address string) (*machine.EtcdMemberStatus, error) {
		resp, err := simtest.Client(t, simtest.Bundle(), address).EtcdStatus(ctx)
		if err != nil {
			return nil, err
		}
		return resp.Messages[0].MemberStatus, nil
	}
	readyz := func() (string, error) {
		body, err := cluster.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return string(body), err
	}

	t.Log("Two of three members powered off: no leader, the Kubernetes API is not ready")
	nodes[1].PowerOff()
	nodes[2].PowerOff()
	st, err := statusOf(controlPlanes[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Leader).To(BeZero())
	g.Expect(st.Errors).To(ContainElement("etcdserver: no leader"))
	_, err = readyz()
	g.Expect(err).To(HaveOccurred())

	t.Log("Powered on again, they rejoin from their data and the cluster has a leader")
	for _, n := range nodes[1:3] {
		g.Expect(n.PowerOn(ctx)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, address := range controlPlanes {
			st, err := statusOf(address)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Leader).NotTo(BeZero(), "member at %s", address)
		}
		body, err := readyz()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(body).To(Equal("ok"))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	t.Log("With one voter down, removing a running one is refused (etcd: it would leave no quorum running)")
	nodes[1].PowerOff()
	first, err := statusOf(controlPlanes[0])
	g.Expect(err).NotTo(HaveOccurred())
	err = cluster.Talos.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: first.MemberId})
	g.Expect(err).To(MatchError(ContainSubstring("etcdserver: unhealthy cluster")))
	g.Expect(nodes[1].PowerOn(ctx)).To(Succeed())
	g.Eventually(func() error {
		_, err := statusOf(controlPlanes[1])
		return err
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	t.Log("A member removed through the Talos API leaves the list, and its etcd service stops")
	third, err := statusOf(controlPlanes[2])
	g.Expect(err).NotTo(HaveOccurred())
	err = cluster.Talos.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: third.MemberId})
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := cluster.Talos.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Messages[0].Members).To(HaveLen(2))
	g.Eventually(func() codes.Code {
		_, err := statusOf(controlPlanes[2])
		return code(err)
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(codes.Unknown), "the removed member's node runs no etcd")

	t.Log("With one of the two members down there is no quorum: a removal is refused")
	second, err := statusOf(controlPlanes[1])
	g.Expect(err).NotTo(HaveOccurred())
	nodes[1].PowerOff()
	err = cluster.Talos.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: first.MemberId})
	g.Expect(err).To(HaveOccurred())
	g.Expect(code(err)).To(Equal(codes.FailedPrecondition))
	g.Expect(nodes[1].PowerOn(ctx)).To(Succeed())
	g.Eventually(func() (uint64, error) {
		st, err := statusOf(controlPlanes[1])
		if err != nil {
			return 0, err
		}
		return st.MemberId, nil
	}, time.Minute, 200*time.Millisecond).Should(Equal(second.MemberId))

	t.Log("Snapshots are refused with the reason: light nodes keep no etcd data")
	stream, err := cluster.Talos.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{})
	if err == nil {
		_, err = io.ReadAll(stream)
	}
	g.Expect(err).To(MatchError(ContainSubstring("keeps no etcd data")))
}

// TestManyLightClusters starts light clusters of one control-plane node each in one process
// and checks each has a Kubernetes API of its own: a ConfigMap made in one is not in another.
func TestManyLightClusters(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	light, err := sim.NewLight(ctx, testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())
	const clusters = 3
	kubes := make([]*simtest.Cluster, 0, clusters)
	for i := range clusters {
		address := fmt.Sprintf("127.0.46.%d", i+1)
		startLightNodes(t, light, address)
		c := simtest.Scenario(t, []string{address}, nil)
		kubes = append(kubes, &c)
	}
	g.Expect(light.Clusters()).To(Equal(clusters))
	_, err = kubes[0].Kube.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-the-first"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for i, c := range kubes {
		nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes.Items).To(HaveLen(1), "cluster %d", i)
		_, err = c.Kube.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "only-in-the-first", metav1.GetOptions{})
		g.Expect(err == nil).To(Equal(i == 0), "cluster %d", i)
	}
}

// BenchmarkLightNodes measures what a light node costs: it starts single-node light clusters
// (TALON_LIGHT_NODES, default 50) in this process, each configured, bootstrapped and Ready
// through the Talos API, and reports the live heap per node after a garbage collection.
// With TALON_LIGHT_HEAP_PROFILE set, it writes a heap profile there while the nodes run.
func BenchmarkLightNodes(b *testing.B) {
	count := 50
	if v := os.Getenv("TALON_LIGHT_NODES"); v != "" {
		var err error
		if count, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		ctx, cancel := context.WithCancel(b.Context())
		light, err := sim.NewLight(ctx, logr.Discard())
		if err != nil {
			b.Fatal(err)
		}
		before := liveHeap()
		nodes := make([]*sim.Node, 0, count)
		for i := range count {
			address := fmt.Sprintf("127.1.%d.%d", i/200, i%200+1)
			n, err := sim.NewNode(sim.Options{Address: address, StateDir: b.TempDir(), Light: light, Log: logr.Discard()})
			if err != nil {
				b.Fatal(err)
			}
			if err := n.Start(ctx, simtest.Render(b, bootstrapv1.GenerateTypeControlPlane, fmt.Sprintf("cp-%d", i), address)); err != nil {
				b.Fatal(err)
			}
			nodes = append(nodes, n)
			if err := simtest.Client(b, simtest.Bundle(), address).Bootstrap(ctx, &machine.BootstrapRequest{}); err != nil {
				b.Fatal(err)
			}
		}
		NewWithT(b).Eventually(func(g Gomega) {
			for _, n := range nodes {
				g.Expect(n.NodeReady()).To(BeTrue(), "node %s", n.Address())
			}
		}, 5*time.Minute, time.Second).Should(Succeed())
		perNode := (liveHeap() - before) / uint64(count)
		if path := os.Getenv("TALON_LIGHT_HEAP_PROFILE"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.WriteHeapProfile(f); err != nil {
				b.Fatal(err)
			}
			_ = f.Close()
		}
		b.ReportMetric(float64(perNode)/1024, "KiB-heap/node")
		for _, n := range nodes {
			n.Stop()
		}
		cancel()
	}
}

// liveHeap is the heap in use after a garbage collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
