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

package loopback

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// loopbackNetwork matches the 127.0.N. networks tests listen on (127.0.0.1 is everyone's).
var loopbackNetwork = regexp.MustCompile(`127\.0\.([1-9][0-9]*)\.`)

// TestEachLoopbackNetworkBelongsToOnePackage fails when two packages' tests use the same
// 127.0.N. network: run in parallel, their nodes would fight over the same ports, and the
// loser fails in a way that has nothing to do with what it tests.
func TestEachLoopbackNetworkBelongsToOnePackage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	users := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "_out") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path) //nolint:gosec // the repository's own test files
		if err != nil {
			return err
		}
		pkg, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range loopbackNetwork.FindAllStringSubmatch(string(data), -1) {
			network := "127.0." + m[1] + ".0/24"
			if !slices.Contains(users[network], pkg) {
				users[network] = append(users[network], pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(users) == 0 {
		t.Fatal("found no test using a loopback network: the walk looked in the wrong place")
	}
	for network, pkgs := range users {
		if len(pkgs) > 1 {
			t.Errorf("%s is used by the tests of %d packages, which run in parallel: %s; give each its own network",
				network, len(pkgs), strings.Join(pkgs, ", "))
		}
	}
}
