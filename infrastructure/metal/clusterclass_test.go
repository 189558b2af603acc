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

package metal_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/metal"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/metallab"
	"github.com/talon-capi/talon/test/require"
)

// TestMetalClusterClass: "clusterctl generate cluster --flavor metal-clusterclass" renders a
// Cluster of the talos-metal ClusterClass and the class with it; with two of the class's
// variables added (extensions, disk encryption), Cluster API's topology reconciler builds a
// 1 + 1 cluster on simulated hosts behind the site's DHCP server, each Machine on a host its
// selector picks, and scaling the workers through the topology claims the third host.
func TestMetalClusterClass(t *testing.T) {
	require.Layer(t, metallab.Layer, metallab.DHCPServerUnavailable())
	_, err := envtest.Binary("clusterctl")
	require.Layer(t, envtest.Layer, err)
	env := envtest.Get(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	namespace := env.NewNamespace(t, "metal-class")
	l := metallab.New(t, namespace)
	l.StartDHCPServer(10, 12)
	hostCtx, stopHosts := context.WithCancel(context.Background())
	t.Cleanup(stopHosts)
	// Names in the opposite order of the roles: a Machine takes the first Available host its
	// selector matches, so without the class's selectors the control plane would take host-a.
	for i, r := range []struct{ name, role string }{{"host-c", "control-plane"}, {"host-a", "worker"}, {"host-b", "worker"}} {
		l.Register(c, l.AddHost(hostCtx, r.name, i+1, i == 1, ctrl.Log.WithName("sim-host")), r.role)
	}
	factory := startProviders(t, env, l, providerOptions{topology: true})
	lb := simtest.NewLoadBalancer(t, l.ServerIP.String(), 6443, 50001)
	lb.SetBackends(l.Addresses(10, 12)...)

	variables := metallab.BootAssets(t)
	for k, v := range map[string]string{
		"KUBERNETES_VERSION": simtest.KubernetesVersion, "CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "1",
		"CONTROL_PLANE_ENDPOINT_HOST": l.ServerIP.String(),
	} {
		variables[k] = v
	}
	objs := metallab.Generate(t, "metal", "metal-clusterclass", namespace, variables)
	kinds := make([]string, 0, len(objs))
	for i := range objs {
		obj := &objs[i]
		kinds = append(kinds, obj.GetKind())
		if obj.GetKind() == "Cluster" {
			addClusterVariables(g, obj, map[string]any{"extensions": []string{"siderolabs/iscsi-tools"}, "diskEncryption": "NodeID"})
		}
		g.Expect(c.Create(ctx, obj)).To(Succeed(), "create %s %s", obj.GetKind(), obj.GetName())
	}
	g.Expect(kinds).To(ConsistOf("Cluster", "ClusterClass", "TalosMetalClusterTemplate", "TalosControlPlaneTemplate",
		"TalosMetalMachineTemplate", "TalosMetalMachineTemplate", "TalosConfigTemplate"), "clusterctl adds the class to the cluster")

	start := time.Now()
	var machines []clusterv1.Machine
	g.Eventually(func(g Gomega) {
		machines = runningMachines(ctx, g, c, namespace, 2)
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("2 Machines Running %s after the Cluster was applied", time.Since(start).Round(time.Second))
	// Each Machine is on a host of its role, and the class's variables reached each config:
	// the encrypted volumes and the installer of a schematic with the extension.
	for _, m := range machines {
		_, controlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]
		wantRole := map[bool]string{true: "control-plane", false: "worker"}[controlPlane]
		hostName, _ := strings.CutPrefix(m.Spec.ProviderID, metal.ProviderIDPrefix+namespace+"/")
		host := &infrav1.MetalHost{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: hostName}, host)).To(Succeed(), "Machine %s: providerID %s", m.Name, m.Spec.ProviderID)
		g.Expect(host.Labels).To(HaveKeyWithValue("talon.dev/role", wantRole), "Machine %s", m.Name)

		data := &corev1.Secret{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: *m.Spec.Bootstrap.DataSecretName}, data)).To(Succeed())
		config := string(data.Data["value"])
		g.Expect(config).To(ContainSubstring("kind: VolumeConfig"), "Machine %s", m.Name)
		g.Expect(config).To(ContainSubstring("nodeID: {}"), "Machine %s", m.Name)
		talosConfig := &bootstrapv1.TalosConfig{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, talosConfig)).To(Succeed())
		g.Expect(string(factory.Schematic(talosConfig.Status.ImageFactory.SchematicID))).To(ContainSubstring("siderolabs/iscsi-tools"), "Machine %s", m.Name)
	}

	// Scaling the workers through the topology claims the last worker host.
	cluster := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "metal"}, cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](2)
	g.Expect(c.Patch(ctx, cluster, patch)).To(Succeed())
	start = time.Now()
	g.Eventually(func(g Gomega) {
		runningMachines(ctx, g, c, namespace, 3)
		hosts := &infrav1.MetalHostList{}
		g.Expect(c.List(ctx, hosts, client.InNamespace(namespace))).To(Succeed())
		for _, h := range hosts.Items {
			g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateProvisioned), "MetalHost %s", h.Name)
		}
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("Scaled to 2 workers through the topology in %s", time.Since(start).Round(time.Second))
}

// addClusterVariables appends topology variables to a Cluster object.
func addClusterVariables(g Gomega, obj *unstructured.Unstructured, values map[string]any) {
	cluster := &clusterv1.Cluster{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cluster)).To(Succeed())
	for name, value := range values {
		raw, err := json.Marshal(value)
		g.Expect(err).NotTo(HaveOccurred())
		cluster.Spec.Topology.Variables = append(cluster.Spec.Topology.Variables, clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: raw}})
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cluster)
	g.Expect(err).NotTo(HaveOccurred())
	obj.Object = u
}
