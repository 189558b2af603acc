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
	"encoding/json"
	"testing"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// FuzzRenderPatches feeds arbitrary JSON and strategic patches to Render: whatever a user
// writes, Render returns a config or an error, never a panic. The seed corpus is in
// testdata/fuzz/FuzzRenderPatches; run "go test -fuzz=FuzzRenderPatches" to explore more.
func FuzzRenderPatches(f *testing.F) {
	f.Add(`[{"op":"add","path":"/machine/sysctls","value":{"a":"b"}}]`, "machine:\n  kubelet:\n    extraArgs:\n      a: b\n", "v1.13")
	f.Add(`[{"op":"remove","path":"/cluster/network"}]`, "apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: x\n", "v1.12")
	f.Add(`[]`, "", "v1.11")
	f.Fuzz(func(t *testing.T, jsonPatch, strategicPatch, talosVersion string) {
		spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: talosVersion}
		var ops []bootstrapv1.ConfigPatch
		if json.Unmarshal([]byte(jsonPatch), &ops) == nil {
			spec.ConfigPatches = ops
		}
		if strategicPatch != "" {
			spec.StrategicPatches = []string{strategicPatch}
		}
		out, err := Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeContainer, Hostname: "fuzz"})
		if err == nil && len(out) == 0 {
			t.Fatal("Render returned neither a config nor an error")
		}
	})
}
