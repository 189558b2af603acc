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
	"encoding/json"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/talon-capi/talon/internal/version"
)

func TestVersion(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(g *WithT, out string)
		wantErr string
	}{
		{
			name: "one line names the build",
			args: []string{"version"},
			check: func(g *WithT, out string) {
				g.Expect(out).To(HavePrefix("talon dev "))
				g.Expect(out).To(ContainSubstring(runtime.Version()))
			},
		},
		{
			name:  "short prints the version alone",
			args:  []string{"version", "-o", "short"},
			check: func(g *WithT, out string) { g.Expect(out).To(Equal("dev\n")) },
		},
		{
			name: "json is machine readable",
			args: []string{"version", "--output", "json"},
			check: func(g *WithT, out string) {
				var info version.Info
				g.Expect(json.Unmarshal([]byte(out), &info)).To(Succeed())
				g.Expect(info).To(Equal(version.Get()))
			},
		},
		{
			name:    "an unknown format is refused with the choices",
			args:    []string{"version", "-o", "yaml"},
			wantErr: `unknown --output "yaml": use short or json`,
		},
		{
			name:    "extra arguments are refused",
			args:    []string{"version", "extra"},
			wantErr: "unknown command",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var out, errOut bytes.Buffer
			cmd := NewRootCommand(&out, &errOut)
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, out.String())
		})
	}
}
