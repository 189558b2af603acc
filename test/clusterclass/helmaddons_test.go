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

package clusterclass_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/talon-capi/talon/test/envtest"
)

// TestHelmAddonExamples installs the CRDs of Cluster API's Helm addon provider (CAAPH
// v0.5.3, vendored in testdata) and sends each HelmChartProxy of examples/addons through a
// strict server-side dry run (unknown fields refused): the API server checks it against
// CAAPH's schema as it would check it
// on a management cluster running CAAPH. CAAPH's own webhooks and controllers do not run here:
// whether the charts install is not checked.
func TestHelmAddonExamples(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	ctx := t.Context()
	crdFiles, err := filepath.Glob(filepath.Join("testdata", "caaph-v0.5.3", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crdFiles).To(HaveLen(2))
	for _, file := range crdFiles {
		data, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(yaml.UnmarshalStrict(data, crd)).To(Succeed(), file)
		if err := env.Client.Create(ctx, crd); !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred(), file)
		}
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			g.Expect(established).To(BeTrue(), crd.Name)
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	// The API server's discovery takes new kinds up asynchronously: a fresh client finds them.
	ns := env.NewNamespace(t, "helm-addons")
	examples, err := filepath.Glob(filepath.Join(envtest.RepoRoot(), "examples", "addons", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(examples).To(HaveLen(2), "cilium and metrics-server")
	for _, file := range examples {
		data, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred())
		objs, err := utilyaml.ToUnstructured(data)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(objs).To(HaveLen(1), file)
		proxy := objs[0]
		g.Expect(proxy.GetKind()).To(Equal("HelmChartProxy"), file)
		proxy.SetNamespace(ns)
		g.Eventually(func() error {
			return env.Client.Create(ctx, proxy.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict"))
		}).WithTimeout(30*time.Second).Should(Succeed(), "%s passes a strict server-side dry run", filepath.Base(file))

		// The dry run checks the schema: without a chart, the same object is refused.
		broken := proxy.DeepCopy()
		unstructured.RemoveNestedField(broken.Object, "spec", "chartName")
		err = env.Client.Create(ctx, broken, client.DryRunAll)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec.chartName: Required value"))
	}
}
