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

package require

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// EnvVar lists the required layers, comma separated, e.g. "envtest,docker".
const EnvVar = "TALON_REQUIRE"

// Required reports whether layer is listed in TALON_REQUIRE.
func Required(layer string) bool {
	return slices.Contains(strings.Split(os.Getenv(EnvVar), ","), layer)
}

// Envtest is the layer of a real etcd and kube-apiserver in the test process's plane: the one
// layer the short tier (go test -short, make test-short) runs.
const Envtest = "envtest"

// Layer lets t run when unavailable is nil. Otherwise it fails t if the layer is required,
// and skips t with the reason if not. Under go test -short every layer but envtest skips.
func Layer(tb testing.TB, layer string, unavailable error) {
	tb.Helper()
	if testing.Short() && layer != Envtest {
		tb.Skipf("Skipping under -short: the %s layer runs in the full tier (make test)", layer)
	}
	if unavailable == nil {
		return
	}
	if Required(layer) {
		tb.Fatalf("The %s layer is required (%s=%s) but cannot run: %v", layer, EnvVar, os.Getenv(EnvVar), unavailable)
	}
	tb.Skipf("Skipping: the %s layer cannot run here: %v (list it in %s to make this a failure)", layer, unavailable, EnvVar)
}

// HeavyNodes skips tb under go test -short (make test-short): it runs heavy simulated nodes,
// each with its own etcd member, kube-apiserver and kube-controller-manager (docs/sim.md),
// which the full tier runs.
func HeavyNodes(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("Skipping under -short: heavy simulated nodes run in the full tier (make test)")
	}
}
