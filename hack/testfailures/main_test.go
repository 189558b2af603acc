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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// events writes a test2json stream: each element is "Test\tAction" or "Test\toutput line".
func events(t *testing.T, lines ...string) string {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		test, rest, _ := strings.Cut(l, "\t")
		e := map[string]string{"Package": "example.com/p", "Test": test, "Action": "output", "Output": rest + "\n"}
		if rest == "fail" || rest == "pass" {
			e["Action"], e["Output"] = rest, ""
		}
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(data, '\n'))
	}
	path := filepath.Join(t.TempDir(), "events.json")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReportBeforeCleanup: a test whose cleanup prints after its failed assertion is reported
// with the assertion's first lines, the lines just before its "Expected", and that message,
// not only with the cleanup's lines.
func TestReportBeforeCleanup(t *testing.T) {
	lines := make([]string, 0, 64)
	lines = append(lines, "TestA\t=== RUN TestA", "TestA\t    a_test.go:1: a step",
		"TestA\t    pods.go:184: ", "TestA\t        infra/pod/manager restarted 1 times")
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("TestA\t        log line %d", i))
	}
	lines = append(lines, "TestA\t        Expected", "TestA\t            <bool>: false", "TestA\t        to be true")
	for i := range 9 {
		lines = append(lines, fmt.Sprintf("TestA\t    e2e_test.go:354: Stopping %d", i))
	}
	lines = append(lines, "TestA\tfail", "TestB\t    b_test.go:3: ", "TestB\t        Unexpected error:", "TestB\tfail", "\tfail")

	failures, err := read(events(t, lines...))
	if err != nil {
		t.Fatal(err)
	}
	if len(failures) != 2 {
		t.Fatalf("want 2 failures, got %+v", failures)
	}
	a := strings.Join(failures[0].report, "\n")
	for _, want := range []string{"restarted 1 times", "log line 29", "Expected", "to be true"} {
		if !strings.Contains(a, want) {
			t.Errorf("TestA's report lacks %q:\n%s", want, a)
		}
	}
	for _, unwanted := range []string{"log line 10", "Stopping"} {
		if strings.Contains(a, unwanted) {
			t.Errorf("TestA's report holds %q:\n%s", unwanted, a)
		}
	}
	if last := failures[0].lastLines; len(last) != linesPerFailure || !strings.Contains(last[len(last)-1], "Stopping 8") {
		t.Errorf("TestA's last lines: %q", last)
	}
	// TestB's assertion is among its last lines: no separate report.
	if failures[1].report != nil || !strings.Contains(strings.Join(failures[1].lastLines, "\n"), "Unexpected error") {
		t.Errorf("TestB: %+v", failures[1])
	}
}
