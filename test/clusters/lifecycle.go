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

package clusters

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/gomega" //nolint:staticcheck // the assertions read as the tests' do
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
	dockertest "github.com/talon-capi/talon/test/docker"
)

// Versions of a ClusterClass cluster's topology upgrade.
const (
	OldVersion = "v1.35.4"
	NewVersion = "v1.36.3"
)

// Logf logs a line of a test.
type Logf func(format string, args ...any)

// ApplyObjects applies objs with server-side apply as fieldOwner, each retried for up to a
// minute: right after the providers are installed, a webhook's Service may not route to its
// manager yet (the endpoint, then kube-proxy's rules, follow the Pod's readiness), and the API
// server refuses what that webhook validates until it does.
func ApplyObjects(ctx context.Context, g Gomega, c client.Client, objs []unstructured.Unstructured, fieldOwner string) {
	for i := range objs {
		g.Eventually(func() error {
			return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&objs[i]), client.FieldOwner(fieldOwner))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "%s %s", objs[i].GetKind(), objs[i].GetName())
	}
}

// ApplyClass makes the namespace ns and applies the ClusterClass of classFile
// (templates/clusterclass-talos-docker.yaml) and its templates into it, as clusterctl
// generate yaml renders them.
func ApplyClass(ctx context.Context, g Gomega, c client.Client, bin, classFile, ns string) {
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	class, err := plane.RunClusterctl(ctx, bin, "", []string{"NAMESPACE=" + ns}, nil, "generate", "yaml", "--from", classFile)
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := utilyaml.ToUnstructured(class)
	g.Expect(err).NotTo(HaveOccurred())
	ApplyObjects(ctx, g, c, objs, "talon-test")
}

// CreateClassCluster applies the ClusterClass talos-docker of classFile
// (templates/clusterclass-talos-docker.yaml) into a new namespace ns and makes a 1 + 1
// cluster of it at OldVersion with simulator containers of image, returning once both
// Machines run with Ready Nodes.
func CreateClassCluster(ctx context.Context, g Gomega, logf Logf, c client.Client, bin, classFile, ns, name, image string) {
	ApplyClass(ctx, g, c, bin, classFile, ns)
	raw, err := json.Marshal(image)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: clusterv1.ClusterSpec{
		ClusterNetwork: clusterv1.ClusterNetwork{
			Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
			Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
		},
		Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: "talos-docker"},
			Version:      OldVersion,
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{
				Class: "worker", Name: "md-0", Replicas: ptr.To[int32](1),
			}}},
			Variables: []clusterv1.ClusterVariable{{Name: "talosImage", Value: apiextensionsv1.JSON{Raw: raw}}},
		},
	}})).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(UsableMachines(ctx, g, c, ns, name)).To(HaveLen(2))
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	logf("ClusterClass cluster ready in %s", time.Since(start).Round(time.Second))
}

// UpgradeClassCluster moves a ClusterClass cluster's topology to NewVersion and returns once
// both its Machines run it.
func UpgradeClassCluster(ctx context.Context, g Gomega, logf Logf, c client.Client, ns, name string) {
	cluster := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Topology.Version = NewVersion
	g.Expect(c.Patch(ctx, cluster, patch)).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		machines := UsableMachines(ctx, g, c, ns, name)
		g.Expect(machines).To(HaveLen(2))
		for _, m := range machines {
			g.Expect(m.Spec.Version).To(Equal(NewVersion), "Machine %s", m.Name)
		}
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	logf("Topology upgraded %s -> %s in %s", OldVersion, NewVersion, time.Since(start).Round(time.Second))
}

// MoveAndDelete moves namespace ns, which holds the Docker cluster name, from one
// management cluster to another with clusterctl move, and checks that the target runs it
// with the same Machines, Secrets and containers; then deletes it there and checks that
// nothing of it is left in Docker.
func MoveAndDelete(ctx context.Context, g Gomega, logf Logf, log io.Writer, bin, fromKubeconfig, toKubeconfig string, from, to client.Client, ns, name string) {
	machinesBefore := Names(UsableMachines(ctx, g, from, ns, name))
	secretsBefore := SecretData(ctx, g, from, ns)
	containersBefore := Containers(ctx, g, name)

	start := time.Now()
	_, err := plane.RunClusterctl(ctx, bin, fromKubeconfig, nil, log, "move", "--namespace", ns, "--to-kubeconfig", toKubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	logf("clusterctl move took %s", time.Since(start).Round(time.Second))
	g.Expect(from.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Cluster{})).To(Satisfy(apierrors.IsNotFound))

	g.Eventually(func(g Gomega) {
		cluster := &clusterv1.Cluster{}
		g.Expect(to.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
		g.Expect(cluster.Spec.Paused).To(Or(BeNil(), HaveValue(BeFalse())))
		g.Expect(conditions.IsTrue(cluster, clusterv1.AvailableCondition)).To(BeTrue(), "Cluster Available")
		g.Expect(Names(UsableMachines(ctx, g, to, ns, name))).To(Equal(machinesBefore))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(SecretData(ctx, g, to, ns)).To(Equal(secretsBefore), "secrets moved unchanged")
	g.Expect(Containers(ctx, g, name)).To(Equal(containersBefore), "no container replaced")
	DeleteCluster(ctx, g, logf, to, ns, name)
}

// DeleteCluster deletes the Docker cluster name of namespace ns and checks that nothing of
// it is left in Docker: no container, volume or network with its label.
func DeleteCluster(ctx context.Context, g Gomega, logf Logf, c client.Client, ns, name string) {
	start := time.Now()
	g.Expect(c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Cluster{})).To(Satisfy(apierrors.IsNotFound))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	left, err := dockertest.Leftovers(ctx, map[string]string{dockerruntime.LabelCluster: name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeEmpty())
	logf("Cluster %s/%s deleted in %s", ns, name, time.Since(start).Round(time.Second))
}

// Containers are the IDs of the running containers of the Docker cluster name, sorted.
func Containers(ctx context.Context, g Gomega, name string) []string {
	out, err := dockertest.Docker(ctx, "ps", "--quiet", "--no-trunc", "--filter", "label="+dockerruntime.LabelCluster+"="+name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).NotTo(BeEmpty(), "containers of cluster %s", name)
	return slices.Sorted(slices.Values(strings.Fields(out)))
}

// Names are the names of machines, sorted.
func Names(machines []clusterv1.Machine) []string {
	out := make([]string, 0, len(machines))
	for _, m := range machines {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// SecretData is every Secret of the namespace (but service-account tokens), name -> data.
func SecretData(ctx context.Context, g Gomega, c client.Client, ns string) map[string]map[string][]byte {
	list := &corev1.SecretList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	out := map[string]map[string][]byte{}
	for _, secret := range list.Items {
		if secret.Type != corev1.SecretTypeServiceAccountToken {
			out[secret.Name] = secret.Data
		}
	}
	return out
}
