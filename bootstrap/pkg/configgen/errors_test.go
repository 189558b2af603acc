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

package configgen

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// TestRenderRefusesBadInput shows the error a person sees for each kind of bad input. The
// reconciler writes no Secret when Render fails.
func TestRenderRefusesBadInput(t *testing.T) {
	worker := func(mutate func(*bootstrapv1.TalosConfigSpec)) bootstrapv1.TalosConfigSpec {
		spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.14"}
		mutate(&spec)
		return spec
	}
	tests := []struct {
		name    string
		cluster func(*Cluster)
		spec    bootstrapv1.TalosConfigSpec
		want    string
	}{
		{
			name: "a JSON patch replacing a path that does not exist",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.ConfigPatches = []bootstrapv1.ConfigPatch{{Op: "replace", Path: "/machine/nosuchfield/x", Value: jsonValue(`"y"`)}}
			}),
			want: "configPatches[0] (replace /machine/nosuchfield/x in the v1alpha1 document) does not apply",
		},
		{
			name: "a JSON patch removing a path that does not exist",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.ConfigPatches = []bootstrapv1.ConfigPatch{{Op: "remove", Path: "/cluster/nosuchfield"}}
			}),
			want: "configPatches[0] (remove /cluster/nosuchfield in the v1alpha1 document) does not apply",
		},
		{
			name: "a JSON patch adding a field Talos does not know",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.ConfigPatches = []bootstrapv1.ConfigPatch{{Op: "add", Path: "/machine/bogus", Value: jsonValue(`true`)}}
			}),
			want: "configPatches[0] (add /machine/bogus in the v1alpha1 document) makes the document invalid",
		},
		{
			name: "a JSON patch with an unknown operation",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.ConfigPatches = []bootstrapv1.ConfigPatch{{Op: "frobnicate", Path: "/machine"}}
			}),
			want: "configPatches[0] (frobnicate /machine in the v1alpha1 document) does not apply",
		},
		{
			name: "a JSON patch on a path a 1.14 document does not have",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.ConfigPatches = []bootstrapv1.ConfigPatch{
					{Op: "add", Path: "/extraArgs", Value: jsonValue(`{"max-pods":"150"}`), Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeletConfig"}},
					{Op: "replace", Path: "/nosuch/field", Value: jsonValue(`1`), Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeletConfig"}},
				}
			}),
			want: "configPatches[1] (replace /nosuch/field in the KubeletConfig document) does not apply",
		},
		{
			name: "a JSON patch on a document the contract does not have",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.TalosVersion = "v1.13"
				s.ConfigPatches = []bootstrapv1.ConfigPatch{{Op: "add", Path: "/extraArgs", Value: jsonValue(`{}`), Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeletConfig"}}}
			}),
			want: "configPatches[0] (add /extraArgs in the KubeletConfig document): the config has no KubeletConfig document",
		},
		{
			name: "a JSON patch on one of several documents of a kind, without its name",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: "v1.14", ConfigPatches: []bootstrapv1.ConfigPatch{
				{Op: "replace", Path: "/type", Value: jsonValue(`"Webhook"`), Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeAuthorizerConfig"}},
			}},
			want: `the config has 2 KubeAuthorizerConfig documents ("node", "rbac"): set document.name to pick one`,
		},
		{
			name: "a JSON patch on a named document that is not there",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: "v1.14", ConfigPatches: []bootstrapv1.ConfigPatch{
				{Op: "remove", Path: "/type", Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeAuthorizerConfig", Name: "abac"}},
			}},
			want: `the config has no KubeAuthorizerConfig document named "abac", only "node", "rbac"`,
		},
		{
			name: "a JSON patch renaming its document",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: "v1.14", ConfigPatches: []bootstrapv1.ConfigPatch{
				{Op: "replace", Path: "/name", Value: jsonValue(`"webhook"`), Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeAuthorizerConfig", Name: "node"}},
			}},
			want: "changes which document it is",
		},
		{
			name: "a 1.14 document on the 1.13 contract",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.TalosVersion = "v1.13"
				s.StrategicPatches = []string{"apiVersion: v1alpha1\nkind: SysctlConfig\nparams:\n  vm.max_map_count: \"262144\"\n"}
			}),
			want: "the machine config is for Talos v1.13, which does not know the SysctlConfig document (Talos v1.14 added it)",
		},
		{
			name: "the legacy form of a setting next to its 1.14 document",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.StrategicPatches = []string{"machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"150\"\n"}
			}),
			want: "kubelet config is already set in v1alpha1 config (.machine.kubelet)",
		},
		{
			name: "a strategic patch that is not YAML",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) { s.StrategicPatches = []string{"machine: [unclosed"} }),
			want: "strategicPatches[0] is not a Talos config patch",
		},
		{
			name: "a strategic patch with a field Talos does not know",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) { s.StrategicPatches = []string{"machine:\n  bogus: true\n"} }),
			want: "strategicPatches[0] is not a Talos config patch",
		},
		{
			name: "a strategic patch of a document kind Talos does not know",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.StrategicPatches = []string{"apiVersion: v1alpha1\nkind: NoSuchConfig\nname: x\n"}
			}),
			want: "strategicPatches[0] is not a Talos config patch",
		},
		{
			name: "a patch that leaves an invalid config",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.StrategicPatches = []string{"machine:\n  install:\n    disk: \"\"\n    diskSelector: null\n  type: nonsense\n"}
			}),
			want: `the machine config is not valid for a container node: unknown machine type "nonsense"`,
		},
		{
			name: "an unknown contract",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) { s.TalosVersion = "v1.99" }),
			want: `talosVersion "v1.99" is not supported: Talon renders configs for Talos v1.10 to v1.14`,
		},
		{
			name: "a contract that is too old",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) { s.TalosVersion = "v1.2" }),
			want: `talosVersion "v1.2" is not supported`,
		},
		{
			name: "generateType none without data",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeNone},
			want: "generateType none needs the complete machine config in spec.data",
		},
		{
			name: "generateType none with data that is not a config",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeNone, Data: "hello: world\n"},
			want: "the machine config does not load",
		},
		{
			name:    "an invalid pod CIDR in the Cluster",
			cluster: func(c *Cluster) { c.PodCIDRs = []string{"10.244.0.0/33"} },
			spec:    worker(func(*bootstrapv1.TalosConfigSpec) {}),
			want:    `the Cluster's network "10.244.0.0/33" is not a CIDR`,
		},
		{
			name:    "an invalid service CIDR in the Cluster",
			cluster: func(c *Cluster) { c.ServiceCIDRs = []string{"services"} },
			spec:    worker(func(*bootstrapv1.TalosConfigSpec) {}),
			want:    `the Cluster's network "services" is not a CIDR`,
		},
		{
			name:    "no control-plane endpoint",
			cluster: func(c *Cluster) { c.Endpoint = Endpoint{} },
			spec:    worker(func(*bootstrapv1.TalosConfigSpec) {}),
			want:    "the cluster has no control-plane endpoint",
		},
		{
			name: "an unknown generateType",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: "init"},
			want: `unknown generateType "init": use controlplane, worker or none`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cluster := testCluster
			if tt.cluster != nil {
				tt.cluster(&cluster)
			}
			out, err := Render(testBundle(), cluster, Machine{Spec: tt.spec, Mode: ModeContainer})
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			g.Expect(err.Error()).NotTo(ContainSubstring("\n"), "condition messages stay on one line")
			g.Expect(out).To(BeNil())
		})
	}
}

func TestRenderRefusesBadHostname(t *testing.T) {
	g := NewWithT(t)
	spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker}
	_, err := Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeContainer, Hostname: strings.Repeat("a", 70)})
	g.Expect(err).To(MatchError(ContainSubstring(`invalid hostname "aaaa`)))
	g.Expect(err.Error()).NotTo(ContainSubstring("\n"), "condition messages stay on one line")
}
