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

package envtest_test

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/index"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(m))
}

// TestClusterAdoptsTalosDockerCluster proves the plane end to end: Cluster API's real
// Cluster reconciler resolves a TalosDockerCluster through its CRD's contract label, takes
// ownership of it, and follows its provisioning through the v1beta2 contract fields.
func TestClusterAdoptsTalosDockerCluster(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	env.StartManager(t, envtest.ManagerOptions{CoreReconcilers: true})
	ns := env.NewNamespace(t, "smoke")
	ctx := t.Context()

	infraCluster := &infrav1.TalosDockerCluster{ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, infraCluster)).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group,
				Kind:     "TalosDockerCluster",
				Name:     infraCluster.Name,
			},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())

	t.Log("Cluster API sets itself as the owner of the TalosDockerCluster")
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(infraCluster), infraCluster)).To(Succeed())
		g.Expect(infraCluster.OwnerReferences).To(ContainElement(And(
			HaveField("Kind", "Cluster"),
			HaveField("Name", cluster.Name),
			HaveField("UID", cluster.UID),
		)))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	t.Log("The Cluster waits in phase Provisioning for its infrastructure")
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
		g.Expect(cluster.Status.Phase).To(Equal(string(clusterv1.ClusterPhaseProvisioning)))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	t.Log("Once the TalosDockerCluster reports provisioned with an endpoint, the Cluster is Provisioned")
	patch := client.MergeFrom(infraCluster.DeepCopy())
	infraCluster.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "172.20.0.2", Port: 6443}
	g.Expect(env.Client.Patch(ctx, infraCluster, patch)).To(Succeed())
	statusPatch := client.MergeFrom(infraCluster.DeepCopy())
	infraCluster.Status.Initialization.Provisioned = ptr.To(true)
	g.Expect(env.Client.Status().Patch(ctx, infraCluster, statusPatch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
		g.Expect(cluster.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
		g.Expect(cluster.Spec.ControlPlaneEndpoint).To(Equal(infraCluster.Spec.ControlPlaneEndpoint))
		g.Expect(cluster.Status.Phase).To(Equal(string(clusterv1.ClusterPhaseProvisioned)))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

// TestCoreReconcilersMapNodesToMachines checks that the manager has the indexes Cluster API's
// own manager adds: its Machine reconciler finds the Machine of a workload Node event by them
// (by node name, then by providerID), and a test whose Node registers after its Machine's last
// reconcile waits for a resync without them.
func TestCoreReconcilersMapNodesToMachines(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	mgr := env.StartManager(t, envtest.ManagerOptions{CoreReconcilers: true})
	ns := env.NewNamespace(t, "index")
	ctx := t.Context()

	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "indexed", Namespace: ns},
		Spec: clusterv1.MachineSpec{
			ClusterName: "absent",
			ProviderID:  "talon-sim://127.0.0.9",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("absent")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerMachine", Name: "absent",
			},
		},
	}
	g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(mgr.GetClient().List(ctx, machines, client.InNamespace(ns),
			client.MatchingFields{index.MachineProviderIDField: machine.Spec.ProviderID})).To(Succeed())
		g.Expect(machines.Items).To(ConsistOf(HaveField("Name", machine.Name)))
		g.Expect(mgr.GetClient().List(ctx, machines, client.InNamespace(ns),
			client.MatchingFields{index.MachineNodeNameField: "no-such-node"})).To(Succeed())
		g.Expect(machines.Items).To(BeEmpty())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}
