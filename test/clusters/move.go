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
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega" //nolint:staticcheck // the assertions read as the tests' do

	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/test/envtest"
)

// MoveBetweenPlanes moves the objects of namespace ns from one envtest plane to another with
// the real clusterctl move (bin/clusterctl), as a person moves them between management
// clusters, and logs how long it took. clusterctl moves the kinds whose CRDs carry its
// label, which clusterctl init puts on the providers' CRDs: both planes' CRDs get it first.
func MoveBetweenPlanes(t *testing.T, from, to *envtest.Environment, ns string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	dir := t.TempDir()
	kubeconfig := func(e *envtest.Environment, name string) string {
		data, err := e.AdminKubeconfig(name)
		g.Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(dir, name)
		g.Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
		return path
	}
	source, target := kubeconfig(from, "move-source"), kubeconfig(to, "move-target")
	g.Expect(from.LabelCRDsAsClusterctl(ctx)).To(Succeed())
	g.Expect(to.LabelCRDsAsClusterctl(ctx)).To(Succeed())
	start := time.Now()
	_, err := plane.RunClusterctl(ctx, envtest.BinDir(), source, nil, nil, "move", "--namespace", ns, "--to-kubeconfig", target)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("clusterctl move took %s", time.Since(start).Round(time.Second))
}
