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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestCompatibilityPageIsTheTable: docs/compatibility.md lists every row of SupportMatrix as
// it is, and every contract Talon renders for has a row.
func TestCompatibilityPageIsTheTable(t *testing.T) {
	g := NewWithT(t)
	page, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "compatibility.md"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(SupportMatrix[0].Talos).To(Equal(OldestContract))
	g.Expect(SupportMatrix[len(SupportMatrix)-1].Talos).To(Equal(NewestContract))
	for _, s := range SupportMatrix {
		row := fmt.Sprintf("| %s | %s | v%d.%d |", s.Talos, s.KubernetesWindow(), s.MinUpgradeFrom.Major, s.MinUpgradeFrom.Minor)
		g.Expect(strings.Contains(string(page), row)).To(BeTrue(), "docs/compatibility.md has the row %q", row)
	}
}

func TestSupportWindows(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantMessage string
	}{
		{"Kubernetes 1.38 on Talos 1.14", CheckKubernetes("v1.14", "v1.38.0"), "Kubernetes v1.38.0 is not supported on Talos v1.14, which runs Kubernetes v1.32 to v1.37"},
		{"Kubernetes 1.30 on Talos 1.14", CheckKubernetes("v1.14", "v1.30.4"), "Kubernetes v1.30.4 is not supported on Talos v1.14, which runs Kubernetes v1.32 to v1.37"},
		{"Kubernetes 1.37 on Talos 1.14", CheckKubernetes("v1.14", "v1.37.2"), ""},
		{"Kubernetes 1.32 on Talos 1.14", CheckKubernetes("v1.14.1", "v1.32.0"), ""},
		{"Kubernetes 1.36 on the unpinned contract", CheckKubernetes("", "v1.36.3"), ""},
		{"Kubernetes 1.37 on the unpinned contract", CheckKubernetes("", "v1.37.0"), "Kubernetes v1.37.0 is not supported on Talos v1.13, which runs Kubernetes v1.31 to v1.36"},
		{"Talos 1.10 to 1.14", CheckTalosUpgrade("v1.10", "v1.14"), "Talos v1.14 upgrades only from v1.12 or later, not from v1.10: upgrade to v1.12 first"},
		{"Talos 1.11 to 1.14", CheckTalosUpgrade("v1.11", "v1.14"), "Talos v1.14 upgrades only from v1.12 or later, not from v1.11: upgrade to v1.13 first"},
		{"Talos 1.12 to 1.14", CheckTalosUpgrade("v1.12", "v1.14"), ""},
		{"Talos 1.14 back to 1.10", CheckTalosUpgrade("v1.14", "v1.10"), ""},
		{"a node on Talos 1.13 to Kubernetes 1.37", CheckNodeUpdate("v1.13.3", "", "v1.37.2"), "Kubernetes v1.37.2 is not supported on Talos v1.13, which runs Kubernetes v1.31 to v1.36"},
		{"a node on Talos 1.13 to Talos 1.14 and Kubernetes 1.37", CheckNodeUpdate("v1.13.3", "v1.14.1", "v1.37.2"), ""},
		{"a node on Talos 1.14 to Talos 1.13 and Kubernetes 1.37", CheckNodeUpdate("v1.14.1", "v1.13.3", "v1.37.2"), "Kubernetes v1.37.2 is not supported on Talos v1.13, which runs Kubernetes v1.31 to v1.36"},
		{"a node on Talos 1.11 to Talos 1.14", CheckNodeUpdate("v1.11.5", "v1.14.1", "v1.34.1"), "Talos v1.14 upgrades only from v1.12 or later, not from v1.11: upgrade to v1.13 first"},
		{"a node on Talos 1.14 to Kubernetes 1.31", CheckNodeUpdate("v1.14.1", "", "v1.31.4"), "Kubernetes v1.31.4 is not supported on Talos v1.14, which runs Kubernetes v1.32 to v1.37"},
		{"a node on a Talos Talon has no window for", CheckNodeUpdate("v1.16.0", "", "v1.40.0"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			if tt.wantMessage == "" {
				g.Expect(tt.err).NotTo(HaveOccurred())
				return
			}
			g.Expect(tt.err).To(MatchError(tt.wantMessage))
		})
	}
}
