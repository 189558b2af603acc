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
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// startNodes starts in-process nodes in maintenance mode at addresses.
func startNodes(t *testing.T, addresses ...string) []*sim.Node {
	t.Helper()
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	return startNodesWith(t, sim.Options{BinDir: envtest.BinDir(), RebootDelay: 500 * time.Millisecond}, addresses...)
}

// startNodesWith starts nodes with opts at addresses, each with a state directory of its own,
// in maintenance mode until the test ends.
func startNodesWith(t *testing.T, opts sim.Options, addresses ...string) []*sim.Node {
	t.Helper()
	nodes := make([]*sim.Node, 0, len(addresses))
	for _, address := range addresses {
		opts.Address, opts.StateDir = address, t.TempDir()
		opts.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
		n, err := sim.NewNode(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		nodes = append(nodes, n)
	}
	return nodes
}

// TestClusterInOneProcess runs the cluster scenario (three control-plane nodes and a worker,
// see simtest.Scenario) with every node in this process. Then it snapshots etcd through the
// Talos API and finds a written key in the snapshot, stops two of the three members and sees
// writes fail (quorum is real), powers them on and sees writes succeed, and removes a member
// through the Talos API and sees etcd shrink.
func TestClusterInOneProcess(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	controlPlanes, workers := []string{"127.0.43.1", "127.0.43.2", "127.0.43.3"}, []string{"127.0.43.4"}
	nodes := startNodes(t, "127.0.43.1", "127.0.43.2", "127.0.43.3", "127.0.43.4")
	cluster := simtest.Scenario(t, controlPlanes, workers)
	admin, kube := cluster.Talos, cluster.Kube

	t.Log("kube-apiserver's certificate names what Talos' names, each once: 127.0.0.1 and localhost too")
	cert, err := simtest.ServedCertificate(ctx, "127.0.43.2:6443")
	g.Expect(err).NotTo(HaveOccurred())
	ips := make([]string, 0, len(cert.IPAddresses))
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	g.Expect(ips).To(ConsistOf("10.96.0.1", "127.0.0.1", "127.0.43.1", "127.0.43.2"), "the service IP, localhost, the endpoint and the node")
	g.Expect(cert.DNSNames).To(ConsistOf("cp-1", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", "localhost"))

	t.Log("A key written through Kubernetes is in the etcd snapshot streamed by the Talos API")
	_, err = kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "in-the-snapshot"}, Data: map[string]string{"marker": "talon-snapshot-marker"},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	snapshot, err := admin.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	data, err := io.ReadAll(snapshot)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bytes.Contains(data, []byte("/registry/configmaps/default/in-the-snapshot"))).To(BeTrue(), "the key is in the snapshot")
	g.Expect(bytes.Contains(data, []byte("talon-snapshot-marker"))).To(BeTrue(), "the value is in the snapshot")

	write := func(name string) error {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := kube.CoreV1().ConfigMaps("default").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}
	t.Log("With two of three members stopped, writes fail: quorum is real")
	nodes[1].PowerOff()
	nodes[2].PowerOff()
	g.Expect(write("without-quorum")).NotTo(Succeed(), "a write without etcd quorum must fail")
	t.Log("Powered on again, the members rejoin from their data and writes succeed")
	g.Expect(nodes[1].PowerOn(ctx)).To(Succeed())
	g.Expect(nodes[2].PowerOn(ctx)).To(Succeed())
	g.Eventually(func() error { return write("with-quorum-again") }, time.Minute, time.Second).Should(Succeed())

	t.Log("Removing a member through the Talos API shrinks etcd")
	var victim *machine.EtcdMember
	for _, m := range cluster.Members {
		if m.Hostname == "cp-2" {
			victim = m
		}
	}
	// etcd refuses membership changes until every member has been healthy for a few
	// seconds ("unhealthy cluster"), as it does under Talos: callers retry.
	g.Eventually(func() error {
		return admin.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: victim.Id})
	}, 30*time.Second, time.Second).Should(Succeed())
	resp, err := admin.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Messages[0].Members).To(HaveLen(2))
	g.Expect(resp.Messages[0].Members).NotTo(ContainElement(HaveField("Id", victim.Id)))
	g.Expect(write("after-removal")).To(Succeed(), "two of two members are a quorum")
}
