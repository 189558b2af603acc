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

// Command testreport says where a `make test` run spent its time: each phase (generated files
// and lint, tools, images, the tests) with the share of the machine's CPU it used, each test
// package's wall time, and the slowest tests. hack/test.sh writes its inputs into out/ and
// runs it last:
//
//	go run ./hack/testreport -phases out/phases.tsv -cpu out/cpu.tsv -events out/test-events.json
//
// With -order FILE it prints instead the packages named on the command line, those that took
// longest in FILE (lines of "seconds package", as -times writes them) first, so that go test
// starts the long packages before the short ones fill the machine.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// slowest is how many of the slowest tests the report lists.
const slowest = 20

func main() {
	phases := flag.String("phases", "", "the phases file: lines of name, start and end (Unix seconds) and exit status, tab separated")
	cpu := flag.String("cpu", "", "the CPU samples file: lines of a Unix time and /proc/stat's cpu line")
	events := flag.String("events", "", "the go test -json events of the tests")
	times := flag.String("times", "", "write each package's wall time to this file (seconds, then the package), longest first")
	order := flag.String("order", "", "print the packages given as arguments, longest first as this times file has them")
	flag.Parse()
	if err := run(os.Stdout, *phases, *cpu, *events, *times, *order, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, phasesFile, cpuFile, eventsFile, timesFile, orderFile string, packages []string) error {
	if orderFile != "" {
		known, err := readTimes(orderFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, p := range orderPackages(packages, known) {
			_, _ = fmt.Fprintln(w, p)
		}
		return nil
	}
	var samples []cpuSample
	if cpuFile != "" {
		var err error
		if samples, err = readCPU(cpuFile); err != nil {
			return err
		}
	}
	if phasesFile != "" {
		phases, err := readPhases(phasesFile)
		if err != nil {
			return err
		}
		writePhases(w, phases, samples)
	}
	if eventsFile == "" {
		return nil
	}
	runs, err := readEvents(eventsFile)
	if err != nil {
		return err
	}
	pkgs := packageTimes(runs)
	writePackages(w, pkgs)
	writeSlowest(w, runs)
	if timesFile != "" {
		var b strings.Builder
		for _, p := range pkgs {
			fmt.Fprintf(&b, "%.0f %s\n", p.seconds, p.name)
		}
		return os.WriteFile(timesFile, []byte(b.String()), 0o644) //nolint:gosec // a report, readable by all
	}
	return nil
}

// phase is one step of a run.
type phase struct {
	name       string
	start, end int64
	status     int
}

func readPhases(path string) ([]phase, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	var phases []phase
	for _, line := range lines {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("%s: want name, start, end and status, got %q", path, line)
		}
		start, err1 := strconv.ParseInt(f[1], 10, 64)
		end, err2 := strconv.ParseInt(f[2], 10, 64)
		status, err3 := strconv.Atoi(f[3])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		phases = append(phases, phase{name: f[0], start: start, end: end, status: status})
	}
	return phases, nil
}

// cpuSample is the machine's cumulative CPU time at one moment, in /proc/stat's ticks.
type cpuSample struct {
	at         int64
	busy, idle uint64
}

func readCPU(path string) ([]cpuSample, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	var samples []cpuSample
	for _, line := range lines {
		s, ok := parseCPU(line)
		if ok {
			samples = append(samples, s)
		}
	}
	return samples, nil
}

// parseCPU reads "<unix time> cpu user nice system idle iowait irq softirq steal ...". The
// idle time is idle and iowait; every other field is busy.
func parseCPU(line string) (cpuSample, bool) {
	f := strings.Fields(line)
	if len(f) < 6 || f[1] != "cpu" {
		return cpuSample{}, false
	}
	at, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return cpuSample{}, false
	}
	s := cpuSample{at: at}
	// The guest fields (after steal) are already counted in user and nice.
	for i, v := range f[2:min(len(f), 10)] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuSample{}, false
		}
		if i == 3 || i == 4 {
			s.idle += n
		} else {
			s.busy += n
		}
	}
	return s, true
}

// cpuUse is the share of the machine's CPU time that was busy between start and end, and
// the share of the sampling intervals in that span during which it was at least 95 % busy.
func cpuUse(samples []cpuSample, start, end int64) (busy, saturated float64, ok bool) {
	var busyTicks, allTicks uint64
	intervals, full := 0, 0
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if b.at <= start || a.at >= end {
			continue
		}
		db, di := b.busy-a.busy, b.idle-a.idle
		busyTicks += db
		allTicks += db + di
		intervals++
		if db+di > 0 && float64(db)/float64(db+di) >= 0.95 {
			full++
		}
	}
	if allTicks == 0 {
		return 0, 0, false
	}
	return float64(busyTicks) / float64(allTicks), float64(full) / float64(intervals), true
}

