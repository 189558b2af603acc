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
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
)

func runTalon(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := NewRootCommand(&out, &errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

const example = "../../examples/talos-docker-cluster.yaml"

// TestRenderTalosVersionFlag: specs that name no contract are rendered for --talos-version,
// by default the newest, as Talon's webhooks record it when such objects are created.
func TestRenderTalosVersionFlag(t *testing.T) {
	g := NewWithT(t)
	exampleYAML, err := os.ReadFile(example)
	g.Expect(err).NotTo(HaveOccurred())
	unpinned := filepath.Join(t.TempDir(), "cluster.yaml")
	g.Expect(os.WriteFile(unpinned, []byte(strings.ReplaceAll(string(exampleYAML), "talosVersion: v1.14", "")), 0o600)).To(Succeed())

	dir := t.TempDir()
	_, err = runTalon("render", "-f", unpinned, "-o", dir)
	g.Expect(err).NotTo(HaveOccurred(), "the example's v1.14 patches apply under the default contract")
	data, err := os.ReadFile(filepath.Join(dir, "demo", "demo-workers-0.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(ContainSubstring("kind: KubeletConfig"))

	_, err = runTalon("render", "--talos-version", "v1.13", "-f", unpinned, "-o", t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring("configPatches[0] (add /labels/example.com~1tier in the KubeNodeConfig document): the config has no KubeNodeConfig document")))
}

// TestRenderExampleCluster renders the committed example: one valid config per machine the
// cluster would have, all of one identity, which a second render with --secrets keeps.
func TestRenderExampleCluster(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	out, err := runTalon("render", "-f", example, "-o", dir)
	g.Expect(err).NotTo(HaveOccurred())

	want := map[string]string{
		"demo-control-plane-0": "controlplane", "demo-control-plane-1": "controlplane", "demo-control-plane-2": "controlplane",
		"demo-workers-0": "worker", "demo-workers-1": "worker",
	}
	var ca []byte
	for name, machineType := range want {
		path := filepath.Join(dir, "demo", name+".yaml")
		g.Expect(out).To(ContainSubstring(path + ": valid " + machineType + " config for a container node"))
		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := configloader.NewFromBytes(data)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.Machine().Type().String()).To(Equal(machineType))
		g.Expect(cfg.NetworkHostnameConfig().Hostname()).To(Equal(name))
		g.Expect(cfg.K8sClusterConfig().ClusterEndpoint().String()).To(Equal("https://172.20.0.2:6443"))
		if machineType == "worker" {
			g.Expect(cfg.SysctlConfig()).To(HaveKeyWithValue("vm.max_map_count", "262144"))
			g.Expect(cfg.K8sKubeletConfig().ExtraArgs()).To(HaveKeyWithValue("max-pods", []string{"150"}))
		}
		if ca == nil {
			ca = cfg.Machine().Security().IssuingCA().Crt
		}
		g.Expect(cfg.Machine().Security().IssuingCA().Crt).To(Equal(ca))

		validated, err := runTalon("validate", "--mode", "container", path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(validated).To(ContainSubstring("is valid for container mode"))
	}
	entries, err := os.ReadDir(filepath.Join(dir, "demo"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(len(want)+2), "one config per machine, secrets.yaml and talosconfig")

	t.Log("Rendering again with the saved secrets keeps the cluster's identity")
	again := t.TempDir()
	_, err = runTalon("render", "-f", example, "-o", again, "--secrets", filepath.Join(dir, "demo", "secrets.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(again, "demo", "demo-workers-0.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := configloader.NewFromBytes(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Machine().Security().IssuingCA().Crt).To(Equal(ca))
}

func TestRenderAndValidateErrors(t *testing.T) {
	exampleYAML, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	write := func(t *testing.T, content string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "in.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name string
		args func(t *testing.T) []string
		want string
	}{
		{
			name: "a cluster without an endpoint",
			args: func(t *testing.T) []string {
				t.Helper()
				return []string{"render", "-o", t.TempDir(), "-f", write(t, strings.Replace(string(exampleYAML), "host: 172.20.0.2", "host: \"\"", 1))}
			},
			want: "cluster demo: it has no spec.controlPlaneEndpoint (the infrastructure provider sets it): pass --endpoint host:port",
		},
		{
			name: "a misspelt field",
			args: func(t *testing.T) []string {
				t.Helper()
				return []string{"render", "-o", t.TempDir(), "-f", write(t, strings.Replace(string(exampleYAML), "generateType: worker", "generateTyp: worker", 1))}
			},
			want: `unknown field "spec.template.spec.generateTyp"`,
		},
		{
			name: "a patch that does not apply names the machine",
			args: func(t *testing.T) []string {
				t.Helper()
				return []string{"render", "-o", t.TempDir(), "-f", write(t, strings.Replace(string(exampleYAML), "path: /extraArgs", "path: /nosuch/x", 1))}
			},
			want: "machine demo-workers-0: configPatches[0] (add /nosuch/x in the KubeletConfig document) does not apply",
		},
		{
			name: "no Cluster in the input",
			args: func(t *testing.T) []string {
				t.Helper()
				return []string{"render", "-o", t.TempDir(), "-f", write(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")}
			},
			want: "no Cluster found",
		},
		{
			name: "validate with an unknown mode",
			args: func(t *testing.T) []string {
				t.Helper()
				return []string{"validate", "--mode", "cloud", example}
			},
			want: `unknown mode "cloud": use metal or container`,
		},
		{
			name: "validate a file that is not a machine config",
			args: func(t *testing.T) []string {
				t.Helper()
				return []string{"validate", "--mode", "metal", write(t, "hello: world\n")}
			},
			want: "the machine config does not load",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runTalon(tt.args(t)...)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

// TestRenderReadsTheDiskKeyFromTheInput: a config whose disk encryption key is in a Secret
// renders with the Secret given beside the manifests, and names it when it is not.
func TestRenderReadsTheDiskKeyFromTheInput(t *testing.T) {
	g := NewWithT(t)
	exampleYAML, err := os.ReadFile(example)
	g.Expect(err).NotTo(HaveOccurred())
	encrypted := strings.Replace(string(exampleYAML), "      generateType: worker\n",
		"      generateType: worker\n      diskEncryption:\n        staticKeySecretRef:\n          name: disk-key\n", 1)
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	g.Expect(os.WriteFile(path, []byte(encrypted), 0o600)).To(Succeed())
	_, err = runTalon("render", "-f", path, "-o", t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring(
		"machine demo-workers-0: its disk encryption key is in Secret disk-key (spec.diskEncryption.staticKeySecretRef): add the Secret to the input")))

	secret := "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: disk-key\nstringData:\n  passphrase: from-the-input\n"
	g.Expect(os.WriteFile(path, []byte(encrypted+secret), 0o600)).To(Succeed())
	dir := t.TempDir()
	_, err = runTalon("render", "-f", path, "-o", dir)
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(dir, "demo", "demo-workers-0.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := configloader.NewFromBytes(data)
	g.Expect(err).NotTo(HaveOccurred())
	state, ok := cfg.Volumes().ByName("STATE")
	g.Expect(ok).To(BeTrue())
	g.Expect(string(state.Encryption().Keys()[0].Static().Key())).To(Equal("from-the-input"))
}
