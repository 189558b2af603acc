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
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(m))
}

// component is one clusterctl components file and what it must contain.
type component struct {
	file         string
	providerType string
	version      string
}

var components = []component{
	{file: "bootstrap-components.yaml", providerType: "bootstrap", version: bootstrapv1.GroupVersion.Version},
	{file: "control-plane-components.yaml", providerType: "control-plane", version: controlplanev1.GroupVersion.Version},
	{file: "infrastructure-components.yaml", providerType: "infrastructure", version: infrav1.GroupVersion.Version},
}

// readComponents reads a components file from out/ and processes its variables the way
// clusterctl init does when the user sets none: every variable must have a default.
func readComponents(t *testing.T, file string) []unstructured.Unstructured {
	t.Helper()
	path := filepath.Join(envtest.RepoRoot(), "out", file)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("Cannot read %s: %v (run 'make release-manifests' first)", path, err)
	}
	processed, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		return "", errors.New("variable " + name + " is not set")
	})
	if err != nil {
		t.Fatalf("clusterctl cannot process %s without user variables: %v", file, err)
	}
	objs, err := utilyaml.ToUnstructured(processed)
	if err != nil {
		t.Fatalf("Failed to parse %s: %v", file, err)
	}
	return objs
}

func TestComponentsFollowTheClusterctlContract(t *testing.T) {
	for _, c := range components {
		t.Run(c.file, func(t *testing.T) {
			g := NewWithT(t)
			objs := readComponents(t, c.file)
			providerLabel := c.providerType + "-talon"

			var namespaces, crds []string
			var deployment *appsv1.Deployment
			for _, obj := range objs {
				g.Expect(obj.GetLabels()).To(HaveKeyWithValue(clusterv1.ProviderNameLabel, providerLabel),
					"%s %s lacks the provider label", obj.GetKind(), obj.GetName())
				switch obj.GetKind() {
				case "Namespace":
					namespaces = append(namespaces, obj.GetName())
				case "CustomResourceDefinition":
					crds = append(crds, obj.GetName())
					g.Expect(obj.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", c.version),
						"CRD %s lacks the contract label", obj.GetName())
				case "Deployment":
					g.Expect(deployment).To(BeNil(), "more than one Deployment")
					deployment = &appsv1.Deployment{}
					g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, deployment)).To(Succeed())
				}
			}
			g.Expect(namespaces).To(HaveLen(1), "a components file holds exactly one Namespace")
			g.Expect(crds).NotTo(BeEmpty())
			g.Expect(deployment).NotTo(BeNil(), "no Deployment")
			g.Expect(deployment.Namespace).To(Equal(namespaces[0]))
			g.Expect(deployment.Spec.Template.Spec.Containers).To(ContainElement(HaveField("Name", "manager")))
		})
	}
}

func TestMetadataDeclaresTheV1Beta2Contract(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "out", "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred(), "run 'make release-manifests' first")
	var metadata struct {
		APIVersion    string `json:"apiVersion"`
		Kind          string `json:"kind"`
		ReleaseSeries []struct {
			Major    int    `json:"major"`
			Minor    int    `json:"minor"`
			Contract string `json:"contract"`
		} `json:"releaseSeries"`
	}
	g.Expect(yaml.UnmarshalStrict(raw, &metadata)).To(Succeed())
	g.Expect(metadata.APIVersion).To(Equal("clusterctl.cluster.x-k8s.io/v1alpha3"))
	g.Expect(metadata.Kind).To(Equal("Metadata"))
	g.Expect(metadata.ReleaseSeries).NotTo(BeEmpty())
	for _, series := range metadata.ReleaseSeries {
		g.Expect(series.Contract).To(Equal("v1beta2"))
	}
}

// TestComponentsApplyWithServerDryRun is "kubectl apply --dry-run=server" of every components
// file against a real API server. cert-manager is not installed on the test plane, so its
// objects are checked against the Deployment instead: the Certificate must write the Secret
// the manager mounts.
func TestComponentsApplyWithServerDryRun(t *testing.T) {
	env := envtest.Get(t)
	for _, c := range components {
		t.Run(c.file, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			objs := readComponents(t, c.file)

			// A namespaced object can only be dry-run into a namespace that exists.
			for _, obj := range objs {
				if obj.GetKind() == "Namespace" {
					ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName()}}
					if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
						t.Fatalf("Failed to create namespace %s: %v", ns.Name, err)
					}
				}
			}

			var certificateSecrets, mountedSecrets []string
			for i := range objs {
				obj := &objs[i]
				if strings.HasSuffix(obj.GroupVersionKind().Group, "cert-manager.io") {
					if obj.GetKind() == "Certificate" {
						secret, _, _ := unstructured.NestedString(obj.Object, "spec", "secretName")
						certificateSecrets = append(certificateSecrets, secret)
					}
					continue
				}
				if obj.GetKind() == "Deployment" {
					volumes, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "volumes")
					for _, v := range volumes {
						if name, ok, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); ok {
							mountedSecrets = append(mountedSecrets, name)
						}
					}
				}
				err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.DryRunAll, client.ForceOwnership, client.FieldOwner("talon-test"))
				g.Expect(err).NotTo(HaveOccurred(), "server-side dry-run of %s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
			}
			g.Expect(mountedSecrets).NotTo(BeEmpty())
			g.Expect(certificateSecrets).To(ConsistOf(mountedSecrets), "the webhook Certificate must write the Secret the manager mounts")
		})
	}
}
