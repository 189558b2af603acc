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

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/reconcilers/taloscontrolplane"
	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
)

// TestMigrateFromSidero follows docs/migrate-from-sidero.md: a 3 + 1 cluster made by
// Sidero Labs' providers (CABPT v0.6.12, CACPPT v0.5.13) is taken over by Talon's
// (clusterctl delete of theirs, keeping their CustomResourceDefinitions and objects;
// clusterctl init of Talon's; every manager a Pod, as users run them), which recognise the
// etcd bootstrap as done, adopt the Machines without replacing one, keep the secrets bundle,
// CA and kubeconfig Secrets as they are, then scale the control plane 3 -> 5 -> 3 and roll a
// Kubernetes version.
func TestMigrateFromSidero(t *testing.T) {
	s := newDockerSuite(t)
	ctx, g := t.Context(), s.g
	const ns, name = "default", "migrate"
	t.Cleanup(func() { dockertest.RemoveLabelled(t, map[string]string{dockerruntime.LabelCluster: name}) })
	talonControlPlane := controlplanev1.GroupVersion.WithKind("TalosControlPlane")

	p := s.sideroPlane("migrate-plane")
	mgmt := s.client(p.Kubeconfig())
	s.createSideroCluster(p, mgmt, ns, name, 3, 1, sideroVersion)

	t.Log("1. Their providers make a 3 + 1 cluster")
	workload := s.sideroWorkload(mgmt, ns, name)
	g.Eventually(func(g Gomega) {
		g.Expect(clusters.UsableMachines(ctx, g, mgmt, ns, name)).To(HaveLen(4))
		g.Expect(clusters.ReadyNodes(ctx, g, workload)).To(HaveLen(4))
	}).WithTimeout(8 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	theirs := s.expectSideroControlPlane(mgmt, ns, name, sideroVersion)
	machinesBefore := machineUIDs(ctx, g, mgmt, ns, name)
	secretsBefore := clusters.SecretData(ctx, g, mgmt, ns)
	bundle := s.sideroBundle(mgmt, ns, name)
	etcdID, _, err := etcdCluster(ctx, bundle, s.machineAddress(mgmt, ns, theirs[0]))
	g.Expect(err).NotTo(HaveOccurred())

	t.Log("2. Talon takes over: their providers deleted (CRDs and objects kept), Talon's installed")
	g.Expect(quickstart.TakeOverFromSidero(ctx, p, s.clusterctl)).To(Succeed())
	clusters.ExpectManagersRunning(t, mgmt)

	t.Log("3. Talon records the etcd bootstrap as done, adopts the Machines as up to date, replaces none")
	tcp := &controlplanev1.TalosControlPlane{}
	g.Eventually(func(g Gomega) {
		g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-control-plane"}, tcp)).To(Succeed())
		g.Expect(tcp.Annotations).To(HaveKey(controlplanev1.EtcdClusterAnnotation), "Talon's record that etcd served the cluster")
		g.Expect(tcp.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(3)), "Machines Talon takes for up to date")
		g.Expect(tcp.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(3)))
		for _, m := range controlPlaneMachines(ctx, g, mgmt, ns, name) {
			g.Expect(m.Labels).To(HaveKeyWithValue(clusterv1.MachineControlPlaneNameLabel, tcp.Name), "Machine %s", m.Name)
			g.Expect(m.Annotations).To(HaveKey(controlplanev1.EtcdMemberIDAnnotation), "Machine %s's etcd member, read from its node", m.Name)
			g.Expect(m.Annotations).To(HaveKey(taloscontrolplane.EtcdMemberHook), "Machine %s", m.Name)
		}
	}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	g.Expect(machineUIDs(ctx, g, mgmt, ns, name)).To(Equal(machinesBefore), "no Machine replaced or removed")
	clusters.UsableMachines(ctx, g, mgmt, ns, name)
	id, _, err := etcdCluster(ctx, bundle, s.machineAddress(mgmt, ns, theirs[0]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(etcdID), "the same etcd cluster: never bootstrapped again")
	for _, secret := range []string{name + "-talos", name + "-ca", name + "-kubeconfig"} {
		g.Expect(clusters.SecretData(ctx, g, mgmt, ns)[secret]).To(Equal(secretsBefore[secret]), "Secret %s is used as it is", secret)
	}
	t.Log("   and keeps the machine configs CABPT wrote, rendering none")
	g.Eventually(func(g Gomega) {
		for machine := range machinesBefore {
			m := &clusterv1.Machine{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: machine}, m)).To(Succeed())
			config := &bootstrapv1.TalosConfig{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.Bootstrap.ConfigRef.Name}, config)).To(Succeed())
			g.Expect(conditions.GetMessage(config, bootstrapv1.TalosConfigDataSecretAvailableCondition)).To(
				Equal("Machine config stored in Secret "+machine+"-bootstrap-data"), "Talon's word on TalosConfig %s of Machine %s", config.Name, machine)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(bootstrapDataSecrets(clusters.SecretData(ctx, g, mgmt, ns))).To(Equal(bootstrapDataSecrets(secretsBefore)), "no machine config rendered again")

	t.Log("4. Talon scales the control plane 3 -> 5, keeping the adopted Machines")
	g.Expect(patchControlPlane(ctx, mgmt, talonControlPlane, ns, name, map[string]any{"replicas": int64(5)})).To(Succeed())
	g.Expect(s.expectControlPlane(mgmt, talonControlPlane, ns, name, sideroVersion, 5)).To(ContainElements(theirs))

	t.Log("5. Talon scales it 5 -> 3")
	g.Expect(patchControlPlane(ctx, mgmt, talonControlPlane, ns, name, map[string]any{"replicas": int64(3)})).To(Succeed())
	before := s.expectControlPlane(mgmt, talonControlPlane, ns, name, sideroVersion, 3)

	t.Logf("6. Talon rolls Kubernetes %s -> %s", sideroVersion, sideroNextVersion)
	g.Expect(patchControlPlane(ctx, mgmt, talonControlPlane, ns, name, map[string]any{"version": sideroNextVersion})).To(Succeed())
	after := s.expectControlPlane(mgmt, talonControlPlane, ns, name, sideroNextVersion, 3)
	for _, m := range after {
		g.Expect(before).NotTo(ContainElement(m), "Machine %s was replaced", m)
	}
	id, _, err = etcdCluster(ctx, bundle, s.machineAddress(mgmt, ns, after[0]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(etcdID), "the same etcd cluster after scaling and rolling")
	g.Expect(clusters.SecretData(ctx, g, mgmt, ns)[name+"-talos"]).To(Equal(secretsBefore[name+"-talos"]), "the bundle Secret is byte-identical")
	clusters.ExpectNoRefusals(t, p)
}

// bootstrapDataSecrets are the names of the machine-config Secrets among secrets, sorted.
func bootstrapDataSecrets(secrets map[string]map[string][]byte) []string {
	var out []string
	for name := range secrets {
		if strings.HasSuffix(name, "-bootstrap-data") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// machineUIDs are the cluster's Machines, name -> UID.
func machineUIDs(ctx context.Context, g Gomega, c client.Client, ns, cluster string) map[string]types.UID {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})).To(Succeed())
	out := map[string]types.UID{}
	for _, m := range list.Items {
		out[m.Name] = m.UID
	}
	return out
}

// machineAddress is the first address of Machine name.
func (s *suite) machineAddress(c client.Client, ns, name string) string {
	s.t.Helper()
	m := &clusterv1.Machine{}
	s.g.Expect(c.Get(s.t.Context(), client.ObjectKey{Namespace: ns, Name: name}, m)).To(Succeed())
	s.g.Expect(m.Status.Addresses).NotTo(BeEmpty(), "Machine %s's addresses", name)
	return m.Status.Addresses[0].Address
}
