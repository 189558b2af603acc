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

// Command testfailures reads the events of a `go test -json` run and prints, last and
// briefly, which tests and packages failed, the lines around the first assertion message each
// of them printed, and their final lines.
// `make test-go` runs it after the list of slow tests, so a CI log that keeps only its tail
// still names what failed and why.
//
//	go run ./hack/testfailures out/test-events.json
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// linesPerFailure is how many of a failure's last output lines are printed.
const linesPerFailure = 8

// Of the first log entry that holds an assertion message, this many of its first lines, of
// the lines before the message, and of the lines after it are printed: a test's cleanup often
// prints after its failure, so the last lines alone may not say why it failed.
const (
	linesBeforeReport = 4
	linesAfterReport  = 12
)

// maxLineLength is where a printed line is cut.
const maxLineLength = 300

// reportMarkers begin the lines that Gomega and testify print for a failed assertion.
var reportMarkers = []string{"Expected", "Timed out after", "Unexpected error", "Told to stop trying", "Error Trace:", "Error:"}

// event is the part of a test2json event this command reads.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	// ImportPath names the package of a build-output event, e.g. "p [p.test]".
	ImportPath string
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: testfailures EVENTS.json")
		os.Exit(2)
	}
	failures, err := read(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testfailures:", err)
		os.Exit(1)
	}
	if len(failures) == 0 {
		fmt.Println("No test failed.")
		return
	}
	fmt.Printf("Failed (%d):\n", len(failures))
	for _, f := range failures {
		fmt.Printf("--- %s\n", f.name)
		if len(f.report) > 0 {
			for _, line := range f.report {
				fmt.Printf("    %s\n", cut(line))
			}
			fmt.Println("    [...]")
		}
		for _, line := range f.lastLines {
			fmt.Printf("    %s\n", cut(line))
		}
	}
}

// failure is one failed test, or a package that failed outside any test (a build error, a
// timeout's panic).
type failure struct {
	name string
	// report is the lines around the first assertion message, when one was printed before
	// the last lines.
	report    []string
	lastLines []string
}

// cut shortens a line to maxLineLength.
func cut(line string) string {
	if len(line) <= maxLineLength {
		return line
	}
	return line[:maxLineLength] + " [...]"
}

// isReport tells whether a line begins an assertion message.
func isReport(line string) bool {
	trimmed := strings.TrimSpace(line)
	for _, marker := range reportMarkers {
		if strings.HasPrefix(trimmed, marker) {
			return true
		}
	}
	return false
}

// logEntry matches the first line of a testing.T log entry, which names the file and line
// that wrote it: an assertion message is one such entry.
var logEntry = regexp.MustCompile(`^\s*[\w./-]+\.go:\d+: `)

// outputs is what is kept of one test's output.
type outputs struct {
	recent []string // the last lines
	// entryHead is the first lines of the latest log entry, entryLength how many it has.
	entryHead   []string
	entryLength int
	report      []string // the lines around the first assertion message
	// reportDone is set once the report has all the lines it takes; sinceReport counts the
	// lines printed after the report began.
	reportDone  bool
	sinceReport int
}

// add keeps one more line.
func (o *outputs) add(line string) {
	entryBegins := logEntry.MatchString(line)
	if entryBegins {
		o.entryHead, o.entryLength = nil, 0
	}
	o.entryLength++
	switch {
	case o.report == nil && isReport(line):
		// The entry's head says what was asserted; the lines just before the marker hold
		// the value that failed it.
		o.report = slices.Clone(o.entryHead)
		between := o.entryLength - 1 - len(o.entryHead)
		if between > linesBeforeReport {
			o.report = append(o.report, "[...]")
		}
		before := o.recent[max(0, len(o.recent)-min(between, linesBeforeReport)):]
		o.report = append(append(o.report, before...), line)
	case o.report != nil:
		o.sinceReport++
		// The report ends with its entry: what follows is the test going on, or its cleanup.
		o.reportDone = o.reportDone || entryBegins || o.sinceReport > linesAfterReport
		if !o.reportDone {
			o.report = append(o.report, line)
		}
	}
	if len(o.entryHead) < linesBeforeReport {
		o.entryHead = append(o.entryHead, line)
	}
	o.recent = append(o.recent, line)
	if len(o.recent) > linesPerFailure {
		o.recent = o.recent[len(o.recent)-linesPerFailure:]
	}
}

// failure is what the kept output says of a failed test: the report only when its lines are
// not all among the last ones.
func (o *outputs) failure(name string) failure {
	f := failure{name: name, lastLines: o.recent}
	if o.report != nil && o.sinceReport >= len(o.recent) {
		f.report = o.report
	}
	return f
}

func read(path string) ([]failure, error) {
	file, err := os.Open(path) //nolint:gosec // the events file make names
	if err != nil {
		return nil, err
	}
	defer func() { _ = file.Close() }()

	output := map[string]*outputs{}  // by "package test": the output kept so far
	panicked := map[string]bool{}    // by "package test": a panic was printed, keep its first lines
	failedTests := map[string]bool{} // packages with a failed test
	kept := func(key string) *outputs {
		if output[key] == nil {
			output[key] = &outputs{}
		}
		return output[key]
	}
	var failures []failure
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var e event
		if json.Unmarshal(scanner.Bytes(), &e) != nil {
			continue
		}
		if e.Action == "build-output" {
			// The compiler's messages for a package that does not build (Go 1.24+).
			e.Action = "output"
			e.Package, _, _ = strings.Cut(e.ImportPath, " ")
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			line := strings.TrimRight(e.Output, "\n")
			if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "=== ") {
				continue
			}
			if panicked[key] {
				// A panic's first lines say what happened (a timeout names the tests it
				// was running); the goroutine dump after them does not.
				if o := kept(key); len(o.recent) < linesPerFailure {
					o.recent = append(o.recent, line)
				}
				continue
			}
			if strings.HasPrefix(line, "panic: ") {
				panicked[key] = true
				output[key] = &outputs{recent: []string{line}}
				continue
			}
			kept(key).add(line)
		case "fail":
			if e.Test != "" {
				failedTests[e.Package] = true
				if !hasFailedSubtest(failures, key) {
					failures = append(failures, kept(key).failure(key))
				}
				break
			}
			// A test that panicked ends with its package, with no event of its own.
			for running := range panicked {
				if strings.HasPrefix(running, e.Package+" ") && running != key {
					failedTests[e.Package] = true
					failures = append(failures, kept(running).failure(running))
				}
			}
			if !failedTests[e.Package] || panicked[key] {
				// A package that failed outside its tests: it did not build, or panicked.
				failures = append(failures, kept(key).failure(e.Package))
			}
		}
		if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
			delete(output, key)
			delete(panicked, key)
		}
	}
	return failures, scanner.Err()
}

// hasFailedSubtest tells whether a subtest of the test named by key has already failed: its
// lines say more than the parent's.
func hasFailedSubtest(failures []failure, key string) bool {
	for _, f := range failures {
		if strings.HasPrefix(f.name, key+"/") {
			return true
		}
	}
	return false
}
