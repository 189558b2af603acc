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
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/test/envtest"
)

// TestUnhealthyMemberNeverBlocksItsReplacement stops one of three control-plane nodes.
// Removing a healthy Machine is then refused, with a condition that says why; removing the
// unhealthy one proceeds, and the control plane goes down to one Machine.
func TestUnhealthyMemberNeverBlocksItsReplacement(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.48.")
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "health")
	tcp := newCluster(t, env, infra, ns, "health", 3)
	waitForMembership(t, env, tcp, 3)

	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	slices.SortFunc(machines, func(a, b clusterv1.Machine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	sick, healthy := machines[2], machines[0]
	t.Logf("Powering off the node of %s", sick.Name)
	infra.powerOff(sick.Name)

	t.Log("Removing a healthy Machine would leave one healthy member of two: refused, and said so")
	g.Expect(env.Client.Patch(ctx, annotated(&healthy, clusterv1.DeleteMachineAnnotation, ""), client.MergeFrom(&machines[0]))).To(Succeed())
	setReplicas(t, env, tcp, 1)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		c := conditions.Get(tcp, controlplanev1.ScalingDownCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("Removing Machine " + healthy.Name + " is refused"))
		g.Expect(c.Message).To(ContainSubstring("would leave 1 of 2 members healthy, fewer than the quorum of 2 (unhealthy: " + sick.Name + ")"))
		health := conditions.Get(tcp, controlplanev1.EtcdClusterHealthyCondition)
		g.Expect(health).NotTo(BeNil())
		g.Expect(health.Message).To(ContainSubstring("etcd member " + sick.Name + " is not"))
	}, time.Minute, time.Second).Should(Succeed())
	g.Consistently(func() bool {
		m := &clusterv1.Machine{}
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(&healthy), m)
		return m.DeletionTimestamp.IsZero()
	}, 3*time.Second, 500*time.Millisecond).Should(BeTrue(), "the healthy Machine is kept")

	t.Log("Without the annotation the unhealthy Machine goes first, and the scale-down completes")
	current := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&healthy), current)).To(Succeed())
	before := current.DeepCopy()
	delete(current.Annotations, clusterv1.DeleteMachineAnnotation)
	g.Expect(env.Client.Patch(ctx, current, client.MergeFrom(before))).To(Succeed())
	waitForMembership(t, env, tcp, 1)
	remaining, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remaining[0].Name).NotTo(Equal(sick.Name))
}

// TestRollout changes the Kubernetes version of three control-plane Machines with maxSurge
// 1, then asks for a rollout with maxSurge 0 through rollout.after: every Machine is
// replaced each time with etcd membership kept equal to the Machines, and status.versions
// and upToDateReplicas report the change as it happens.
func TestRollout(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.49.")
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "rollout")
	tcp := newCluster(t, env, infra, ns, "rollout", 3, func(tcp *controlplanev1.TalosControlPlane) { tcp.Spec.Version = "v1.35.4" })
	waitForMembership(t, env, tcp, 3)

	names := func() []string {
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		out := make([]string, 0, len(machines))
		for _, m := range machines {
			out = append(out, m.Name)
		}
		return out
	}
	rollout := func(description string, change func(*controlplanev1.TalosControlPlane), wantVersion string) {
		t.Log(description)
		start := time.Now()
		original := names()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		before := tcp.DeepCopy()
		change(tcp)
		g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(before))).To(Succeed())
		sawMixed := false
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
			if len(tcp.Status.Versions) > 1 || ptr.Deref(tcp.Status.UpToDateReplicas, 0) < 3 && ptr.Deref(tcp.Status.UpToDateReplicas, 0) > 0 {
				sawMixed = true
			}
			current := names()
			for _, name := range original {
				g.Expect(current).NotTo(ContainElement(name), "Machine %s is not replaced yet", name)
			}
		}, 5*time.Minute, 500*time.Millisecond).Should(Succeed())
		waitForMembership(t, env, tcp, 3)
		g.Expect(tcp.Status.Versions).To(ConsistOf(clusterv1.StatusVersion{Version: wantVersion, Replicas: 3}))
		g.Expect(sawMixed).To(BeTrue(), "status showed the rollout in progress")
		t.Logf("Rolled out three Machines in %s", time.Since(start).Round(time.Second))
	}
	rollout("Kubernetes v1.35.4 → v1.36.3 with maxSurge 1", func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Version = "v1.36.3"
	}, "v1.36.3")
	rollout("rollout.after with maxSurge 0", func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Rollout.After = metav1.Now()
		tcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To[int32](0)
	}, "v1.36.3")
}

// annotated returns a copy of m with the annotation set.
func annotated(m *clusterv1.Machine, key, value string) *clusterv1.Machine {
	out := m.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[key] = value
	return out
}
