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

package taloscontrolplane_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/test/envtest"
)

// registerWithFQDN makes the kubelets register their Nodes as hostname.domain, while etcd
// members keep the short hostname, as Talos does.
func registerWithFQDN(tcp *controlplanev1.TalosControlPlane) {
	tcp.Spec.ControlPlaneConfig.StrategicPatches = append(tcp.Spec.ControlPlaneConfig.StrategicPatches,
		"apiVersion: v1alpha1\nkind: KubeNodeConfig\nregisterWithFQDN: true\n")
}

// memberIDs reads the etcd member IDs through the Talos API of the Machine's node.
func memberIDs(ctx context.Context, g Gomega, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane, m *clusterv1.Machine) map[uint64]string {
	bundle, err := clustersecrets.Get(ctx, env.Client, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: tcp.Name, Namespace: tcp.Namespace}})
	g.Expect(err).NotTo(HaveOccurred())
	c, err := talosclient.NewFactory().New(ctx, bundle, m.Status.Addresses[0].Address)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close() }()
	members, err := c.EtcdMembers(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[uint64]string{}
	for _, member := range members {
		out[member.ID] = member.Name
	}
	return out
}

// TestQuorumSafeWhenNodeNamesDifferFromMembers runs a 3-node control plane whose Nodes are
// named by FQDN (registerWithFQDN) while etcd members carry the short hostname, and whose
// Machines are named by spec.machineNaming.template. Each Machine records its member's ID. With one node powered off, a person deletes a healthy
// Machine: its removal would leave one healthy member of two, so it waits, with a condition
// naming the unhealthy member, and its member stays in etcd. (Matching members by Node
// name found no member here and let the Machine go, leaving two dead voters of three.)
func TestQuorumSafeWhenNodeNamesDifferFromMembers(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.54.")
	infra.domain = "dc1.example.org"
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "fqdn")
	tcp := newCluster(t, env, infra, ns, "fqdn", 3, registerWithFQDN, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.MachineNaming.Template = "{{ .cluster.name }}-cp-{{ .random }}"
	})
	waitForMembership(t, env, tcp, 3)
	waitForReadyMachines(t, env, tcp)

	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	slices.SortFunc(machines, func(a, b clusterv1.Machine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	t.Log("Nodes are named by FQDN, members by hostname; every Machine records its member's ID")
	g.Eventually(func(g Gomega) {
		machines, err = controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		slices.SortFunc(machines, func(a, b clusterv1.Machine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		members := memberIDs(ctx, g, env, tcp, &machines[0])
		for _, m := range machines {
			g.Expect(m.Name).To(MatchRegexp(`^fqdn-cp-[a-z0-9]{5}$`), "named by spec.machineNaming.template")
			g.Expect(m.Status.NodeRef.Name).To(Equal(m.Name+".dc1.example.org"), "Node of %s", m.Name)
			id, err := strconv.ParseUint(m.Annotations[controlplanev1.EtcdMemberIDAnnotation], 16, 64)
			g.Expect(err).NotTo(HaveOccurred(), "member ID recorded on %s", m.Name)
			g.Expect(members).To(HaveKeyWithValue(id, m.Name), "the recorded member of %s", m.Name)
			g.Expect(conditions.IsTrue(&m, controlplanev1.MachineEtcdMemberHealthyCondition)).To(BeTrue(), "%s: %v", m.Name, m.Status.Conditions)
			g.Expect(conditions.IsTrue(&m, clusterv1.MachineUpToDateCondition)).To(BeTrue(), "%s: %v", m.Name, m.Status.Conditions)
		}
	}, time.Minute, time.Second).Should(Succeed())

	sick, healthy := machines[2], machines[1]
	t.Logf("Powering off the node of %s, then deleting the healthy Machine %s", sick.Name, healthy.Name)
	infra.powerOff(sick.Name)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(conditions.GetMessage(tcp, controlplanev1.EtcdClusterHealthyCondition)).To(ContainSubstring(sick.Name))
	}, time.Minute, time.Second).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, &healthy)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		// The control plane scales back up to 3 meanwhile: ScalingUp says what holds it.
		message := conditions.GetMessage(tcp, controlplanev1.ScalingUpCondition)
		g.Expect(message).To(ContainSubstring("Removing Machine " + healthy.Name + " is refused"))
		g.Expect(message).To(ContainSubstring("would leave 1 of 2 members healthy, fewer than the quorum of 2 (unhealthy: " + sick.Name + ")"))
	}, time.Minute, time.Second).Should(Succeed(), func() string { return conditionSummary(tcp.Status.Conditions) })
	g.Consistently(func(g Gomega) {
		m := &clusterv1.Machine{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&healthy), m)).To(Succeed(), "the Machine is held")
		members := memberIDs(ctx, g, env, tcp, &machines[0])
		g.Expect(members).To(HaveLen(3), "no member left etcd")
	}, 5*time.Second, time.Second).Should(Succeed())
}

// TestSplitBrainShowsAndBlocksMembershipChanges splits one node of a 3-node control plane
// off into an etcd cluster of its own. EtcdClusterHealthy names its Machine, and a scale-up
// is refused while the nodes disagree: no Machine is added.
func TestSplitBrainShowsAndBlocksMembershipChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.52.")
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "split")
	tcp := newCluster(t, env, infra, ns, "split", 3)
	waitForMembership(t, env, tcp, 3)

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
	bootstrapped := tcp.Annotations[controlplanev1.BootstrapMachineAnnotation]
	g.Expect(bootstrapped).NotTo(BeEmpty(), "the bootstrap target is recorded")
	g.Expect(tcp.Annotations).To(HaveKey(controlplanev1.EtcdClusterAnnotation), "that etcd was formed is recorded")
	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	split := machines[slices.IndexFunc(machines, func(m clusterv1.Machine) bool { return m.Name != bootstrapped })]
	t.Logf("Splitting the etcd member of %s off into a cluster of its own", split.Name)
	g.Expect(infra.node(split.Name).SplitEtcd(ctx)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		c := conditions.Get(tcp, controlplanev1.EtcdClusterHealthyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("the node of Machine " + split.Name + " reports a different etcd cluster"))
	}, time.Minute, time.Second).Should(Succeed(), func() string { return conditionSummary(tcp.Status.Conditions) })

	setReplicas(t, env, tcp, 5)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		message := conditions.GetMessage(tcp, controlplanev1.ScalingUpCondition)
		g.Expect(message).To(ContainSubstring("Scale up waits: the control-plane nodes do not agree on etcd's members"))
		g.Expect(message).To(ContainSubstring(split.Name))
	}, time.Minute, time.Second).Should(Succeed(), func() string { return conditionSummary(tcp.Status.Conditions) })
	g.Consistently(func(g Gomega) {
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(machines).To(HaveLen(3), "no Machine is added while etcd is split")
	}, 5*time.Second, time.Second).Should(Succeed())
	m := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&split), m)).To(Succeed())
	g.Expect(conditions.IsFalse(m, controlplanev1.MachineEtcdMemberHealthyCondition)).To(BeTrue())
	g.Expect(strings.ToLower(conditions.GetMessage(m, controlplanev1.MachineEtcdMemberHealthyCondition))).To(ContainSubstring("different etcd cluster"))
}
