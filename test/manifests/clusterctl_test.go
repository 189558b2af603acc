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

package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestClusterctlGeneratesACluster runs the real clusterctl against out/clusterctl.yaml and
// the local repository release-manifests writes, as a user would after downloading a
// release: "clusterctl generate cluster --infrastructure talon" renders Talon's cluster
// template with the counts asked for, and the API server (with Talon's webhooks) accepts
// every object in a server-side dry run.
func TestClusterctlGeneratesACluster(t *testing.T) {
	g := NewWithT(t)
	field := generateCluster(t, nil, "--control-plane-machine-count", "3", "--worker-machine-count", "4")
	g.Expect(field("TalosControlPlane", "spec", "replicas")).To(BeEquivalentTo(3))
	g.Expect(field("MachineDeployment", "spec", "replicas")).To(BeEquivalentTo(4))
	g.Expect(field("TalosControlPlane", "spec", "version")).To(Equal("v1.36.3"))
	g.Expect(field("TalosDockerCluster", "kind")).To(Equal("TalosDockerCluster"))
}

// TestClusterctlGeneratesAMetalCluster: the metal flavor renders a TalosMetalCluster with the
// endpoint, control-plane and worker TalosMetalMachineTemplates selecting hosts by role with
// the boot assets and the install disk, and the API server accepts every object in a
// server-side dry run.
func TestClusterctlGeneratesAMetalCluster(t *testing.T) {
	g := NewWithT(t)
	sum := strings.Repeat("0123456789abcdef", 8)
	field := generateCluster(t, []string{
		"CONTROL_PLANE_ENDPOINT_HOST=10.10.0.100",
		"TALOS_KERNEL_URL=https://example.org/talos/v1.13.3/vmlinuz-amd64", "TALOS_KERNEL_SHA512=" + sum,
		"TALOS_INITRAMFS_URL=https://example.org/talos/v1.13.3/initramfs-amd64.xz", "TALOS_INITRAMFS_SHA512=" + sum,
	}, "--flavor", "metal", "--control-plane-machine-count", "3", "--worker-machine-count", "2")
	g.Expect(field("TalosMetalCluster", "spec", "controlPlaneEndpoint", "host")).To(Equal("10.10.0.100"))
	g.Expect(field("TalosMetalCluster", "spec", "controlPlaneEndpoint", "port")).To(BeEquivalentTo(6443))
	g.Expect(field("TalosControlPlane", "spec", "replicas")).To(BeEquivalentTo(3))
	g.Expect(field("TalosMetalMachineTemplate", "spec", "template", "spec", "bootAssets", "kernel", "sha512")).To(Equal(sum))
	g.Expect(field("TalosMetalMachineTemplate", "spec", "template", "spec", "installDisk")).To(Equal("/dev/sda"))
	// The boot service writes the disk in the form of the config's contract; a patch of
	// machine.install would be refused under the v1.14 contract.
	g.Expect(field("TalosControlPlane", "spec", "controlPlaneConfig", "strategicPatches")).To(BeNil())
}

