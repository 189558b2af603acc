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
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
	bootstrapsetup "github.com/talon-capi/talon/bootstrap/setup"
	"github.com/talon-capi/talon/controlplane/reconcilers/kubernetescluster"
	controlplanesetup "github.com/talon-capi/talon/controlplane/setup"
	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	infrasetup "github.com/talon-capi/talon/infrastructure/setup"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/test/clusters"
	"github.com/talon-capi/talon/test/envtest"
)

// TestKubernetesCluster builds a vitistack.io KubernetesCluster of one control-plane node and
// two worker pools through the control-plane manager's KubernetesCluster controller, Cluster
// API's topology reconcilers and Talon's providers, on light simulated nodes: it becomes a
// Running cluster whose status lists its nodes and version; its pools' labels and taints
// reach the nodes' configs; scaling a pool and changing the minor version flow through;
// deleting it deletes the Cluster and every node. Versions Talon cannot run are refused when
// the KubernetesCluster is applied, and a Cluster of the same name it did not create is
// left alone.
func TestKubernetesCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	c := env.Client
	ns := env.NewNamespace(t, "kubernetescluster")
	rt, err := runtime.NewLightSim(ctx, t.TempDir(), logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	startManager(t, env, rt, ns)
	applyTemplate(t, c, "clusterclass-talos-docker.yaml", ns)

	pools := []vitiv1.NodePool{
		{Name: "general", Replicas: 1, Metadata: vitiv1.Metadata{Labels: map[string]string{"example.com/pool": "general"}}},
		{Name: "gpu", Replicas: 1, Taint: []vitiv1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: "NoSchedule"}}},
	}
	newKC := func(name, version string, pools []vitiv1.NodePool) *vitiv1.KubernetesCluster {
		return &vitiv1.KubernetesCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: vitiv1.KubernetesClusterSpec{
				Data: vitiv1.ClusterData{ClusterID: "team-a-prod", Provider: "talos", Region: "west", Environment: "test"},
				Topology: vitiv1.Topology{Version: version, ControlPlane: vitiv1.ControlPlane{Replicas: 1},
					Workers: vitiv1.Workers{NodePools: pools}},
			},
		}
	}

	t.Log("Versions Talon cannot run are refused when applied, naming the field")
	for _, bad := range []struct {
		name    string
		kc      *vitiv1.KubernetesCluster
		message string
	}{
		{"a minor outside Talos' window", newKC("old", "1.20", nil), "spec.topology.version: Invalid value: \"1.20\": Kubernetes v1.20 is not supported on Talos"},
		{"not a version", newKC("banana", "banana", nil), "spec.topology.version"},
		{"a pool of another version", newKC("skew", "1.36", []vitiv1.NodePool{{Name: "old", Replicas: 1, Version: "1.35.4"}}),
			"spec.topology.workers.nodePools[0].version: Invalid value: \"1.35.4\": must name the cluster's version 1.36"},
		{"an even control plane", func() *vitiv1.KubernetesCluster {
			kc := newKC("even", "1.36", nil)
			kc.Spec.Topology.ControlPlane.Replicas = 2
			return kc
		}(), "controlplane replicas must be odd"},
		{"a taint Talos refuses", newKC("taint", "1.36", []vitiv1.NodePool{{Name: "p", Taint: []vitiv1.Taint{{Key: "bad key", Effect: "NoSchedule"}}}}),
			"spec.topology.workers.nodePools[0].taint"},
	} {
		err := c.Create(ctx, bad.kc)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", bad.name, err)
		g.Expect(err.Error()).To(ContainSubstring(bad.message), bad.name)
	}

	t.Log("A Cluster of the same name that the KubernetesCluster did not create is left alone")
	g.Expect(c.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, Spec: clusterv1.ClusterSpec{
		Paused:            ptr.To(true),
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerCluster", Name: "taken"},
	}})).To(Succeed())
	taken := newKC("taken", "1.36", nil)
	g.Expect(c.Create(ctx, taken)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(taken), taken)).To(Succeed())
		ready := meta.FindStatusCondition(taken.Status.Conditions, vitiv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(kubernetescluster.ReasonClusterNameTaken))
		g.Expect(taken.Status.Phase).To(Equal(vitiv1.PhaseFailed))
		g.Expect(taken.Status.Message).To(ContainSubstring("a Cluster named taken exists"))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	other := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taken"}, other)).To(Succeed())
	g.Expect(other.Spec.Topology.IsDefined()).To(BeFalse(), "the other Cluster is not rewritten")
	t.Log("Once the other Cluster is deleted, the KubernetesCluster makes its own")
	unpause := client.MergeFrom(other.DeepCopy())
	other.Spec.Paused = ptr.To(false) // Cluster API removes a paused Cluster's finalizer only once it is not paused
	g.Expect(c.Patch(ctx, other, unpause)).To(Succeed())
	g.Expect(c.Delete(ctx, other)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(taken), taken)).To(Succeed())
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taken"}, other)).To(Succeed(), "the KubernetesCluster says: %s", taken.Status.Message)
		g.Expect(metav1.IsControlledBy(other, taken)).To(BeTrue())
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(c.Delete(ctx, taken)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(taken), taken)) &&
			apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taken"}, other))
	}).WithTimeout(time.Minute).Should(BeTrue(), "the KubernetesCluster and its Cluster are deleted")

	t.Log("One control-plane node and two worker pools, Kubernetes 1.36")
	kc := newKC("prod", "1.36", pools)
	variables, err := json.Marshal(map[string]any{"dockerSubnet": "127.0.91.0/24"})
	g.Expect(err).NotTo(HaveOccurred())
	kc.Annotations = map[string]string{vitiv1.VariablesAnnotation: string(variables)}
	start := time.Now()
	g.Expect(c.Create(ctx, kc)).To(Succeed())
	clusters.WaitKubernetesClusterRunning(t, c, kc, "v1.36.3", map[string]int32{"": 1, "general": 1, "gpu": 1})
	t.Logf("Running %s after the KubernetesCluster was applied", time.Since(start).Round(time.Second))
	g.Expect(kc.Status.State.Endpoints).To(ConsistOf(HaveField("Name", "kubernetes")))
	g.Expect(kc.Status.State.Endpoints[0].Address).To(HavePrefix("https://127.0.91."), "the class's dockerSubnet came from the annotation")

	cluster := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(kc), cluster)).To(Succeed())
	g.Expect(metav1.IsControlledBy(cluster, kc)).To(BeTrue())
	g.Expect(cluster.Labels).To(HaveKeyWithValue(vitiv1.ClusterIDLabel, "team-a-prod"))
	g.Expect(cluster.Spec.Topology.ClassRef.Name).To(Equal("talos-docker"))
	// The pools' labels and taints reached the nodes' Talos configs.
	machines := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: "prod"})).To(Succeed())
	for _, m := range machines.Items {
		config := &bootstrapv1.TalosConfig{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.Bootstrap.ConfigRef.Name}, config)).To(Succeed())
		switch m.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] {
		case "general":
			g.Expect(config.Spec.NodeLabels).To(Equal(map[string]string{"example.com/pool": "general"}))
			g.Expect(m.Labels).To(HaveKeyWithValue("example.com/pool", "general"), "the pool's labels are on its Machines too")
		case "gpu":
			g.Expect(config.Spec.NodeTaints).To(Equal([]bootstrapv1.NodeTaint{{Key: "nvidia.com/gpu", Value: "true", Effect: bootstrapv1.TaintEffectNoSchedule}}))
		default:
			g.Expect(config.Spec.NodeLabels).To(BeEmpty())
			g.Expect(config.Spec.NodeTaints).To(BeEmpty())
		}
	}

	t.Log("The class's defaults are the Cluster's own: a class re-applied with another default does not change it")
	g.Expect(cluster.Spec.Topology.Variables).To(ContainElement(HaveField("Name", "cni")), "Cluster API stored the class's default")
	class := &clusterv1.ClusterClass{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "talos-docker"}, class)).To(Succeed())
	for i, v := range class.Spec.Variables {
		if v.Name == "cni" {
			class.Spec.Variables[i].Schema.OpenAPIV3Schema.Default = &apiextensionsv1.JSON{Raw: []byte(`"none"`)}
		}
	}
	g.Expect(c.Update(ctx, class)).To(Succeed())

	t.Log("Scaling a pool")
	update := func(change func(*vitiv1.KubernetesCluster)) error {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
		before := kc.DeepCopy()
		change(kc)
		return c.Patch(ctx, kc, client.MergeFrom(before))
	}
	g.Expect(update(func(kc *vitiv1.KubernetesCluster) { kc.Spec.Topology.Workers.NodePools[0].Replicas = 2 })).To(Succeed())
	start = time.Now()
	clusters.WaitKubernetesClusterRunning(t, c, kc, "v1.36.3", map[string]int32{"": 1, "general": 2, "gpu": 1})
	t.Logf("Scaled in %s", time.Since(start).Round(time.Second))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(kc), cluster)).To(Succeed())
	for _, v := range cluster.Spec.Topology.Variables {
		if v.Name == "cni" {
			g.Expect(string(v.Value.Raw)).To(Equal(`"flannel"`), "the Cluster keeps the default it was made with")
		}
	}

	t.Log("A downgrade is refused; the next minor flows through")
	err = update(func(kc *vitiv1.KubernetesCluster) { kc.Spec.Topology.Version = "1.35" })
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("cannot downgrade Kubernetes from 1.36 to 1.35"))
	g.Expect(update(func(kc *vitiv1.KubernetesCluster) { kc.Spec.Topology.Version = "1.37" })).To(Succeed())
	start = time.Now()
	clusters.WaitKubernetesClusterRunning(t, c, kc, "v1.37.2", map[string]int32{"": 1, "general": 2, "gpu": 1})
	t.Logf("Upgraded to v1.37.2 in %s", time.Since(start).Round(time.Second))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(kc), cluster)).To(Succeed())
	g.Expect(cluster.Spec.Topology.Version).To(Equal("v1.37.2"))

	t.Log("Deleting the KubernetesCluster deletes its Cluster and every node")
	g.Expect(c.Delete(ctx, kc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := c.Get(ctx, client.ObjectKeyFromObject(kc), &vitiv1.KubernetesCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "KubernetesCluster: %v", err)
		err = c.Get(ctx, client.ObjectKeyFromObject(kc), &clusterv1.Cluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Cluster: %v", err)
		g.Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: "prod"})).To(Succeed())
		g.Expect(machines.Items).To(BeEmpty())
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(rt.LightClusters()).To(BeZero(), "no node of the cluster is left")
}

// startManager runs Cluster API's core and topology reconcilers, Talon's three providers on
// the light simulated nodes of rt, and the KubernetesCluster controller (ClusterClass
// talos-docker) on env, with Cluster API's Cluster webhooks for namespace ns.
func startManager(t *testing.T, env *envtest.Environment, rt *runtime.Sim, ns string) {
	t.Helper()
	env.StartManager(t, envtest.ManagerOptions{
		Topology:          true,
		ClusterWebhooksIn: ns,
		Setup: func(ctx context.Context, mgr ctrl.Manager) error {
			opts := manager.NewOptions()
			r := &kubernetescluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Class: "talos-docker"}
			return errors.Join(
				bootstrapsetup.Reconcilers(ctx, mgr, opts),
				controlplanesetup.Reconcilers(ctx, mgr, opts),
				infrasetup.Reconcilers(ctx, mgr, opts, infrasetup.NewSettings(), rt),
				r.SetupWithManager(ctx, mgr, controller.Options{}),
			)
		},
	})
}
