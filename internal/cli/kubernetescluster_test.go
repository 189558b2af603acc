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

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	sigsyaml "sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TestKubernetesClusterRender: the example KubernetesCluster becomes a Cluster of its
// annotation's class with the minor resolved to the tested patch, one MachineDeployment per
// pool with the pool's labels and taints as the class's overrides; with its ClusterClass
// given, the minor resolves against the class's spec.kubernetesVersions. A bad version is
// refused with its field, as the webhook refuses it.
func TestKubernetesClusterRender(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	out, err := runTalon("kubernetescluster", "render", "-f", "../../examples/kubernetescluster.yaml", "-o", dir)
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(dir, "default", "team-a", "cluster.yaml")
	g.Expect(out).To(ContainSubstring("Wrote " + path))
	cluster := readCluster(g, path)
	g.Expect(cluster.Labels).To(HaveKeyWithValue("vitistack.io/clusterid", "team-a-prod"))
	topology := cluster.Spec.Topology
	g.Expect(topology.ClassRef).To(Equal(clusterv1.ClusterClassRef{Name: "talos-docker", Namespace: "default"}))
	g.Expect(topology.Version).To(Equal("v1.36.3"), "1.36 resolves to the patch Talon is tested with")
	g.Expect(*topology.ControlPlane.Replicas).To(BeEquivalentTo(1))
	g.Expect(topology.Variables).To(HaveLen(1))
	g.Expect(topology.Variables[0].Name).To(Equal("cni"))
	mds := topology.Workers.MachineDeployments
	g.Expect(mds).To(HaveLen(2))
	g.Expect(mds[0].Name).To(Equal("general"))
	g.Expect(*mds[0].Replicas).To(BeEquivalentTo(2))
	g.Expect(mds[1].Name).To(Equal("gpu"))
	g.Expect(mds[1].Variables.Overrides).To(HaveLen(2))
	g.Expect(mds[1].Variables.Overrides[0].Value.Raw).To(MatchJSON(`{"example.com/pool":"gpu"}`))
	g.Expect(mds[1].Variables.Overrides[1].Value.Raw).To(MatchJSON(`[{"key":"nvidia.com/gpu","value":"true","effect":"NoSchedule"}]`))

	t.Log("With its ClusterClass, the minor resolves to the newest patch the class lists")
	example, err := os.ReadFile("../../examples/kubernetescluster.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	class := "---\napiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\nmetadata:\n  name: talos-docker\n  namespace: default\nspec:\n  kubernetesVersions: [v1.35.4, v1.36.1, v1.36.2]\n"
	input := filepath.Join(t.TempDir(), "in.yaml")
	g.Expect(os.WriteFile(input, append(example, class...), 0o600)).To(Succeed())
	_, err = runTalon("kubernetescluster", "render", "-f", input, "-o", dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readCluster(g, path).Spec.Topology.Version).To(Equal("v1.36.2"))

	t.Log("A version outside Talos' window is refused with its field")
	bad := strings.Replace(string(example), `version: "1.36"`, `version: "1.20"`, 1)
	g.Expect(os.WriteFile(input, []byte(bad), 0o600)).To(Succeed())
	_, err = runTalon("kubernetescluster", "render", "-f", input, "-o", dir)
	g.Expect(err).To(MatchError(ContainSubstring(`KubernetesCluster default/team-a: spec.topology.version: Invalid value: "1.20": Kubernetes v1.20 is not supported on Talos`)))
}

func readCluster(g Gomega, path string) *clusterv1.Cluster {
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	cluster := &clusterv1.Cluster{}
	g.Expect(sigsyaml.UnmarshalStrict(data, cluster)).To(Succeed())
	return cluster
}
