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

package deployed

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/test/clusters"
	"github.com/talon-capi/talon/test/envtest"
)

// chartValues maps each clusterctl variable of Talon's components to the chart value that
// stands for it (charts/talon/values.yaml).
var chartValues = map[string]string{
	"TALON_FEATURE_GATES":             "featureGates",
	"TALON_LOG_LEVEL":                 "logLevel",
	"TALON_DIAGNOSTICS_ADDRESS":       "diagnostics.address",
	"TALON_INSECURE_DIAGNOSTICS":      "diagnostics.insecure",
	"TALON_DOCKER_RUNTIME":            "infrastructure.docker.runtime",
	"TALON_DOCKER_UNPRIVILEGED_NODES": "infrastructure.docker.unprivilegedNodes",
	"TALON_IMAGE_FACTORY_URL":         "bootstrap.imageFactoryURL",
	"TALON_KUBERNETES_CLUSTER_CLASS":  "controlPlane.kubernetesClusterClass",
	"TALON_BOOT_SERVER_IP":            "infrastructure.bootService.serverIP",
	"TALON_BOOT_INTERFACE":            "infrastructure.bootService.interface",
	"TALON_BOOT_HTTP_ADDRESS":         "infrastructure.bootService.httpAddress",
	"TALON_DHCP_MODE":                 "infrastructure.bootService.dhcp.mode",
	"TALON_DHCP_POOL_START":           "infrastructure.bootService.dhcp.poolStart",
	"TALON_DHCP_POOL_END":             "infrastructure.bootService.dhcp.poolEnd",
	"TALON_DHCP_NETMASK":              "infrastructure.bootService.dhcp.netmask",
	"TALON_DHCP_ROUTER":               "infrastructure.bootService.dhcp.router",
	"TALON_TFTP_DIR":                  "infrastructure.bootService.tftpDir",
	"TALON_BOOT_ASSET_DIR":            "infrastructure.bootService.assetDir",
}

