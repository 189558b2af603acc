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

// Package roundtrip helps the API packages' conversion tests: a random source whose seed is
// logged and replayed from TALON_CONVERSION_SEED, random values, and a comparison by JSON,
// as the API server stores objects.
package roundtrip

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SeedEnv replays the random round trips of a failed run.
const SeedEnv = "TALON_CONVERSION_SEED"

// Rand is a random source seeded from SeedEnv, or from the clock; it logs the seed.
func Rand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(SeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s: %v", SeedEnv, err)
		}
	}
	t.Logf("seed %d (replay with %s=%d)", seed, SeedEnv, seed)
	return rand.New(rand.NewPCG(seed, seed)) //nolint:gosec // a replayable seed, not a secret
}

// Some is one of values, at random.
func Some[T any](r *rand.Rand, values ...T) T { return values[r.IntN(len(values))] }

// Time is a random time with whole seconds, as metav1.Time keeps it.
func Time(r *rand.Rand) metav1.Time {
	return metav1.NewTime(time.Unix(1_790_000_000+int64(r.IntN(1000)), 0).UTC())
}

// Must fails the test on err.
func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ExpectSame fails the test when want and got have different JSON; i and what say which
// case and which round trip.
func ExpectSame(t *testing.T, i int, what string, want, got any) {
	t.Helper()
	a, err := json.Marshal(want)
	Must(t, err)
	b, err := json.Marshal(got)
	Must(t, err)
	if !bytes.Equal(a, b) {
		t.Fatalf("case %d, %s changed the object:\nwant %s\ngot  %s", i, what, a, b)
	}
}
