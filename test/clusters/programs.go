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

	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/envtest"
)

// Programs builds every program under cmd/ into a temporary directory, as "make build" does
// into bin/, and links the tools of bin/ (make tools) next to them: the directory talon up
// and a process-run management plane run everything from. It is built once per test
// binary; the package's TestMain removes it (RemovePrograms).
var Programs = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "talon-test-bin-")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(context.Background(), "go", "build", "-o", dir+string(filepath.Separator), "./cmd/...")
	cmd.Dir = envtest.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("go build ./cmd/... failed: %w\n%s", err, out)
	}
	for _, tool := range []string{plane.EtcdBinary, plane.APIServerBinary, plane.ControllerManagerBinary, plane.ClusterctlBinary, quickstart.CAPIManagerBinary,
		quickstart.SideroBootstrapBinary, quickstart.SideroControlPlaneBinary} {
		path, err := envtest.Binary(tool)
		if err != nil {
			return dir, err
		}
		if err := os.Symlink(path, filepath.Join(dir, tool)); err != nil {
			return dir, err
		}
	}
	return dir, nil
})

// RemovePrograms removes the directory of Programs, if it was built.
func RemovePrograms() {
	if dir, err := Programs(); err == nil {
		_ = os.RemoveAll(dir)
	}
}
