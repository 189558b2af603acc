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

package controlplane

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestMachineName(t *testing.T) {
	cases := []struct {
		template string
		want     string
		refused  string
	}{
		{template: "{{ .cluster.name }}-cp-{{ .random }}", want: "demo-cp-x7k2p"},
		{template: "{{ .talosControlPlane.name }}-{{ .random }}", want: "demo-control-plane-x7k2p"},
		{template: "cp-{{ .cluster.name }}", refused: "must contain {{ .random }}"},
		{template: "{{ .random }}-{{ .cluster.nam }}", refused: "cannot be rendered"},
		{template: "{{ .random }}-{{ .cluster.name", refused: "does not parse"},
		{template: "{{ .random }}.{{ .cluster.name }}", refused: `renders "x7k2p.demo", not a DNS label`},
		{template: strings.Repeat("a", 60) + "-{{ .random }}", refused: "must be no more than 63 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.template, func(t *testing.T) {
			g := NewWithT(t)
			name, err := MachineName(tc.template, "demo", "demo-control-plane", "x7k2p")
			if tc.refused != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.refused)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(name).To(Equal(tc.want))
		})
	}
}
