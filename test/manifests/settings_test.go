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
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/talon-capi/talon/test/envtest"
)

// TestClusterctlSettingsDescribeTheReleaseArtifacts checks that clusterctl-settings.json,
// which local-repository tooling reads, names each provider with the components file that
// "make release-manifests" writes, the kustomize folder it is built from, and a version in a
// release series metadata.yaml declares.
func TestClusterctlSettingsDescribeTheReleaseArtifacts(t *testing.T) {
	g := NewWithT(t)
	root := envtest.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, "clusterctl-settings.json"))
	g.Expect(err).NotTo(HaveOccurred())
	var settings struct {
		Providers []struct {
			Name   string `json:"name"`
			Config struct {
				ComponentsFile string `json:"componentsFile"`
				NextVersion    string `json:"nextVersion"`
				ConfigFolder   string `json:"configFolder"`
			} `json:"config"`
		} `json:"providers"`
	}
	g.Expect(json.Unmarshal(raw, &settings)).To(Succeed())

	names := map[string]string{}
	for _, c := range components {
		names[c.providerType+"-talon"] = c.file
	}
	g.Expect(settings.Providers).To(HaveLen(len(components)))
	for _, p := range settings.Providers {
		g.Expect(names).To(HaveKeyWithValue(p.Name, p.Config.ComponentsFile), "provider %s", p.Name)
		g.Expect(filepath.Join(root, p.Config.ConfigFolder, "kustomization.yaml")).To(BeARegularFile())
		g.Expect(filepath.Join(root, "out", p.Config.ComponentsFile)).To(BeARegularFile(), "run 'make release-manifests' first")
		g.Expect(p.Config.NextVersion).To(HavePrefix("v0.1."), "metadata.yaml declares the v0.1 release series")
	}
}
