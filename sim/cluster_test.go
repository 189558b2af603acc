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
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestThreeControlPlaneNodes applies configs to three simulated control-plane nodes with
// machinery's client, bootstraps one, and sees a three-member etcd cluster (the others
// joined as learners and were promoted), a kube-apiserver answering at each node's address
// with the kubeconfig the Kubeconfig call returns, and three Ready Nodes of the configured
// version. Then it removes a member through the API and sees the cluster shrink.
func TestThreeControlPlaneNodes(t *testing.T) {
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)
	g := NewWithT(t)
	ctx := t.Context()
	addresses := []string{"127.0.43.1", "127.0.43.2", "127.0.43.3"}
	// No load balancer here: the first node's address is the cluster endpoint.
	endpoint := addresses[0]

	start := time.Now()
	nodes := make([]*sim.Node, 0, len(addresses))
	for i, address := range addresses {
		n, err := sim.NewNode(sim.Options{Address: address, StateDir: t.TempDir(), BinDir: envtest.BinDir(), Log: testr.NewWithOptions(t, testr.Options{Verbosity: 1})})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.Start(ctx, nil)).To(Succeed())
		t.Cleanup(n.Stop)
		nodes = append(nodes, n)
		_, err = maintenanceClient(t, address).ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{
			Data: renderControlPlane(t, fmt.Sprintf("cp-%d", i), endpoint),
		})
		g.Expect(err).NotTo(HaveOccurred())
	}
	admin := clientFor(t, clusterBundle(), addresses[0])
	g.Expect(admin.Bootstrap(ctx, &machine.BootstrapRequest{})).To(Succeed())

	t.Log("Three voting etcd members")
	var members []*machine.EtcdMember
	g.Eventually(func(g Gomega) {
		resp, err := admin.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		g.Expect(err).NotTo(HaveOccurred())
		members = resp.Messages[0].Members
		g.Expect(members).To(HaveLen(3))
		for _, m := range members {
			g.Expect(m.IsLearner).To(BeFalse(), "member %s is still a learner", m.Hostname)
		}
	}, 2*time.Minute, time.Second).Should(Succeed())

	t.Log("The kubeconfig from the Talos API reaches every control-plane node's kube-apiserver")
	kubeconfig, err := admin.Kubeconfig(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	restConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(restConfig.Host).To(Equal("https://" + endpoint + ":6443"))
	for _, address := range addresses {
		perNode := *restConfig
		perNode.Host = "https://" + address + ":6443"
		c, err := kubernetes.NewForConfig(&perNode)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() error {
			_, err := c.Discovery().ServerVersion()
			return err
		}, 2*time.Minute, time.Second).Should(Succeed(), "kube-apiserver at %s", address)
	}

	t.Log("Three Ready Nodes with the configured kubelet version")
	c, err := kubernetes.NewForConfig(restConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes.Items).To(HaveLen(3))
		for _, node := range nodes.Items {
			g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal("v1.36.3"))
			g.Expect(node.Labels).To(HaveKey("node-role.kubernetes.io/control-plane"))
			g.Expect(node.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
		}
	}, 2*time.Minute, time.Second).Should(Succeed())
	t.Logf("Three control-plane nodes Ready %s after the first apply", time.Since(start).Round(time.Second))

	t.Log("Removing a member through the Talos API shrinks etcd")
	var victim *machine.EtcdMember
	for _, m := range members {
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

	t.Log("Writes succeed with two of two members, and fail once one of them stops: quorum is real")
	writeCtx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 5*time.Second) }
	wctx, cancel := writeCtx()
	_, err = c.CoreV1().ConfigMaps("default").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{})
	cancel()
	g.Expect(err).NotTo(HaveOccurred())
	nodes[1].Stop()
	wctx, cancel = writeCtx()
	_, err = c.CoreV1().ConfigMaps("default").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	cancel()
	g.Expect(err).To(HaveOccurred(), "a write without etcd quorum must fail")
}
