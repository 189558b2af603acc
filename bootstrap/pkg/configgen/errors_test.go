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
		spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker}
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
			want: "configPatches do not apply",
		},
		{
			name: "a JSON patch removing a path that does not exist",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.ConfigPatches = []bootstrapv1.ConfigPatch{{Op: "remove", Path: "/cluster/nosuchfield"}}
			}),
			want: "configPatches do not apply",
		},
		{
			name: "a JSON patch adding a field Talos does not know",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.ConfigPatches = []bootstrapv1.ConfigPatch{{Op: "add", Path: "/machine/bogus", Value: jsonValue(`true`)}}
			}),
			want: "configPatches produce an invalid v1alpha1 document",
		},
		{
			name: "a JSON patch with an unknown operation",
			spec: worker(func(s *bootstrapv1.TalosConfigSpec) {
				s.ConfigPatches = []bootstrapv1.ConfigPatch{{Op: "frobnicate", Path: "/machine"}}
			}),
			want: "configPatches do not apply",
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
			want: `talosVersion "v1.99" is not supported: Talon renders configs for Talos v1.10 to v1.13`,
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
