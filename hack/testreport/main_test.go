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

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCPUUse: the busy share of a span counts user, system and interrupt time as busy and
// idle and iowait as idle, over the samples inside the span only.
func TestCPUUse(t *testing.T) {
	var samples []cpuSample
	for _, line := range []string{
		"100 cpu 0 0 0 0 0 0 0 0 0 0",
		// 5 s on 2 cores at 100 ticks a second: 1,000 ticks, all busy.
		"105 cpu 600 0 400 0 0 0 0 0 0 0",
		// Then 1,000 ticks of which 250 busy (user 200, softirq 50) and 750 idle (iowait 50).
		"110 cpu 800 0 400 700 50 0 50 0 0 0",
		"not a sample",
	} {
		if s, ok := parseCPU(line); ok {
			samples = append(samples, s)
		}
	}
	if len(samples) != 3 {
		t.Fatalf("parsed %d samples, want 3", len(samples))
	}
	for _, tc := range []struct {
		name            string
		start, end      int64
		busy, saturated float64
	}{
		{"the first interval", 100, 105, 1, 1},
		{"the second interval", 105, 110, 0.25, 0},
		{"both", 100, 110, 0.625, 0.5},
	} {
		busy, saturated, ok := cpuUse(samples, tc.start, tc.end)
		if !ok || busy != tc.busy || saturated != tc.saturated {
			t.Errorf("%s: cpuUse = %v, %v, %v; want %v, %v", tc.name, busy, saturated, ok, tc.busy, tc.saturated)
		}
	}
	if _, _, ok := cpuUse(samples, 200, 300); ok {
		t.Error("a span without samples has no CPU figure")
	}
}

// TestOrderPackages: packages start longest first as the times file has them; a package the
// file does not know starts after those of a minute or more.
func TestOrderPackages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "times.txt")
	if err := os.WriteFile(path, []byte("# a comment\n300 p/slow\n90 p/medium\n5 p/quick\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run(&out, "", "", "", "", path, []string{"p/quick", "p/new", "p/medium", "p/slow"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"p/slow", "p/medium", "p/new", "p/quick"}
	if got := strings.Fields(out.String()); !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// TestReport: the report names each phase with its time and a failed one's exit status, the
// packages by wall time, and the slowest top-level tests, not their subtests.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	phases := write("phases.tsv", "lint\t100\t160\t0\ntests\t160\t3760\t2\n")
	events := write("events.json", strings.Join([]string{
		`{"Action":"pass","Package":"p/a","Test":"TestSlow","Elapsed":900}`,
		`{"Action":"pass","Package":"p/a","Test":"TestSlow/step","Elapsed":899}`,
		`{"Action":"fail","Package":"p/a","Test":"TestFailed","Elapsed":30}`,
		`{"Action":"fail","Package":"p/a","Elapsed":935}`,
		`{"Action":"pass","Package":"p/b","Test":"TestQuick","Elapsed":0.5}`,
		`{"Action":"pass","Package":"p/b","Elapsed":40}`,
	}, "\n"))
	times := filepath.Join(dir, "times.txt")
	var out strings.Builder
	if err := run(&out, phases, "", events, times, "", nil); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	for _, want := range []string{"lint", "1m0s", "tests", "1h0m0s", "(failed, exit 2)", "15m35s  p/a FAILED", "40s  p/b",
		"15m0s  TestSlow pass (p/a)", "30s  TestFailed fail (p/a)"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "TestSlow/step") {
		t.Errorf("the report lists a subtest:\n%s", report)
	}
	data, err := os.ReadFile(times)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "935 p/a\n40 p/b\n" {
		t.Errorf("times file = %q", data)
	}
}
