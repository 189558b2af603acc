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

package plane

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestPlaneLifecycle starts a plane from bin/, finds it again from its directory, refuses
// to start a second one there, serves cert-manager's API as clusterctl checks it, stops
// every process and starts afresh in the same directory.
func TestPlaneLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	for _, name := range []string{EtcdBinary, APIServerBinary, ControllerManagerBinary} {
		_, err := envtest.Binary(name)
		require.Layer(t, envtest.Layer, err)
	}
	dir := filepath.Join(t.TempDir(), "plane")
	p, err := Start(ctx, Options{Dir: dir, BinDir: envtest.BinDir()})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	g.Expect(p.Running()).To(BeTrue())
	g.Expect(p.Processes()).To(HaveLen(3))

	t.Log("The plane is found again from its directory, and a second one is refused there")
	again, err := Open(dir, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Running()).To(BeTrue())
	g.Expect(again.Processes()).To(Equal(p.Processes()))
	_, err = Start(ctx, Options{Dir: dir, BinDir: envtest.BinDir()})
	g.Expect(err).To(MatchError(ContainSubstring("a management plane already runs from " + dir)))
	_, err = Open(t.TempDir(), nil)
	g.Expect(err).To(MatchError(ErrNotFound))

	t.Log("cert-manager's API takes the objects clusterctl creates to check it")
	g.Expect(p.InstallCertManagerAPI(ctx)).To(Succeed())
	c, err := p.Client(client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	ns := &corev1.Namespace{}
	ns.Name = "cert-manager-test"
	g.Expect(c.Create(ctx, ns)).To(Succeed())
	for _, kind := range []string{"Issuer", "Certificate"} {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("cert-manager.io/v1")
		obj.SetKind(kind)
		obj.SetNamespace(ns.Name)
		obj.SetName("test")
		g.Expect(unstructured.SetNestedField(obj.Object, map[string]any{"selfSigned": map[string]any{}}, "spec")).To(Succeed())
		g.Expect(c.Create(ctx, obj)).To(Succeed(), kind)
	}

	t.Log("Stop ends every process; a new plane replaces the stopped one")
	g.Expect(p.Stop(ctx)).To(Succeed())
	for _, proc := range p.Processes() {
		g.Expect(proc.Alive()).To(BeFalse(), "%s still runs", proc.Name)
	}
	g.Expect(p.Running()).To(BeFalse())
	p, err = Start(ctx, Options{Dir: dir, BinDir: envtest.BinDir()})
	g.Expect(err).NotTo(HaveOccurred())
	fresh, err := p.Client(client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsNotFound(fresh.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}))).To(BeTrue(), "the new plane starts empty")
	g.Expect(p.Remove(ctx)).To(Succeed())
	g.Expect(dir).NotTo(BeADirectory())
}

// TestStartNamesMissingBinaries: a bin directory without the plane's programs gets an
// error that says how to build them.
func TestStartNamesMissingBinaries(t *testing.T) {
	_, err := Start(t.Context(), Options{Dir: t.TempDir(), BinDir: t.TempDir()})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("etcd not found in")))
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("run 'make tools' first")))
}
