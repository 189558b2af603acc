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
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
)

// kubernetesCluster installs the optional KubernetesCluster API as docs/kubernetescluster.md
// tells a clusterctl user to (its CRD, then a restart of the control-plane manager) and
// builds a KubernetesCluster of one control-plane node and one worker pool from the shipped
// ClusterClass, with the control-plane manager running as a Pod under its own
// ServiceAccount: it becomes Running, and deleting it deletes its Cluster and every
// container. The suite's RBAC check then reads the restarted manager's log.
func (s *suite) kubernetesCluster(mgmt client.Client) {
	ctx, g, t := s.t.Context(), s.g, s.t
	const ns, name = "vitistack", "e2e-kc"

	t.Log("kubectl apply -f out/kubernetescluster.yaml, then a rollout restart of the control-plane manager")
	crd, err := os.ReadFile(filepath.Join(filepath.Dir(s.clusterctl), "kubernetescluster.yaml"))
	g.Expect(err).NotTo(HaveOccurred(), "run 'make release-manifests' first")
	objs, err := utilyaml.ToUnstructured(crd)
	g.Expect(err).NotTo(HaveOccurred())
	clusters.ApplyObjects(ctx, g, mgmt, objs, "talon-test")
	s.restartControlPlaneManager(mgmt)

	c := s.kubernetesClusterClient(filepath.Join(s.out, quickstart.PlaneDirName, "kubeconfig"))
	clusters.ApplyClass(ctx, g, c, s.bin, filepath.Join(filepath.Dir(s.clusterctl), "clusterclass-talos-docker.yaml"), ns)
	variables, err := json.Marshal(map[string]any{"talosImage": dockertest.SimImage()})
	g.Expect(err).NotTo(HaveOccurred())
	kc := &vitiv1.KubernetesCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{vitiv1.VariablesAnnotation: string(variables)}},
		Spec: vitiv1.KubernetesClusterSpec{
			Data: vitiv1.ClusterData{ClusterID: "e2e-kc", Provider: "talos", Environment: "test"},
			Topology: vitiv1.Topology{Version: "1.36", ControlPlane: vitiv1.ControlPlane{Replicas: 1},
				Workers: vitiv1.Workers{NodePools: []vitiv1.NodePool{{Name: "workers", Replicas: 1}}}},
		},
	}
	t.Log("A KubernetesCluster of one control-plane node and a pool of one worker, Kubernetes 1.36, of the class talos-docker")
	start := time.Now()
	g.Expect(c.Create(ctx, kc)).To(Succeed())
	clusters.WaitKubernetesClusterRunning(t, c, kc, "v1.36.3", map[string]int32{"": 1, "workers": 1})
	t.Logf("Running %s after the KubernetesCluster was applied", time.Since(start).Round(time.Second))
	g.Expect(clusters.UsableMachines(ctx, g, c, ns, name)).To(HaveLen(2))
	clusters.Containers(ctx, g, name) // some, so that none after the deletion means something

	t.Log("Deleting the KubernetesCluster deletes its Cluster and every container")
	start = time.Now()
	g.Expect(c.Delete(ctx, kc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := c.Get(ctx, client.ObjectKeyFromObject(kc), &vitiv1.KubernetesCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "KubernetesCluster: %v", err)
		err = c.Get(ctx, client.ObjectKeyFromObject(kc), &clusterv1.Cluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Cluster: %v", err)
		left, err := dockertest.Leftovers(ctx, map[string]string{dockerruntime.LabelCluster: name})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(left).To(BeEmpty())
	}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("Deleted in %s", time.Since(start).Round(time.Second))
}

// restartControlPlaneManager does what kubectl rollout restart does to the control-plane
// manager's Deployment and waits until its one Pod is a new, ready one and the old one is
// gone.
func (s *suite) restartControlPlaneManager(mgmt client.Client) {
	ctx, g := s.t.Context(), s.g
	deployment := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: clusters.ControlPlaneNamespace, Name: "talon-control-plane-controller-manager"}
	g.Expect(mgmt.Get(ctx, key, deployment)).To(Succeed())
	selector, err := metav1.LabelSelectorAsSelector(deployment.Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	pods := func(g Gomega) []corev1.Pod {
		list := &corev1.PodList{}
		g.Expect(mgmt.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabelsSelector{Selector: selector})).To(Succeed())
		return list.Items
	}
	before := pods(g)
	g.Expect(before).To(HaveLen(1))
	patch := client.MergeFrom(deployment.DeepCopy())
	if deployment.Spec.Template.Annotations == nil {
		deployment.Spec.Template.Annotations = map[string]string{}
	}
	deployment.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339)
	g.Expect(mgmt.Patch(ctx, deployment, patch)).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		now := pods(g)
		g.Expect(now).To(HaveLen(1))
		g.Expect(now[0].UID).NotTo(Equal(before[0].UID))
		g.Expect(now[0].Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	s.t.Logf("The control-plane manager's new Pod was ready, the old one gone, after %s", time.Since(start).Round(time.Second))
}

// kubernetesClusterClient is a client of the cluster of kubeconfig that knows the
// KubernetesCluster kind besides Talon's and Cluster API's.
func (s *suite) kubernetesClusterClient(kubeconfig string) client.Client {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	s.g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: envtest.NewScheme()})
	s.g.Expect(err).NotTo(HaveOccurred())
	return c
}