func writePhases(w io.Writer, phases []phase, samples []cpuSample) {
	_, _ = fmt.Fprintln(w, "Phases (CPU: the share of both cores busy; saturated: of the 5-second samples, those at 95 % or more):")
	_, _ = fmt.Fprintf(w, "  %-28s %10s %6s %10s\n", "phase", "time", "CPU", "saturated")
	var first, last int64
	for _, p := range phases {
		if first == 0 || p.start < first {
			first = p.start
		}
		last = max(last, p.end)
		writePhase(w, p.name, p.start, p.end, p.status, samples)
	}
	if len(phases) > 0 {
		writePhase(w, "all", first, last, 0, samples)
	}
}

func writePhase(w io.Writer, name string, start, end int64, status int, samples []cpuSample) {
	use, full := "-", "-"
	if busy, saturated, ok := cpuUse(samples, start, end); ok {
		use, full = fmt.Sprintf("%.0f%%", 100*busy), fmt.Sprintf("%.0f%%", 100*saturated)
	}
	failed := ""
	if status != 0 {
		failed = fmt.Sprintf(" (failed, exit %d)", status)
	}
	_, _ = fmt.Fprintf(w, "  %-28s %10s %6s %10s%s\n", name, time.Duration(end-start)*time.Second, use, full, failed)
}

// testRun is one test's or package's result.
type testRun struct {
	pkg, test string
	seconds   float64
	action    string
}

// event is the part of a test2json event this command reads.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

func readEvents(path string) ([]testRun, error) {
	file, err := os.Open(path) //nolint:gosec // the events file make names
	if err != nil {
		return nil, err
	}
	defer func() { _ = file.Close() }()
	var runs []testRun
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var e event
		if json.Unmarshal(scanner.Bytes(), &e) != nil {
			continue
		}
		if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
			runs = append(runs, testRun{pkg: e.Package, test: e.Test, seconds: e.Elapsed, action: e.Action})
		}
	}
	return runs, scanner.Err()
}

// pkgTime is one package's wall time.
type pkgTime struct {
	name    string
	seconds float64
	failed  bool
}

func packageTimes(runs []testRun) []pkgTime {
	var pkgs []pkgTime
	for _, r := range runs {
		if r.test == "" && r.seconds > 0 {
			pkgs = append(pkgs, pkgTime{name: r.pkg, seconds: r.seconds, failed: r.action == "fail"})
		}
	}
	slices.SortStableFunc(pkgs, func(a, b pkgTime) int { return compareDesc(a.seconds, b.seconds) })
	return pkgs
}

func writePackages(w io.Writer, pkgs []pkgTime) {
	var total float64
	for _, p := range pkgs {
		total += p.seconds
	}
	_, _ = fmt.Fprintf(w, "Test packages by wall time (%d packages, %s in all):\n", len(pkgs), round(total))
	for _, p := range pkgs {
		if p.seconds < 30 {
			break
		}
		failed := ""
		if p.failed {
			failed = " FAILED"
		}
		_, _ = fmt.Fprintf(w, "  %10s  %s%s\n", round(p.seconds), p.name, failed)
	}
}

func writeSlowest(w io.Writer, runs []testRun) {
	var tests []testRun
	for _, r := range runs {
		// Top-level tests only: a subtest's time is inside its parent's.
		if r.test != "" && !strings.Contains(r.test, "/") {
			tests = append(tests, r)
		}
	}
	slices.SortStableFunc(tests, func(a, b testRun) int { return compareDesc(a.seconds, b.seconds) })
	_, _ = fmt.Fprintf(w, "The %d slowest tests (of %d):\n", min(slowest, len(tests)), len(tests))
	for _, t := range tests[:min(slowest, len(tests))] {
		_, _ = fmt.Fprintf(w, "  %10s  %s %s (%s)\n", round(t.seconds), t.test, t.action, strings.TrimPrefix(t.pkg, "github.com/talon-capi/talon/"))
	}
}

func readTimes(path string) (map[string]float64, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	times := map[string]float64{}
	for _, line := range lines {
		seconds, name, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("%s: want seconds and a package, got %q", path, line)
		}
		s, err := strconv.ParseFloat(seconds, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		times[strings.TrimSpace(name)] = s
	}
	return times, nil
}

// orderPackages sorts packages by their recorded time, longest first; packages with no record
// (new ones) come after those that took a minute or more and before the rest, in the order
// given.
func orderPackages(packages []string, times map[string]float64) []string {
	rank := func(p string) float64 {
		if s, ok := times[p]; ok {
			return s
		}
		return 60
	}
	ordered := slices.Clone(packages)
	slices.SortStableFunc(ordered, func(a, b string) int { return compareDesc(rank(a), rank(b)) })
	return ordered
}

func compareDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func round(seconds float64) time.Duration {
	return time.Duration(seconds * float64(time.Second)).Round(time.Second)
}

func readLines(path string) ([]string, error) {
	data, err := os.ReadFile(path) //nolint:gosec // a file make names
	if err != nil {
		return nil, err
	}
	var lines []string
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines, nil
}
