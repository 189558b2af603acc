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

package clusters

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/envtest"
)

// ProgramsEnv names a directory where "make build" has put this tree's programs next to the
// tools of "make tools" (bin/, as "make test" sets it): Programs then uses it as it is
// instead of building them again while other tests run.
const ProgramsEnv = "TALON_PROGRAMS_DIR"

// Programs is the directory talon up and a process-run management plane run everything
// from: this build's programs (cmd/) and the tools of bin/ (make tools). It is $TALON_PROGRAMS_DIR
// when that is set, or else every program under cmd/ built into a temporary directory, as
// "make build" does into bin/, with the tools linked next to them. It is made once per test
// binary; the package's TestMain removes what it built (RemovePrograms).
var Programs = sync.OnceValues(func() (string, error) {
	if dir := os.Getenv(ProgramsEnv); dir != "" {
		return dir, checkPrograms(dir)
	}
	dir, err := os.MkdirTemp("", "talon-test-bin-")
	if err != nil {
		return "", err
	}
	built.Store(&dir)
	cmd := exec.CommandContext(context.Background(), "go", "build", "-o", dir+string(filepath.Separator), "./cmd/...")
	cmd.Dir = envtest.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("go build ./cmd/... failed: %w\n%s", err, out)
	}
	for _, tool := range tools {
		path, err := envtest.Binary(tool)
		if err != nil {
			return dir, err
		}
		if err := os.Symlink(path, filepath.Join(dir, tool)); err != nil {
			return dir, err
		}
	}
	// The node's, for talon up --managers pods; a machine without them skips those tests
	// (PodsPrerequisites), not the others.
	for _, tool := range []string{plane.SchedulerBinary, plane.KubeletBinary, plane.ProxyBinary, plane.CRIDockerdBinary} {
		if path, err := envtest.Binary(tool); err == nil {
			if err := os.Symlink(path, filepath.Join(dir, tool)); err != nil {
				return dir, err
			}
		}
	}
	return dir, nil
})

// tools are the programs of bin/ that Programs' directory holds besides this build's.
var tools = []string{plane.EtcdBinary, plane.APIServerBinary, plane.ControllerManagerBinary, plane.ClusterctlBinary, quickstart.CAPIManagerBinary,
	quickstart.SideroBootstrapBinary, quickstart.SideroControlPlaneBinary}

// checkPrograms fails unless dir holds every program of cmd/ and every tool, naming the
// make targets that put them there.
func checkPrograms(dir string) error {
	programs, err := os.ReadDir(filepath.Join(envtest.RepoRoot(), "cmd"))
	if err != nil {
		return err
	}
	for _, p := range programs {
		if _, err := os.Stat(filepath.Join(dir, p.Name())); err != nil {
			return fmt.Errorf("%s=%s has no %s: run make build (and make tools), or unset %s to build the programs here: %w", ProgramsEnv, dir, p.Name(), ProgramsEnv, err)
		}
	}
	for _, tool := range tools {
		if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
			return fmt.Errorf("%s=%s has no %s: run make tools: %w", ProgramsEnv, dir, tool, err)
		}
	}
	return nil
}

// built is the directory Programs made, if it made one.
var built atomic.Pointer[string]

// RemovePrograms removes the directory of Programs, if Programs made one.
func RemovePrograms() {
	if dir := built.Load(); dir != nil {
		_ = os.RemoveAll(*dir)
	}
}
