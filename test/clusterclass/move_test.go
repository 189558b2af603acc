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

package clusterclass_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
	"github.com/talon-capi/talon/controlplane/reconcilers/kubernetescluster"
	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/test/clusters"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestMoveKubernetesCluster moves a running KubernetesCluster of one control-plane node and
// a pool of one worker to a second management plane with clusterctl move. The
// KubernetesCluster goes along with its Cluster and is Running there on the same Machines and
// nodes; neither plane makes a second Cluster, though on the second the KubernetesCluster
// arrives before its Cluster and on the first its Cluster is deleted before it. The moved
// KubernetesCluster then scales its pool and deletes every node. On the second plane then, a
// KubernetesCluster whose record says its Cluster was made waits for it instead of making
// another, until a person removes the record; a Cluster a person deletes is made again; a
// paused Cluster is left alone; and deleted as clusterctl move deletes, it makes no Cluster.
func TestMoveKubernetesCluster(t *testing.T) {
	_, err := envtest.Binary(plane.ClusterctlBinary)
	require.Layer(t, envtest.Layer, err)
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	c := env.Client
	ns := env.NewNamespace(t, "kubernetescluster-move")
	rt, err := runtime.NewLightSim(ctx, t.TempDir(), logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	startManager(t, env, rt, ns)
	applyTemplate(t, c, "clusterclass-talos-docker.yaml", ns)
	variables, err := json.Marshal(map[string]any{"dockerSubnet": "127.0.92.0/24"})
	g.Expect(err).NotTo(HaveOccurred())
	newKC := func(name string, annotations map[string]string) *vitiv1.KubernetesCluster {
		annotations[vitiv1.VariablesAnnotation] = string(variables)
		return &vitiv1.KubernetesCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
			Spec: vitiv1.KubernetesClusterSpec{
				Data: vitiv1.ClusterData{ClusterID: name, Provider: "talos", Region: "west", Environment: "test"},
				Topology: vitiv1.Topology{Version: "1.36", ControlPlane: vitiv1.ControlPlane{Replicas: 1},
					Workers: vitiv1.Workers{NodePools: []vitiv1.NodePool{{Name: "general", Replicas: 1}}}},
			},
		}
	}

	t.Log("A running KubernetesCluster of one control-plane node and a pool of one worker")
	kc := newKC("moved", map[string]string{})
	start := time.Now()
	g.Expect(c.Create(ctx, kc)).To(Succeed())
	clusters.WaitKubernetesClusterRunning(t, c, kc, "v1.36.3", map[string]int32{"": 1, "general": 1})
	t.Logf("Running %s after the KubernetesCluster was applied", time.Since(start).Round(time.Second))
	g.Expect(kc.Annotations).To(HaveKey(vitiv1.ClusterCreatedAnnotation), "the Cluster's creation is recorded")
	machineNames := func(c client.Client) []string {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: kc.Name})).To(Succeed())
		names := make([]string, 0, len(machines.Items))
		for _, m := range machines.Items {
			names = append(names, m.Name)
		}
		slices.Sort(names)
		return names
	}
	before := machineNames(c)
	g.Expect(before).To(HaveLen(2))
	g.Expect(rt.LightClusters()).To(Equal(1))

	t.Log("A second management plane, with the same providers and the KubernetesCluster controller")
	target, err := envtest.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := target.Stop(); err != nil {
			t.Logf("Failed to stop the second management plane: %v", err)
		}
	})
	tc := target.Client
	// Cluster API's Cluster webhooks are served for the namespace the cluster moves into.
	g.Expect(tc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	startManager(t, target, rt, ns)
	// clusterctl move does not move an object whose owner it cannot move: as Kubernetes'
	// garbage collector would have, drop the owner references to the "shim" Secret that
	// Cluster API's topology reconciler made and deleted.
	removeDanglingOwnerReferences(t, c, ns, &infrav1.TalosDockerClusterList{}, &controlplanev1.TalosControlPlaneList{})
	// The KubernetesCluster's CRD carries clusterctl's labels itself.
	clusters.MoveBetweenPlanes(t, env, target, ns)

	t.Log("The first plane keeps neither the KubernetesCluster nor a Cluster, and makes none")
	g.Consistently(func(g Gomega) {
		err := c.Get(ctx, client.ObjectKeyFromObject(kc), &vitiv1.KubernetesCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "KubernetesCluster on the first plane: %v", err)
		err = c.Get(ctx, client.ObjectKeyFromObject(kc), &clusterv1.Cluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Cluster on the first plane: %v", err)
		g.Expect(rt.LightClusters()).To(Equal(1), "the moved cluster's nodes, and no others")
	}).WithTimeout(10 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

	t.Log("The second plane runs the KubernetesCluster on the same Machines")
	moved := &vitiv1.KubernetesCluster{}
	g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(kc), moved)).To(Succeed())
	clusters.WaitKubernetesClusterRunning(t, tc, moved, "v1.36.3", map[string]int32{"": 1, "general": 1})
	g.Expect(moved.Annotations).To(HaveKeyWithValue(vitiv1.ClusterCreatedAnnotation, kc.Annotations[vitiv1.ClusterCreatedAnnotation]))
	cluster := &clusterv1.Cluster{}
	g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(kc), cluster)).To(Succeed())
	g.Expect(metav1.IsControlledBy(cluster, moved)).To(BeTrue(), "the moved Cluster is the moved KubernetesCluster's")
	g.Expect(machineNames(tc)).To(Equal(before), "no Machine was made or replaced")
	g.Expect(rt.LightClusters()).To(Equal(1))

	t.Log("The moved KubernetesCluster scales its pool, then deletes every node")
	patch := client.MergeFrom(moved.DeepCopy())
	moved.Spec.Topology.Workers.NodePools[0].Replicas = 2
	g.Expect(tc.Patch(ctx, moved, patch)).To(Succeed())
	clusters.WaitKubernetesClusterRunning(t, tc, moved, "v1.36.3", map[string]int32{"": 1, "general": 2})
	g.Expect(tc.Delete(ctx, moved)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := tc.Get(ctx, client.ObjectKeyFromObject(kc), &vitiv1.KubernetesCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "KubernetesCluster: %v", err)
		g.Expect(machineNames(tc)).To(BeEmpty())
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(rt.LightClusters()).To(BeZero(), "no node of the cluster is left")

	t.Log("A KubernetesCluster whose record says its Cluster was made waits for that Cluster")
	waiting := newKC("waiting", map[string]string{vitiv1.ClusterCreatedAnnotation: "2026-12-01T00:00:00Z"})
	g.Expect(tc.Create(ctx, waiting)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), waiting)).To(Succeed())
		ready := meta.FindStatusCondition(waiting.Status.Conditions, vitiv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(kubernetescluster.ReasonClusterMissing))
		g.Expect(waiting.Status.Phase).To(Equal(vitiv1.PhaseFailed))
		g.Expect(waiting.Status.Message).To(ContainSubstring("remove the " + vitiv1.ClusterCreatedAnnotation + " annotation"))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(tc.Get(ctx, client.ObjectKeyFromObject(waiting), &clusterv1.Cluster{}))
	}).WithTimeout(3*time.Second).WithPolling(200*time.Millisecond).Should(BeTrue(), "no Cluster is made while the record is there")
	t.Log("Once a person removes the record, it makes its Cluster and records it again")
	patch = client.MergeFrom(waiting.DeepCopy())
	delete(waiting.Annotations, vitiv1.ClusterCreatedAnnotation)
	g.Expect(tc.Patch(ctx, waiting, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cluster := &clusterv1.Cluster{}
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), cluster)).To(Succeed())
		g.Expect(metav1.IsControlledBy(cluster, waiting)).To(BeTrue())
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), waiting)).To(Succeed())
		g.Expect(waiting.Annotations).To(HaveKey(vitiv1.ClusterCreatedAnnotation))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	t.Log("A Cluster a person deletes is made again once it is gone")
	first := &clusterv1.Cluster{}
	g.Eventually(func(g Gomega) {
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), first)).To(Succeed())
		g.Expect(first.Finalizers).To(ContainElement(clusterv1.ClusterFinalizer), "Cluster API holds it while it deletes what it made")
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(tc.Delete(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cluster := &clusterv1.Cluster{}
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), cluster)).To(Succeed())
		g.Expect(cluster.UID).NotTo(Equal(first.UID), "a new Cluster")
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), waiting)).To(Succeed())
		g.Expect(metav1.IsControlledBy(cluster, waiting)).To(BeTrue())
		g.Expect(waiting.Annotations).To(HaveKey(vitiv1.ClusterCreatedAnnotation))
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), func() string { return "the KubernetesCluster says: " + waiting.Status.Message })
	t.Log("A paused Cluster is left as it is; the KubernetesCluster's change waits, and says so")
	cluster = &clusterv1.Cluster{}
	g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), cluster)).To(Succeed())
	pause := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(true)
	g.Expect(tc.Patch(ctx, cluster, pause)).To(Succeed())
	g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), waiting)).To(Succeed())
	patch = client.MergeFrom(waiting.DeepCopy())
	waiting.Spec.Topology.Workers.NodePools[0].Replicas = 2
	g.Expect(tc.Patch(ctx, waiting, patch)).To(Succeed())
	poolReplicas := func(g Gomega) int32 {
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), cluster)).To(Succeed())
		g.Expect(cluster.Spec.Topology.Workers.MachineDeployments).To(HaveLen(1))
		return ptr.Deref(cluster.Spec.Topology.Workers.MachineDeployments[0].Replicas, 0)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), waiting)).To(Succeed())
		g.Expect(waiting.Status.ObservedGeneration).To(Equal(waiting.Generation))
		g.Expect(waiting.Status.Message).To(ContainSubstring("Cluster waiting is paused (spec.paused)"))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(poolReplicas(g)).To(BeEquivalentTo(1), "the paused Cluster is not changed")
	unpause := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(false)
	g.Expect(tc.Patch(ctx, cluster, unpause)).To(Succeed())
	g.Eventually(poolReplicas).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(BeEquivalentTo(2), "resumed, it gets the change")

	t.Log("Deleted as clusterctl move deletes what it copied (the Cluster paused and deleted first, annotations replaced), it makes no Cluster")
	cluster = &clusterv1.Cluster{}
	g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(waiting), cluster)).To(Succeed())
	pause = client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(true)
	g.Expect(tc.Patch(ctx, cluster, pause)).To(Succeed())
	forMove := client.RawPatch(types.JSONPatchType, []byte(`[{"op": "add", "path": "/metadata/annotations", "value": {"`+clusterctlv1.DeleteForMoveAnnotation+`": ""}}]`))
	g.Expect(tc.Patch(ctx, cluster, forMove)).To(Succeed())
	g.Expect(tc.Delete(ctx, cluster)).To(Succeed())
	g.Expect(client.IgnoreNotFound(tc.Patch(ctx, cluster, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":[]}}`))))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(tc.Get(ctx, client.ObjectKeyFromObject(waiting), &clusterv1.Cluster{}))
	}).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(BeTrue())
	g.Expect(tc.Patch(ctx, waiting, forMove)).To(Succeed())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(tc.Get(ctx, client.ObjectKeyFromObject(waiting), &clusterv1.Cluster{}))
	}).WithTimeout(3*time.Second).WithPolling(100*time.Millisecond).Should(BeTrue(), "no Cluster is made for a KubernetesCluster being moved away")
	g.Expect(tc.Delete(ctx, waiting)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(tc.Get(ctx, client.ObjectKeyFromObject(waiting), waiting))
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(BeTrue(), "the KubernetesCluster is deleted")
}

// removeDanglingOwnerReferences drops, from the objects of the lists' kinds in namespace ns,
// the owner references to objects that no longer exist, as Kubernetes' garbage collector
// does; envtest runs none.
func removeDanglingOwnerReferences(t *testing.T, c client.Client, ns string, lists ...client.ObjectList) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	for _, list := range lists {
		g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		items, err := meta.ExtractList(list)
		g.Expect(err).NotTo(HaveOccurred())
		for _, item := range items {
			o := item.(client.Object)
			kept := slices.DeleteFunc(slices.Clone(o.GetOwnerReferences()), func(ref metav1.OwnerReference) bool {
				owner := &unstructured.Unstructured{}
				owner.SetAPIVersion(ref.APIVersion)
				owner.SetKind(ref.Kind)
				err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, owner)
				return apierrors.IsNotFound(err) || err == nil && owner.GetUID() != ref.UID
			})
			if len(kept) == len(o.GetOwnerReferences()) {
				continue
			}
			patch := client.MergeFromWithOptions(o.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
			o.SetOwnerReferences(kept)
			g.Expect(c.Patch(ctx, o, patch)).To(Succeed())
		}
	}
}