// TestChartMatchesKustomize renders the Helm chart with the real helm and Talon's
// components with kustomize and clusterctl's variable processor, and requires the two to
// describe the same objects, field for field: with the defaults, in metal-only mode, with
// the in-place update hooks, and with every clusterctl variable set to something else.
func TestChartMatchesKustomize(t *testing.T) {
	helm, kustomize := filepath.Join(envtest.BinDir(), "helm"), filepath.Join(envtest.BinDir(), "kustomize")
	for _, bin := range []string{helm, kustomize} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("run 'make tools' first: %v", err)
		}
	}
	root := envtest.RepoRoot()
	build := func(t *testing.T, dir string) []byte {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), kustomize, "build", filepath.Join(root, "config", dir)).Output()
		if err != nil {
			t.Fatalf("kustomize build config/%s: %v", dir, stderrOf(err))
		}
		return out
	}
	components := map[string][]byte{}
	for _, dir := range []string{"bootstrap/default", "controlplane/default", "infrastructure/default", "infrastructure/metal-only", "infrastructure/metal-boot-service", "controlplane/extension"} {
		components[dir] = build(t, dir)
	}

	t.Run("every clusterctl variable has a value", func(t *testing.T) {
		for dir, raw := range components {
			names, err := yamlprocessor.NewSimpleProcessor().GetVariables(raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				if _, ok := chartValues[name]; !ok {
					t.Errorf("config/%s uses the clusterctl variable %s, which no chart value stands for: add one to charts/talon and to chartValues", dir, name)
				}
			}
		}
	})

	variables := map[string]string{
		"TALON_FEATURE_GATES": "AllAlpha=true", "TALON_LOG_LEVEL": "5", "TALON_DIAGNOSTICS_ADDRESS": ":9555",
		"TALON_INSECURE_DIAGNOSTICS": "true", "TALON_DOCKER_RUNTIME": "podman", "TALON_DOCKER_UNPRIVILEGED_NODES": "true",
		"TALON_IMAGE_FACTORY_URL": "http://factory.example:8080", "TALON_KUBERNETES_CLUSTER_CLASS": "capi-classes/talos-docker",
	}
	// The boot service's variables: only its component uses them, and the server address
	// and interface have no default.
	bootMinimal := map[string]string{"TALON_BOOT_SERVER_IP": "10.10.0.2", "TALON_BOOT_INTERFACE": "eno2"}
	boot := map[string]string{
		"TALON_BOOT_SERVER_IP": "10.10.0.2", "TALON_BOOT_INTERFACE": "eno2", "TALON_BOOT_HTTP_ADDRESS": "10.10.0.2:8080",
		"TALON_DHCP_MODE": "full", "TALON_DHCP_POOL_START": "10.10.0.100", "TALON_DHCP_POOL_END": "10.10.0.199",
		"TALON_DHCP_NETMASK": "255.255.0.0", "TALON_DHCP_ROUTER": "10.10.0.1",
		"TALON_TFTP_DIR": "/opt/ipxe", "TALON_BOOT_ASSET_DIR": "/data/talon",
	}
	bootValues := func(variables map[string]string) map[string]any {
		values := valuesOf(variables)
		values["infrastructure.docker.enabled"] = false
		values["infrastructure.bootService.enabled"] = true
		return values
	}
	cases := []struct {
		name      string
		values    map[string]any
		variables map[string]string
		dirs      []string
	}{
		{"defaults", nil, nil, []string{"bootstrap/default", "controlplane/default", "infrastructure/default"}},
		{"metal-only", map[string]any{"infrastructure.docker.enabled": false}, nil,
			[]string{"bootstrap/default", "controlplane/default", "infrastructure/metal-only"}},
		{"in-place updates", map[string]any{"controlPlane.inPlaceUpdates": true}, nil,
			[]string{"bootstrap/default", "controlplane/default", "infrastructure/default", "controlplane/extension"}},
		{"every variable set", valuesOf(variables), variables, []string{"bootstrap/default", "controlplane/default", "infrastructure/default"}},
		{"metal with the boot service", bootValues(bootMinimal), bootMinimal,
			[]string{"bootstrap/default", "controlplane/default", "infrastructure/metal-boot-service"}},
		{"metal with the boot service and every variable set", bootValues(boot), boot,
			[]string{"bootstrap/default", "controlplane/default", "infrastructure/metal-boot-service"}},
		{"control plane only", map[string]any{"bootstrap.enabled": false, "infrastructure.enabled": false}, nil, []string{"controlplane/default"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want []byte
			for _, dir := range tc.dirs {
				processed, err := yamlprocessor.NewSimpleProcessor().Process(components[dir], func(name string) (string, error) {
					if v, ok := tc.variables[name]; ok {
						return v, nil
					}
					return "", errors.New("not set")
				})
				if err != nil {
					t.Fatalf("config/%s: %v", dir, err)
				}
				want = append(append(want, processed...), "\n---\n"...)
			}
			valuesFile := filepath.Join(t.TempDir(), "values.yaml")
			raw, err := yaml.Marshal(nested(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(valuesFile, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := exec.CommandContext(t.Context(), helm, "template", "talon", filepath.Join(root, "charts", "talon"), "--values", valuesFile).Output()
			if err != nil {
				t.Fatalf("helm template: %v", stderrOf(err))
			}
			if diff := diffObjects(t, want, got); diff != "" {
				t.Errorf("helm template (values %v) and kustomize differ; run 'make generate', or change charts/talon/templates/_manager.tpl as config/ changed:\n%s", tc.values, diff)
			}
		})
	}
}

// TestChartValues renders the chart with the values clusterctl has no variable for and
// checks that each lands where it should in the managers' Deployments.
func TestChartValues(t *testing.T) {
	helm := filepath.Join(envtest.BinDir(), "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("run 'make tools' first: %v", err)
	}
	g := NewWithT(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	g.Expect(os.WriteFile(values, []byte(`
image: {registry: registry.example.org/talon, tag: v9.9.9, pullPolicy: Always}
imagePullSecrets: [{name: pull}]
nodeSelector: {pool: management}
tolerations: []
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: Exists}]}]}}}
bootstrap: {replicas: 2, resources: null, extraArgs: ["--image-factory-url=https://factory.example.org"]}
controlPlane: {image: {repository: mirror.example.org/cp, tag: "1.10"}}
infrastructure: {docker: {socket: /run/user/1000/docker.sock}}
`), 0o600)).To(Succeed())
	out, err := exec.CommandContext(t.Context(), helm, "template", "talon", filepath.Join(envtest.RepoRoot(), "charts", "talon"), "--values", values).Output()
	g.Expect(err).NotTo(HaveOccurred(), "helm template: %v", stderrOf(err))
	objs, err := utilyaml.ToUnstructured(out)
	g.Expect(err).NotTo(HaveOccurred())
	deployments := map[string]appsv1.Deployment{}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d)).To(Succeed())
		deployments[strings.TrimSuffix(strings.TrimPrefix(d.Name, "talon-"), "-controller-manager")] = d
	}
	g.Expect(deployments).To(HaveLen(3))
	for name, d := range deployments {
		spec := d.Spec.Template.Spec
		g.Expect(spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "pull"}}), name)
		g.Expect(spec.NodeSelector).To(Equal(map[string]string{"pool": "management"}), name)
		g.Expect(spec.Tolerations).To(BeEmpty(), name)
		g.Expect(spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(HaveLen(1), name)
		g.Expect(spec.Containers[0].ImagePullPolicy).To(Equal(corev1.PullAlways), name)
	}
	bootstrap, controlPlane, infrastructure := deployments["bootstrap"], deployments["control-plane"], deployments["infrastructure"]
	g.Expect(bootstrap.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
	g.Expect(bootstrap.Spec.Template.Spec.Containers[0].Resources.Requests).To(BeEmpty(), "resources: null drops the default requests")
	g.Expect(bootstrap.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--image-factory-url=https://factory.example.org"))
	g.Expect(bootstrap.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example.org/talon/talon-bootstrap-manager:v9.9.9"))
	g.Expect(controlPlane.Spec.Template.Spec.Containers[0].Image).To(Equal("mirror.example.org/cp:1.10"), "a quoted numeric tag stays as written")
	g.Expect(controlPlane.Spec.Template.Spec.Containers[0].Resources.Requests).NotTo(BeEmpty())
	g.Expect(infrastructure.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("HostPath.Path", "/run/user/1000/docker.sock")))
}

// valuesOf are the chart values that stand for clusterctl variables.
func valuesOf(variables map[string]string) map[string]any {
	values := map[string]any{}
	for name, v := range variables {
		switch v {
		case "true", "false":
			values[chartValues[name]] = v == "true"
		default:
			values[chartValues[name]] = v
		}
	}
	return values
}

// nested turns dotted keys ("a.b": v) into the maps a values file holds.
func nested(flat map[string]any) map[string]any {
	out := map[string]any{}
	for key, v := range flat {
		m := out
		parts := strings.Split(key, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = v
	}
	return out
}

// diffObjects says how the objects of two manifests differ, by kind, namespace and name;
// empty when they are the same.
func diffObjects(t *testing.T, want, got []byte) string {
	t.Helper()
	index := func(raw []byte) map[string]unstructured.Unstructured {
		objs, err := utilyaml.ToUnstructured(raw)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]unstructured.Unstructured{}
		for _, o := range objs {
			key := fmt.Sprintf("%s %s/%s", o.GroupVersionKind(), o.GetNamespace(), o.GetName())
			if _, ok := out[key]; ok {
				t.Fatalf("%s twice", key)
			}
			out[key] = o
		}
		return out
	}
	w, g := index(want), index(got)
	var diffs []string
	// The chart's additions to the CRDs: helm uninstall keeps them, and every cluster's
	// objects; clusterctl's label, which clusterctl init adds, lets clusterctl move find
	// their kinds.
	for key, o := range g {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		annotations, labels := o.GetAnnotations(), o.GetLabels()
		if annotations["helm.sh/resource-policy"] != "keep" {
			diffs = append(diffs, "helm uninstall would delete "+key)
		}
		if v, ok := labels[clusterctlv1.ClusterctlLabel]; !ok || v != "" {
			diffs = append(diffs, "clusterctl move would not move the objects of "+key)
		}
		delete(annotations, "helm.sh/resource-policy")
		delete(labels, clusterctlv1.ClusterctlLabel)
		o.SetAnnotations(annotations)
		o.SetLabels(labels)
	}
	for _, key := range slices.Sorted(maps.Keys(w)) {
		o, ok := g[key]
		switch {
		case !ok:
			diffs = append(diffs, "missing from the chart: "+key)
		case !reflect.DeepEqual(w[key].Object, o.Object):
			diffs = append(diffs, fmt.Sprintf("%s (-kustomize +helm):\n%s", key, cmp.Diff(w[key].Object, o.Object)))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(g)) {
		if _, ok := w[key]; !ok {
			diffs = append(diffs, "only in the chart: "+key)
		}
	}
	return strings.Join(diffs, "\n")
}

// stderrOf is a failed command's error with what it wrote to stderr.
func stderrOf(err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("%w: %s", err, exit.Stderr)
	}
	return err
}

// TestHelmInstall installs Talon with the real helm from charts/talon, after cert-manager
// (its release manifest) and Cluster API's core (its components, through clusterctl
// generate yaml), as a team that manages its cluster's software with Helm does; then a
// 1 + 1 cluster is made and deleted, and no manager may have been refused anything.
func TestHelmInstall(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	m := startManagementCluster(t, "helm")

	t.Log("cert-manager, then Cluster API's core provider")
	start := time.Now()
	certManager, err := os.ReadFile(m.certManager)
	g.Expect(err).NotTo(HaveOccurred())
	m.apply(t, certManager)
	core := filepath.Join(envtest.RepoRoot(), "out", "repository", "cluster-api", clusters.CAPIVersion, "core-components.yaml")
	manifest, err := plane.RunClusterctl(ctx, envtest.BinDir(), "", nil, nil, "generate", "yaml", "--from", core, "--config", m.config)
	g.Expect(err).NotTo(HaveOccurred())
	// clusterctl move finds the kinds to move by clusterctl's label on their CRDs, which
	// clusterctl and the Cluster API operator put on every object they install.
	objs, err := utilyaml.ToUnstructured(manifest)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range objs {
		objs[i].SetLabels(mergeLabels(objs[i].GetLabels(), map[string]string{clusterctlv1.ClusterctlLabel: ""}))
	}
	manifest, err = utilyaml.FromUnstructured(objs)
	g.Expect(err).NotTo(HaveOccurred())
	m.apply(t, manifest)
	t.Logf("Applied in %s", time.Since(start).Round(time.Second))

	t.Log("helm install talon charts/talon")
	start = time.Now()
	helm := exec.CommandContext(ctx, filepath.Join(envtest.BinDir(), "helm"), "install", "talon", filepath.Join(envtest.RepoRoot(), "charts", "talon"),
		"--kubeconfig", m.p.Kubeconfig(), "--namespace", "talon-system", "--create-namespace",
		"--set", "infrastructure.docker.unprivilegedNodes=true", "--wait", "--timeout", "5m")
	helm.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := helm.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	t.Logf("helm install took %s:\n%s", time.Since(start).Round(time.Second), out)
	// Cluster API's core and cert-manager were not waited for by helm.
	g.Eventually(func(g Gomega) {
		for _, ns := range clusters.ProviderNamespaces {
			var deployments appsv1.DeploymentList
			g.Expect(m.c.List(ctx, &deployments, client.InNamespace(ns))).To(Succeed())
			for _, d := range deployments.Items {
				g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1), "Deployment %s/%s", ns, d.Name)
			}
		}
	}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	clusters.ExpectManagersRunning(t, m.c)

	// No clusterctl inventory names Talon's version here: the template comes from its file.
	m.createCluster(t, "--from", filepath.Join(envtest.RepoRoot(), "out", "cluster-template.yaml"))
	t.Log("clusterctl move to a second management cluster finds Talon's kinds by the chart's CRDs, and the cluster is deleted there")
	m.moveAndDelete(t, "default", m.cluster)
	clusters.ExpectNoRefusals(t, m.p)
}

// mergeLabels are labels with more added.
func mergeLabels(labels, more map[string]string) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, more)
	return labels
}
