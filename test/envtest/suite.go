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

package envtest

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/talon-capi/talon/test/require"
)

// Layer is the name of this layer in TALON_REQUIRE.
const Layer = require.Envtest

var (
	shared    *Environment
	startErr  error
	startFail bool
)

// Run starts one management plane for a package's tests, runs them and stops it. Call it
// from TestMain. A plane that cannot start because binaries are missing makes Get skip (or
// fail, when required); any other start-up error fails every test that asks for the plane.
func Run(m *testing.M) int {
	shared, startErr = Start()
	startFail = startErr != nil && !errors.Is(startErr, errMissingBinaries)
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "Failed to stop the test management plane: %v\n", err)
		}
	}
	return code
}

// Get returns the package's shared management plane, started by Run.
func Get(tb testing.TB) *Environment {
	tb.Helper()
	if startFail {
		tb.Fatalf("The test management plane failed to start: %v", startErr)
	}
	require.Layer(tb, Layer, startErr)
	if shared == nil {
		tb.Fatal("envtest.Get called without envtest.Run in TestMain")
	}
	return shared
}
