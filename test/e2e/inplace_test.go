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
	"bytes"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
)

// Versions of the quickstart cluster's patch releases: talon up installs the first.
const (
	quickstartVersion  = "v1.37.2"
	inPlaceVersion     = "v1.37.3"
	replacementVersion = "v1.37.4"
)

// updateInPlace takes the quickstart cluster (1 control plane, 2 workers) to a new
// Kubernetes patch release in place: the control plane by its InPlace strategy, then the
// workers' MachineDeployment through Cluster API's in-place update hooks, which Talon's
// control-plane manager serves. Every Machine and container stays; each Node runs the new
// kubelet. With the core manager's InPlaceUpdates and RuntimeSDK gates off, the next
// version of the MachineDeployment replaces its Machines instead.
func (s *suite) updateInPlace(mgmt client.Client) {
	ctx, g, t := s.t.Context(), s.g, s.t
	workload := s.client(filepath.Join(s.out, "e2e", "kubeconfig"))

	t.Log("Cluster API injected the CA of Talon's ExtensionConfig from the Secret its annotation names, cert-manager's, and discovered the hooks")
	secret := s.expectInPlaceHooks(mgmt)
	g.Expect(secret.Annotations).To(HaveKey("cert-manager.io/certificate-name"), "cert-manager issued the webhook's certificate")

	before := clusters.UsableMachines(ctx, g, mgmt, "default", "e2e")
	g.Expect(before).To(HaveLen(3))
	for _, m := range before {
		g.Expect(m.Spec.Version).To(Equal(quickstartVersion), "Machine %s", m.Name)
	}
	containers := s.containers()

	start := time.Now()
	s.patch(mgmt, &controlplanev1.TalosControlPlane{}, "e2e-control-plane",
		fmt.Sprintf(`{"spec":{"version":%q,"rollout":{"strategy":{"type":"InPlace","rollingUpdate":null}}}}`, inPlaceVersion))
	s.waitVersions(mgmt, workload, inPlaceVersion, clusterv1.MachineControlPlaneLabel)
	t.Logf("Control plane updated in place to %s in %s", inPlaceVersion, time.Since(start).Round(time.Second))

	start = time.Now()
	s.patch(mgmt, &clusterv1.MachineDeployment{}, "e2e-workers", fmt.Sprintf(`{"spec":{"template":{"spec":{"version":%q}}}}`, inPlaceVersion))
	s.waitVersions(mgmt, workload, inPlaceVersion, "")
	after := clusters.UsableMachines(ctx, g, mgmt, "default", "e2e")
	g.Expect(clusters.Names(after)).To(Equal(clusters.Names(before)), "no Machine replaced")
	g.Expect(s.containers()).To(Equal(containers), "no container replaced")
	for _, m := range after {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
			continue
		}
		i := slices.IndexFunc(before, func(b clusterv1.Machine) bool { return b.Name == m.Name })
		g.Expect(m.Labels[clusterv1.MachineSetNameLabel]).NotTo(Equal(before[i].Labels[clusterv1.MachineSetNameLabel]),
			"worker Machine %s moved to the new MachineSet", m.Name)
	}
	t.Logf("Workers updated in place to %s through Cluster API's hooks in %s", inPlaceVersion, time.Since(start).Round(time.Second))

	t.Log("Cluster API's core manager without the InPlaceUpdates and RuntimeSDK gates: a new version replaces the workers")
	// Rolling the core manager out replaces its Pod, and its log with it.
	p, err := plane.Open(filepath.Join(s.out, quickstart.PlaneDirName), nil)
	g.Expect(err).NotTo(HaveOccurred())
	clusters.ExpectNoRefusals(t, p)
	s.turnOffInPlaceGates(mgmt)
	s.patch(mgmt, &controlplanev1.TalosControlPlane{}, "e2e-control-plane", fmt.Sprintf(`{"spec":{"version":%q}}`, replacementVersion))
	s.waitVersions(mgmt, workload, replacementVersion, clusterv1.MachineControlPlaneLabel)
	start = time.Now()
	s.patch(mgmt, &clusterv1.MachineDeployment{}, "e2e-workers", fmt.Sprintf(`{"spec":{"template":{"spec":{"version":%q}}}}`, replacementVersion))
	s.waitVersions(mgmt, workload, replacementVersion, "")
	replaced := clusters.UsableMachines(ctx, g, mgmt, "default", "e2e")
	for _, m := range replaced {
		_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
		g.Expect(slices.Contains(clusters.Names(before), m.Name)).To(Equal(cp), "Machine %s: the control plane's stays, workers are new", m.Name)
	}
	t.Logf("Workers replaced with %s in %s", replacementVersion, time.Since(start).Round(time.Second))
}

