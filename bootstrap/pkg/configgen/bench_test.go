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
	"testing"
	"time"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// BenchmarkRender renders and validates one control-plane config with a JSON and a strategic
// patch and a hostname: the work the bootstrap reconciler does per Machine.
func BenchmarkRender(b *testing.B) {
	bundle := testBundle()
	m := Machine{
		Spec: bootstrapv1.TalosConfigSpec{
			GenerateType:     bootstrapv1.GenerateTypeControlPlane,
			ConfigPatches:    []bootstrapv1.ConfigPatch{{Op: "add", Path: "/machine/sysctls", Value: jsonValue(`{"vm.max_map_count":"262144"}`)}},
			StrategicPatches: []string{"machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"150\"\n"},
		},
		Hostname: "bench-cp-0",
		Mode:     ModeContainer,
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(bundle, testCluster, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewBundle creates a cluster's secrets bundle: every CA and key.
func BenchmarkNewBundle(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewBundle("", time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
