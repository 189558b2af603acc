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
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// BenchmarkControlPlane measures, on simulated nodes with Cluster API's controllers and both
// providers: the time from applying a three-control-plane cluster to three Ready
// control-plane Nodes (s-to-3-ready), and the time a rolling Kubernetes version change
// (v1.35.4 → v1.36.3, maxSurge 1) takes to replace all three Machines with etcd in step
// (s-rollout).
func BenchmarkControlPlane(b *testing.B) {
	env := envtest.Get(b)
	infra := newSimInfra(b, "127.0.51.")
	startProviders(b, env, infra)
	g := NewWithT(b)
	ctx := b.Context()
	for i := 0; b.Loop(); i++ {
		ns := env.NewNamespace(b, "bench")
		start := time.Now()
		tcp := newCluster(b, env, infra, ns, fmt.Sprintf("bench-%d", i), 3, func(tcp *controlplanev1.TalosControlPlane) { tcp.Spec.Version = "v1.35.4" })
		kube := workloadClient(b, env, tcp)
		g.Eventually(func(g Gomega) {
			nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nodes.Items).To(HaveLen(3))
			for _, n := range nodes.Items {
				g.Expect(n.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
			}
		}, 5*time.Minute, 500*time.Millisecond).Should(Succeed())
		b.ReportMetric(time.Since(start).Seconds(), "s-to-3-ready")
		waitForMembership(b, env, tcp, 3)

		start = time.Now()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		before := tcp.DeepCopy()
		tcp.Spec.Version = "v1.36.3"
		g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(before))).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
			g.Expect(tcp.Status.Versions).To(HaveLen(1))
			g.Expect(tcp.Status.Versions[0].Version).To(Equal("v1.36.3"))
		}, 5*time.Minute, 500*time.Millisecond).Should(Succeed())
		waitForMembership(b, env, tcp, 3)
		b.ReportMetric(time.Since(start).Seconds(), "s-rollout")
	}
}

// BenchmarkRemediation measures the time from powering off one node of a 3-node control
// plane, watched by a MachineHealthCheck (Ready not True for 5 s) with kube-controller-manager
// marking a silent node after 20 s, to its replacement's Node Ready and etcd's members again
// exactly the Machines (s-remediate).
func BenchmarkRemediation(b *testing.B) {
	env := envtest.Get(b)
	infra := newSimInfra(b, "127.0.55.")
	startProviders(b, env, infra)
	g := NewWithT(b)
	ctx := b.Context()
	for i := 0; b.Loop(); i++ {
		ns := env.NewNamespace(b, "bench-remediation")
		tcp := newCluster(b, env, infra, ns, fmt.Sprintf("remediate-%d", i), 3, fastNodeHealth)
		waitForMembership(b, env, tcp, 3)
		waitForReadyMachines(b, env, tcp)
		newControlPlaneHealthCheck(b, env, tcp)
		kube := workloadClient(b, env, tcp)
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		victim := machines[len(machines)-1].Name

		start := time.Now()
		infra.powerOff(victim)
		g.Eventually(func(g Gomega) {
			machines, err := controlPlaneMachines(ctx, env, tcp)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(machines).To(HaveLen(3))
			for _, m := range machines {
				g.Expect(m.Name).NotTo(Equal(victim))
			}
			nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
			g.Expect(err).NotTo(HaveOccurred())
			ready := 0
			for _, n := range nodes.Items {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			g.Expect(ready).To(Equal(3))
		}, 5*time.Minute, 500*time.Millisecond).Should(Succeed())
		waitForMembership(b, env, tcp, 3)
		b.ReportMetric(time.Since(start).Seconds(), "s-remediate")
	}
}

// BenchmarkUpgrade measures the same Kubernetes upgrade (v1.36.3 → v1.37.2) of a
// three-node control plane by replacement (RollingUpdate, maxSurge 1) and in place, side by
// side in one run: from the spec change to every Machine at the new version with etcd's
// members exactly the Machines (s-upgrade).
func BenchmarkUpgrade(b *testing.B) {
	_, err := envtest.Binary(filepath.Join("v1.37", "kube-apiserver"))
	require.Layer(b, envtest.Layer, err)
	for _, c := range []struct {
		name, prefix string
		strategy     controlplanev1.TalosControlPlaneRolloutStrategyType
	}{
		{"replace", "127.0.59.", controlplanev1.RollingUpdateStrategyType},
		{"in-place", "127.0.63.", controlplanev1.InPlaceStrategyType},
	} {
		b.Run(c.name, func(b *testing.B) {
			env := envtest.Get(b)
			infra := newSimInfra(b, c.prefix)
			startProviders(b, env, infra)
			g := NewWithT(b)
			ctx := b.Context()
			for i := 0; b.Loop(); i++ {
				ns := env.NewNamespace(b, "bench-upgrade")
				tcp := newCluster(b, env, infra, ns, fmt.Sprintf("upgrade-%d", i), 3, func(tcp *controlplanev1.TalosControlPlane) {
					tcp.Spec.Rollout.Strategy.Type = c.strategy
				})
				waitForMembership(b, env, tcp, 3)
				start := time.Now()
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
				before := tcp.DeepCopy()
				tcp.Spec.Version = nextKubernetesVersion
				g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(before))).To(Succeed())
				g.Eventually(func(g Gomega) {
					g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
					g.Expect(tcp.Status.ObservedGeneration).To(Equal(tcp.Generation))
					g.Expect(tcp.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(3)))
					g.Expect(tcp.Status.Versions).To(ConsistOf(clusterv1.StatusVersion{Version: nextKubernetesVersion, Replicas: 3}))
				}, 10*time.Minute, 500*time.Millisecond).Should(Succeed())
				waitForMembership(b, env, tcp, 3)
				b.ReportMetric(time.Since(start).Seconds(), "s-upgrade")
			}
		})
	}
}