// expectInPlaceHooks waits until Cluster API's core manager has injected the CA of Talon's
// in-place update ExtensionConfig from the Secret its annotation names and discovered the
// control-plane manager's three hooks, calling it, and returns that Secret.
func (s *suite) expectInPlaceHooks(mgmt client.Client) *corev1.Secret {
	s.t.Helper()
	ctx := s.t.Context()
	secret := &corev1.Secret{}
	s.g.Eventually(func(g Gomega) {
		ext := &unstructured.Unstructured{}
		ext.SetAPIVersion("runtime.cluster.x-k8s.io/v1beta2")
		ext.SetKind("ExtensionConfig")
		g.Expect(mgmt.Get(ctx, client.ObjectKey{Name: "talon-control-plane-in-place-updates"}, ext)).To(Succeed())
		ns, name, _ := strings.Cut(ext.GetAnnotations()["runtime.cluster.x-k8s.io/inject-ca-from-secret"], "/")
		g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret)).To(Succeed())
		bundle, _, _ := unstructured.NestedString(ext.Object, "spec", "clientConfig", "caBundle")
		injected, err := base64.StdEncoding.DecodeString(bundle)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(bytes.TrimSpace(injected)).NotTo(BeEmpty())
		g.Expect(bytes.TrimSpace(injected)).To(Equal(bytes.TrimSpace(secret.Data["ca.crt"])), "the CA of Secret %s/%s", ns, name)
		handlers, _, _ := unstructured.NestedSlice(ext.Object, "status", "handlers")
		g.Expect(handlers).To(HaveLen(3), "CanUpdateMachineSet, CanUpdateMachine and UpdateMachine discovered")
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return secret
}

// turnOffInPlaceGates turns Cluster API's InPlaceUpdates and RuntimeSDK feature gates off
// in its core manager's Deployment, as an operator would, and waits until the Deployment
// has rolled out: one Pod, the new one, available.
func (s *suite) turnOffInPlaceGates(mgmt client.Client) {
	s.t.Helper()
	ctx, g := s.t.Context(), s.g
	key := client.ObjectKey{Namespace: "capi-system", Name: "capi-controller-manager"}
	d := &appsv1.Deployment{}
	g.Expect(mgmt.Get(ctx, key, d)).To(Succeed())
	patch := client.MergeFrom(d.DeepCopy())
	changed := 0
	for i, c := range d.Spec.Template.Spec.Containers {
		for j, arg := range c.Args {
			if gates, ok := strings.CutPrefix(arg, "--feature-gates="); ok {
				gates = strings.NewReplacer("InPlaceUpdates=true", "InPlaceUpdates=false", "RuntimeSDK=true", "RuntimeSDK=false").Replace(gates)
				d.Spec.Template.Spec.Containers[i].Args[j] = "--feature-gates=" + gates
				changed++
			}
		}
	}
	g.Expect(changed).To(Equal(1), "the core manager has one --feature-gates argument")
	g.Expect(mgmt.Patch(ctx, d, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(mgmt.Get(ctx, key, d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(BeEquivalentTo(1))
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
		g.Expect(d.Status.Replicas).To(BeEquivalentTo(1), "the old Pod is gone")
		g.Expect(ptr.Deref(d.Status.TerminatingReplicas, 0)).To(BeZero(), "the old Pod is gone")
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	s.t.Logf("Cluster API's core manager rolled out with %s", strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "))
}

// patch merge-patches the object called name in the default namespace.
func (s *suite) patch(c client.Client, obj client.Object, name, patch string) {
	s.t.Helper()
	obj.SetNamespace("default")
	obj.SetName(name)
	s.g.Expect(c.Patch(s.t.Context(), obj, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// waitVersions waits until the quickstart cluster's Machines with label (every Machine
// when "") have version, usable, and their Nodes run that kubelet.
func (s *suite) waitVersions(mgmt, workload client.Client, version, label string) {
	s.t.Helper()
	ctx := s.t.Context()
	s.g.Eventually(func(g Gomega) {
		machines := clusters.UsableMachines(ctx, g, mgmt, "default", "e2e")
		g.Expect(machines).To(HaveLen(3))
		for _, m := range machines {
			if _, ok := m.Labels[label]; label != "" && !ok {
				continue
			}
			g.Expect(m.Spec.Version).To(Equal(version), "Machine %s", m.Name)
			g.Expect(m.Annotations).NotTo(HaveKey(clusterv1.UpdateInProgressAnnotation), "Machine %s", m.Name)
			node := &corev1.Node{}
			g.Expect(workload.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node)).To(Succeed())
			g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal(version), "Node %s", node.Name)
		}
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// containers are the IDs of the quickstart cluster's containers, sorted.
func (s *suite) containers() []string {
	out, err := dockertest.Docker(s.t.Context(), "ps", "--quiet", "--no-trunc", "--filter", "label="+dockerruntime.LabelCluster+"=e2e")
	s.g.Expect(err).NotTo(HaveOccurred())
	return sortedFields(out)
}
