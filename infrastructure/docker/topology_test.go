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

package docker_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	bootstrapsetup "github.com/talon-capi/talon/bootstrap/setup"
	controlplanesetup "github.com/talon-capi/talon/controlplane/setup"
	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	infrasetup "github.com/talon-capi/talon/infrastructure/setup"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestClusterClassTopology builds a cluster of one control-plane and one worker Machine from
// the shipped ClusterClass (templates/clusterclass-talos-docker.yaml) with three of its
// variables set, through Cluster API's topology reconciler, on the in-process runtime, and
// upgrades its Kubernetes version two minors in one change of spec.topology.version: the
// class lists v1.35.4, v1.36.3 and v1.37.2 in spec.kubernetesVersions, so Cluster API chains
// the upgrade through each minor, and the control plane, InPlace, takes each step on its
// running node, which serves each minor's own kube-apiserver in turn. Worker Machines of the
// new version are created only once the control plane reports that version
// (status.versions), which the test checks at every step; the workers skip v1.36.
func TestClusterClassTopology(t *testing.T) {
	require.HeavyNodes(t)
	const oldVersion, midVersion, newVersion = "v1.35.4", simtest.KubernetesVersion, "v1.37.2"
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	rt := runtime.NewSim(ctx, envtest.BinDir(), t.TempDir(), logr.Discard())
	env.StartManager(t, envtest.ManagerOptions{
		Topology: true,
		Setup: func(ctx context.Context, mgr ctrl.Manager) error {
			opts := manager.NewOptions()
			if err := bootstrapsetup.Reconcilers(ctx, mgr, opts); err != nil {
				return err
			}
			if err := controlplanesetup.Reconcilers(ctx, mgr, opts); err != nil {
				return err
			}
			return infrasetup.Reconcilers(ctx, mgr, opts, infrasetup.NewSettings(), rt)
		},
	})
	ns := env.NewNamespace(t, "topology")
	c := env.Client
	applyTemplate(t, c, "addon-local-path-provisioner.yaml", map[string]string{"NAMESPACE": ns}, nil)
	applyTemplate(t, c, "clusterclass-talos-docker.yaml", map[string]string{"NAMESPACE": ns}, func(o *unstructured.Unstructured) {
		if o.GetKind() == "ClusterClass" {
			g.Expect(unstructured.SetNestedStringSlice(o.Object, []string{oldVersion, midVersion, newVersion}, "spec", "kubernetesVersions")).To(Succeed())
		}
	})
	variable := func(name string, value any) clusterv1.ClusterVariable {
		raw, err := json.Marshal(value)
		g.Expect(err).NotTo(HaveOccurred())
		return clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: raw}}
	}
	g.Expect(c.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "topology", Namespace: ns,
		Labels: map[string]string{"addons.talon.dev/local-path-provisioner": "true"}}, Spec: clusterv1.ClusterSpec{
		ClusterNetwork: clusterv1.ClusterNetwork{
			Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
			Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
		},
		Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: "talos-docker", Namespace: ns},
			Version:      oldVersion,
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{
				Class: "worker", Name: "md-0", Replicas: ptr.To[int32](1),
			}}},
			Variables: []clusterv1.ClusterVariable{
				variable("workerConfigPatches", []string{"machine:\n  sysctls:\n    vm.max_map_count: \"262144\"\n"}),
				variable("dockerSubnet", "127.0.72.0/24"),
				variable("controlPlaneRolloutStrategy", "InPlace"),
			},
		},
	}})).To(Succeed())

	start := time.Now()
	s := clusterSpec{name: "topology", namespace: ns}
	machines := waitForRunning(t, c, s, 2)
	t.Logf("%d Machines Running %s after the Cluster was applied", len(machines), time.Since(start).Round(time.Second))
	// The class's variables reached the templates: the worker's config carries its patch,
	// the nodes sit in the requested subnet.
	for _, m := range machines {
		data := &corev1.Secret{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: *m.Spec.Bootstrap.DataSecretName}, data)).To(Succeed())
		_, isControlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]
		g.Expect(strings.Contains(string(data.Data["value"]), "vm.max_map_count")).To(Equal(!isControlPlane), "Machine %s", m.Name)
		g.Expect(m.Status.Addresses[0].Address).To(HavePrefix("127.0.72."))
	}

	var controlPlaneMachine string
	for _, m := range machines {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
			controlPlaneMachine = m.Name
		}
	}
	tcps := &controlplanev1.TalosControlPlaneList{}
	g.Expect(c.List(ctx, tcps, client.InNamespace(ns))).To(Succeed())
	g.Expect(tcps.Items).To(HaveLen(1))
	g.Expect(tcps.Items[0].Spec.Rollout.Strategy.Type).To(Equal(controlplanev1.InPlaceStrategyType), "the class's variable reached the control plane")
	kube := workload(t, c, s)
	served, err := kube.Discovery().ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served.GitVersion).To(Equal(oldVersion), "the node runs v1.35's own kube-apiserver (bin/v1.35)")

	// The local-path addon reached the workload cluster through Cluster API's
	// ClusterResourceSet. Simulated nodes run no Pods, so no volume is provisioned: its
	// objects are what is checked.
	g.Eventually(func(g Gomega) {
		class, err := kube.StorageV1().StorageClasses().Get(ctx, "local-path", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(class.Annotations).To(HaveKeyWithValue("storageclass.kubernetes.io/is-default-class", "true"))
		g.Expect(class.Provisioner).To(Equal("rancher.io/local-path"))
		namespace, err := kube.CoreV1().Namespaces().Get(ctx, "local-path-storage", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(namespace.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "privileged"))
		deployment, err := kube.AppsV1().Deployments("local-path-storage").Get(ctx, "local-path-provisioner", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(deployment.Spec.Template.Spec.Containers[0].Image).To(Equal("rancher/local-path-provisioner:v0.0.30"))
		config, err := kube.CoreV1().ConfigMaps("local-path-storage").Get(ctx, "local-path-config", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(config.Data["config.json"]).To(ContainSubstring("/var/local-path-provisioner"))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	// A Kubernetes upgrade two minors up through the topology: the control plane takes
	// v1.36.3, then v1.37.2, in place; no worker Machine of a new version exists before the
	// control plane reports it, and the workers go straight to v1.37.2.
	cluster := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "topology"}, cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Topology.Version = newVersion
	g.Expect(c.Patch(ctx, cluster, patch)).To(Succeed())
	start = time.Now()
	workersWaited := false
	var specVersions, servedVersions []string
	reportedMid := false
	g.Eventually(func(eg Gomega) {
		// Machines first: a control plane seen afterwards is no older.
		list := &clusterv1.MachineList{}
		eg.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		eg.Expect(c.List(ctx, tcps, client.InNamespace(ns))).To(Succeed())
		eg.Expect(tcps.Items).To(HaveLen(1))
		tcp := tcps.Items[0]
		if n := len(specVersions); n == 0 || specVersions[n-1] != tcp.Spec.Version {
			specVersions = append(specVersions, tcp.Spec.Version)
		}
		if served, err := kube.Discovery().ServerVersion(); err == nil {
			if n := len(servedVersions); n == 0 || servedVersions[n-1] != served.GitVersion {
				servedVersions = append(servedVersions, served.GitVersion)
			}
		}
		reportedMid = reportedMid || slices.Equal(tcp.Status.Versions, []clusterv1.StatusVersion{{Version: midVersion, Replicas: 1}})
		reported := slices.Equal(tcp.Status.Versions, []clusterv1.StatusVersion{{Version: newVersion, Replicas: 1}})
		for _, m := range list.Items {
			_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
			if cp {
				g.Expect(m.Name).To(Equal(controlPlaneMachine), "the control plane is updated in place, never replaced")
				continue
			}
			g.Expect(m.Spec.Version).NotTo(Equal(midVersion), "worker Machine %s: workers skip the intermediate minor", m.Name)
			if m.Spec.Version == newVersion && !reported {
				g.Expect(m.Name).To(BeEmpty(), "worker Machine %s of %s exists before the control plane reports %s: %v", m.Name, newVersion, newVersion, tcp.Status.Versions)
			}
			if m.Spec.Version == oldVersion && !reported {
				workersWaited = true
			}
		}
		upgraded := running(ctx, eg, c, s, 2)
		for _, m := range upgraded {
			eg.Expect(m.Spec.Version).To(Equal(newVersion), "Machine %s", m.Name)
		}
		eg.Expect(servedVersions).To(HaveLen(3), "the versions kube-apiserver served: %v", servedVersions)
	}).WithTimeout(8 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(workersWaited).To(BeTrue(), "the workers kept the old version while the control plane rolled")
	g.Expect(specVersions).To(Equal([]string{oldVersion, midVersion, newVersion}), "the control plane was asked for each minor in turn")
	g.Expect(reportedMid).To(BeTrue(), "the control plane reported %s before it was asked for %s", midVersion, newVersion)
	g.Expect(servedVersions).To(Equal([]string{oldVersion, midVersion, newVersion}), "the node served each minor's kube-apiserver in turn")
	t.Logf("Topology upgraded from %s through %s to %s in %s", oldVersion, midVersion, newVersion, time.Since(start).Round(time.Second))
	deleteCluster(t, c, rt, s)
}
