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
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/test/envtest"
)

// fastNodeHealth makes kube-controller-manager mark a silent node's Ready condition Unknown
// after 20 s instead of 50 s, so that a MachineHealthCheck sees a powered-off node sooner.
func fastNodeHealth(tcp *controlplanev1.TalosControlPlane) {
	tcp.Spec.ControlPlaneConfig.StrategicPatches = append(tcp.Spec.ControlPlaneConfig.StrategicPatches,
		"apiVersion: v1alpha1\nkind: KubeControllerManagerConfig\nextraArgs:\n  node-monitor-grace-period: 20s\n")
}

// newControlPlaneHealthCheck creates Cluster API's MachineHealthCheck for the control-plane
// Machines of tcp: a Node that is not Ready for 5 s is unhealthy.
func newControlPlaneHealthCheck(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane) {
	tb.Helper()
	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: tcp.Name + "-cp", Namespace: tcp.Namespace},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: tcp.Name,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineControlPlaneNameLabel: tcp.Name}},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To(int32(5))},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To(int32(5))},
			}},
		},
	}
	NewWithT(tb).Expect(env.Client.Create(tb.Context(), mhc)).To(Succeed())
}

// waitForReadyMachines waits until the 3 Machines of tcp are Ready: their Nodes registered
// and linked, so that a MachineHealthCheck watches their Nodes.
func waitForReadyMachines(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane) {
	tb.Helper()
	NewWithT(tb).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(tb.Context(), client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(tcp.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(3)))
	}, 2*time.Minute, time.Second).Should(Succeed(), func() string {
		// The TalosControlPlane's conditions, and those of each Machine, to tell why one is not Ready.
		summary := conditionSummary(tcp.Status.Conditions)
		machines, err := controlPlaneMachines(context.Background(), env, tcp)
		if err != nil {
			return summary
		}
		for _, m := range machines {
			summary += "\nMachine " + m.Name + ":" + conditionSummary(m.Status.Conditions)
		}
		if nodes, err := workloadClient(tb, env, tcp).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err == nil {
			for _, n := range nodes.Items {
				summary += fmt.Sprintf("\nNode %s: providerID %q", n.Name, n.Spec.ProviderID)
			}
		}
		return summary + "\nThe controllers' last errors:\n" + controllerErrors.String()
	})
}

// ownerRemediated is the OwnerRemediated condition of the Machine name, if any.
func ownerRemediated(ctx context.Context, g Gomega, env *envtest.Environment, namespace, name string) *metav1.Condition {
	m := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m)).To(Succeed())
	return conditions.Get(m, clusterv1.MachineOwnerRemediatedCondition)
}

// TestRemediation powers off control-plane nodes of a 3-node cluster watched by a
// MachineHealthCheck, with remediation.maxRetry 0, while a writer puts a key every 100 ms:
//   - the first powered-off node's Machine is replaced, etcd's members are again exactly
//     the Machines, no acknowledged write is lost, and status.lastRemediation says so;
//   - when the replacement fails too, remediation stops: maxRetry is exhausted, and its
//     OwnerRemediated condition says so;
//   - a healthy Machine a person asks to remediate (remediate-machine) while that node is
//     down is not removed: its condition says the removal would break quorum;
//   - with its node powered off too (two of three down, etcd without quorum), no Machine is
//     removed, and its condition says that etcd may have lost quorum.
func TestRemediation(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.53.")
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "remediate")
	tcp := newCluster(t, env, infra, ns, "remediate", 3, fastNodeHealth, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Remediation.MaxRetry = ptr.To(int32(0))
	})
	waitForMembership(t, env, tcp, 3)
	waitForReadyMachines(t, env, tcp)
	newControlPlaneHealthCheck(t, env, tcp)
	kube := workloadClient(t, env, tcp)
	stopWriter := startWriter(t, kube)

	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	slices.SortFunc(machines, func(a, b clusterv1.Machine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	first, second, third := machines[0], machines[1], machines[2]
	start := time.Now()
	t.Logf("Powering off the node of %s", third.Name)
	infra.powerOff(third.Name)
	g.Eventually(func(g Gomega) {
		m := &clusterv1.Machine{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(&third), m)
		g.Expect(err).To(HaveOccurred(), "Machine %s is replaced", third.Name)
	}, 4*time.Minute, time.Second).Should(Succeed(), func() string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		return conditionSummary(tcp.Status.Conditions)
	})
	waitForMembership(t, env, tcp, 3)
	t.Logf("Remediated: %s replaced and etcd matches the Machines %s after the power-off", third.Name, time.Since(start).Round(time.Second))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
	g.Expect(tcp.Status.LastRemediation.Machine).To(Equal(third.Name))
	g.Expect(tcp.Status.LastRemediation.RetryCount).To(HaveValue(BeEquivalentTo(0)))

	stopWriter()

	machines, err = controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	replacement := machines[slices.IndexFunc(machines, func(m clusterv1.Machine) bool { return m.Name != first.Name && m.Name != second.Name })]
	waitForReadyMachines(t, env, tcp)
	g.Expect(replacement.Annotations).To(HaveKey(controlplanev1.RemediationForAnnotation), "the replacement knows it replaced a remediated Machine")
	t.Logf("Powering off the replacement %s: maxRetry 0 allows no second remediation", replacement.Name)
	infra.powerOff(replacement.Name)
	g.Eventually(func(g Gomega) {
		c := ownerRemediated(ctx, g, env, ns, replacement.Name)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controlplanev1.CannotBeRemediatedReason))
		g.Expect(c.Message).To(ContainSubstring("remediation.maxRetry (0) is reached"))
	}, 2*time.Minute, time.Second).Should(Succeed())

	t.Logf("Asking for %s to be remediated too (cluster.x-k8s.io/remediate-machine): removing it would leave one healthy member of two", second.Name)
	current := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&second), current)).To(Succeed())
	g.Expect(env.Client.Patch(ctx, annotated(current, clusterv1.RemediateMachineAnnotation, ""), client.MergeFrom(current))).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := ownerRemediated(ctx, g, env, ns, second.Name)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controlplanev1.CannotBeRemediatedReason))
		g.Expect(c.Message).To(ContainSubstring("would leave 1 of 2 members healthy, fewer than the quorum of 2 (unhealthy: " + replacement.Name + ")"))
	}, 2*time.Minute, time.Second).Should(Succeed())

	t.Logf("Powering off %s: two of three nodes down, etcd has no quorum, and no remediation removes a member", second.Name)
	infra.powerOff(second.Name)
	g.Eventually(func(g Gomega) {
		c := ownerRemediated(ctx, g, env, ns, second.Name)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controlplanev1.CannotBeRemediatedReason))
		g.Expect(c.Message).To(ContainSubstring("etcd may have lost quorum"))
	}, 2*time.Minute, time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(machines).To(HaveLen(3))
		for _, m := range machines {
			g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s is not removed", m.Name)
		}
	}, 5*time.Second, time.Second).Should(Succeed())
}