// generateCluster runs "clusterctl generate cluster demo" from Talon's repository with env
// and args, expects every object in one namespace, dry-runs them against the API server with
// Talon's webhooks, and returns a lookup of fields by kind (the last object of a kind wins).
func generateCluster(t *testing.T, env []string, args ...string) func(kind string, path ...string) any {
	t.Helper()
	e := envtest.Get(t)
	clusterctl, err := envtest.Binary("clusterctl")
	require.Layer(t, envtest.Layer, err)
	g := NewWithT(t)
	ctx := t.Context()
	e.StartManager(t, envtest.ManagerOptions{})
	ns := e.NewNamespace(t, "clusterctl")

	// Without a management cluster clusterctl cannot look the version up: name the one in
	// the repository.
	versions, err := os.ReadDir(filepath.Join(envtest.RepoRoot(), "out", "repository", "infrastructure-talon"))
	g.Expect(err).NotTo(HaveOccurred(), "run 'make release-manifests' first")
	g.Expect(versions).To(HaveLen(1))
	// No management cluster is needed once provider and version are named.
	out := runClusterctl(t, clusterctl, append([]string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}, env...), append([]string{
		"generate", "cluster", "demo",
		"--config", filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml"),
		"--infrastructure", "talon:" + versions[0].Name(), "--kubernetes-version", "v1.36.3", "--target-namespace", ns,
	}, args...)...)

	objs, err := utilyaml.ToUnstructured(out)
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string]*unstructured.Unstructured{}
	for i := range objs {
		kinds[objs[i].GetKind()] = &objs[i]
		g.Expect(objs[i].GetNamespace()).To(Equal(ns))
	}
	g.Expect(kinds).To(HaveKey("Cluster"))

	g.Expect(e.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed())
	for i := range objs {
		obj := &objs[i]
		err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.DryRunAll, client.ForceOwnership, client.FieldOwner("talon-test"))
		g.Expect(err).NotTo(HaveOccurred(), "server-side dry-run of %s %s", obj.GetKind(), obj.GetName())
	}
	return func(kind string, path ...string) any {
		if kinds[kind] == nil {
			return nil
		}
		v, _, _ := unstructured.NestedFieldNoCopy(kinds[kind].Object, path...)
		return v
	}
}

// TestClusterctlGeneratesTheClusterClass: "clusterctl generate yaml --from" renders each
// shipped ClusterClass with its templates, and the local-path addon, into a namespace, and the
// API server (with Talon's webhooks) accepts every object in a server-side dry run.
func TestClusterctlGeneratesTheClusterClass(t *testing.T) {
	env := envtest.Get(t)
	clusterctl, err := envtest.Binary("clusterctl")
	require.Layer(t, envtest.Layer, err)
	env.StartManager(t, envtest.ManagerOptions{})
	for file, wantKinds := range map[string][]string{
		"clusterclass-talos-docker.yaml": {"ClusterClass", "TalosDockerClusterTemplate", "TalosControlPlaneTemplate",
			"TalosDockerMachineTemplate", "TalosDockerMachineTemplate", "TalosConfigTemplate"},
		"clusterclass-talos-metal.yaml": {"ClusterClass", "TalosMetalClusterTemplate", "TalosControlPlaneTemplate",
			"TalosMetalMachineTemplate", "TalosMetalMachineTemplate", "TalosConfigTemplate"},
		// The addon's shell scripts say $VOL_DIR, which clusterctl leaves alone.
		"addon-local-path-provisioner.yaml": {"ConfigMap", "ClusterResourceSet"},
	} {
		t.Run(file, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			ns := env.NewNamespace(t, "clusterclass")
			out := runClusterctl(t, clusterctl, []string{"NAMESPACE=" + ns}, "generate", "yaml", "--from", filepath.Join(envtest.RepoRoot(), "out", file))
			objs, err := utilyaml.ToUnstructured(out)
			g.Expect(err).NotTo(HaveOccurred())
			kinds := make([]string, 0, len(objs))
			for i := range objs {
				obj := &objs[i]
				kinds = append(kinds, obj.GetKind())
				g.Expect(obj.GetNamespace()).To(Equal(ns))
				if obj.GetKind() == "ConfigMap" {
					manifests, _, _ := unstructured.NestedString(obj.Object, "data", "local-path-provisioner.yaml")
					g.Expect(manifests).To(ContainSubstring(`mkdir -m 0777 -p "$VOL_DIR"`), "the addon's scripts are unchanged")
				}
				err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.DryRunAll, client.ForceOwnership, client.FieldOwner("talon-test"))
				g.Expect(err).NotTo(HaveOccurred(), "server-side dry-run of %s %s", obj.GetKind(), obj.GetName())
			}
			g.Expect(kinds).To(ConsistOf(wantKinds))
		})
	}
}

// runClusterctl runs clusterctl with args and the extra environment env, with its own
// $HOME (where clusterctl keeps files), and returns its standard output.
func runClusterctl(t *testing.T, clusterctl string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), clusterctl, args...)
	cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir()), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("clusterctl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}
