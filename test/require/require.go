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

// Layer lets t run when unavailable is nil. Otherwise it fails t if the layer is required,
// and skips t with the reason if not.
func Layer(tb testing.TB, layer string, unavailable error) {
	tb.Helper()
	if unavailable == nil {
		return
	}
	if Required(layer) {
		tb.Fatalf("The %s layer is required (%s=%s) but cannot run: %v", layer, EnvVar, os.Getenv(EnvVar), unavailable)
	}
	tb.Skipf("Skipping: the %s layer cannot run here: %v (list it in %s to make this a failure)", layer, unavailable, EnvVar)
}
