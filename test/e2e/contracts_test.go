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
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
	testclusters "github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
)

// TestClusterPerContract creates, from Talon's cluster template ("clusterctl generate
// cluster --infrastructure talon"), one cluster for each of the Talos version contracts
// v1.12, v1.13 and v1.14, each on simulator nodes that run that Talos version and a
// Kubernetes version in its window, and checks that every one becomes Available, that the
// configs its nodes got validate with machinery for its contract (a node of that version
// refuses a document it does not know, so a wrong contract would never get there), and that
// the v1.14 configs hold the v1.14 documents and none of the v1alpha1 fields they replace.
// The managers run as Pods, none refused anything by RBAC.
func TestClusterPerContract(t *testing.T) {
	ctx := t.Context()
	s := newDockerSuite(t)
	g := s.g
	clusters := []struct{ name, contract, talos, kubernetes string }{
		{"contract-112", "v1.12", "v1.12.6", oldVersion},
		{"contract-113", "v1.13", "v1.13.3", newVersion},
		{"contract-114", "v1.14", "v1.14.1", newVersion},
	}
	const ns = "default"
	t.Cleanup(func() {
		for _, c := range clusters {
			dockertest.RemoveLabelled(t, map[string]string{dockerruntime.LabelCluster: c.name})
		}
	})

	p := s.podsPlane("contracts")
	mgmt := s.client(p.Kubeconfig())
	for _, c := range clusters {
		image := s.simImageOf(c.talos)
		t.Logf("Cluster %s: contract %s, Talos image %s, Kubernetes %s", c.name, c.contract, image, c.kubernetes)
		manifest, err := plane.RunClusterctl(ctx, s.bin, p.Kubeconfig(), []string{"TALOS_VERSION=" + c.contract, "TALOS_IMAGE=" + image}, testWriter{t},
			"generate", "cluster", c.name, "--config", s.clusterctl, "--infrastructure", "talon", "--target-namespace", ns,
			"--kubernetes-version", c.kubernetes, "--control-plane-machine-count", "1", "--worker-machine-count", "1")
		g.Expect(err).NotTo(HaveOccurred())
		objs, err := utilyaml.ToUnstructured(manifest)
		g.Expect(err).NotTo(HaveOccurred())
		testclusters.ApplyObjects(ctx, g, mgmt, objs, "e2e")
	}

	for _, c := range clusters {
		t.Logf("Cluster %s becomes Available with both nodes on Talos %s", c.name, c.talos)
		g.Eventually(func(g Gomega) {
			cluster := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.name}, cluster)).To(Succeed())
			g.Expect(conditions.IsTrue(cluster, clusterv1.AvailableCondition)).To(BeTrue(), "Cluster %s Available", c.name)
			machines := testclusters.UsableMachines(ctx, g, mgmt, ns, c.name)
			g.Expect(machines).To(HaveLen(2))
			for _, m := range machines {
				g.Expect(m.Status.NodeInfo).NotTo(BeNil())
				g.Expect(m.Status.NodeInfo.OSImage).To(ContainSubstring(c.talos), "Machine %s's node runs Talos %s", m.Name, c.talos)
			}
		}).WithTimeout(8 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		contract, err := configgen.ParseContract(c.contract)
		g.Expect(err).NotTo(HaveOccurred())
		configs := &bootstrapv1.TalosConfigList{}
		g.Expect(mgmt.List(ctx, configs, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: c.name})).To(Succeed())
		g.Expect(configs.Items).To(HaveLen(2))
		for _, config := range configs.Items {
			g.Expect(config.Spec.TalosVersion).To(Equal(c.contract))
			g.Expect(config.Status.DataSecretName).NotTo(BeNil())
			secret := &corev1.Secret{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: *config.Status.DataSecretName}, secret)).To(Succeed())
			data := secret.Data["value"]
			_, err := configgen.Validate(data, configgen.ModeContainer, contract)
			g.Expect(err).NotTo(HaveOccurred(), "the config of %s validates for contract %s", config.Name, c.contract)
			cfg, err := configloader.NewFromBytes(data)
			g.Expect(err).NotTo(HaveOccurred())
			legacy, err := configgen.LegacyFields(cfg)
			g.Expect(err).NotTo(HaveOccurred())
			kinds := map[string]bool{}
			for _, doc := range cfg.Documents() {
				kinds[doc.Kind()] = true
			}
			if c.contract == "v1.14" {
				g.Expect(legacy).To(BeEmpty(), "%s: the v1.14 documents replace these v1alpha1 fields", config.Name)
				g.Expect(kinds).To(And(HaveKey("KubeletConfig"), HaveKey("KubeNodeConfig"), HaveKey("KubeClusterConfig"), HaveKey("KubeNetworkConfig")))
			} else {
				g.Expect(legacy).To(ContainElement(".machine.kubelet"), "%s: contract %s keeps the v1alpha1 fields", config.Name, c.contract)
				g.Expect(kinds).NotTo(HaveKey("KubeletConfig"))
			}
		}
	}

	testclusters.ExpectNoRefusals(t, p)
	for _, c := range clusters {
		g.Expect(mgmt.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name}})).To(Succeed())
	}
	for _, c := range clusters {
		g.Eventually(func(g Gomega) {
			left, err := dockertest.Leftovers(ctx, map[string]string{dockerruntime.LabelCluster: c.name})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(left).To(BeEmpty())
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	}
}

// simImageOf is the simulator image of a Talos version: the test's simulator image with the
// version baked in, as a Talos image carries its own (the tag names it too, which the Docker
// provider reads). It is built from the local image, nothing pulled.
func (s *suite) simImageOf(talosVersion string) string {
	s.t.Helper()
	base := dockertest.SimImage()
	repo := base
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		repo = base[:i]
	}
	image := repo + ":" + talosVersion
	cmd := exec.CommandContext(s.t.Context(), "docker", "build", "--quiet", "--tag", image, "-")
	cmd.Stdin = strings.NewReader(fmt.Sprintf("FROM %s\nENV TALON_SIM_TALOS_VERSION=%s\n", base, talosVersion))
	out, err := cmd.CombinedOutput()
	s.g.Expect(err).NotTo(HaveOccurred(), "docker build %s: %s", image, out)
	s.t.Cleanup(func() { _, _ = dockertest.Docker(context.Background(), "rmi", image) })
	return image
}
