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

package binaries

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// BenchmarkSimCluster measures the simulator's cluster scenario with one process per node:
// the time from the first apply to four Ready Nodes (s-to-ready), and the memory of a
// control-plane node, its process with kube-apiserver and kube-controller-manager
// (MiB/cp-node, resident set).
func BenchmarkSimCluster(b *testing.B) {
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(b, envtest.Layer, err)
	talon := filepath.Join(buildCommands(b), "talon")
	for i := 0; b.Loop(); i++ {
		// Fresh addresses per iteration: a stopped node's ports may linger in TIME_WAIT.
		addresses := make([]string, 4)
		procs := make([]*process, 4)
		for j := range addresses {
			addresses[j] = fmt.Sprintf("127.0.68.%d", 10*i+j+1)
			procs[j] = startProcess(b, talon, nil, "sim", "--address", addresses[j], "--state-dir", b.TempDir(), "--bin-dir", envtest.BinDir())
		}
		cluster := simtest.Scenario(b, addresses[:3], addresses[3:])
		var rss float64
		for _, p := range procs[:3] {
			rss += treeRSS(b, p.cmd.Process.Pid)
		}
		b.ReportMetric(cluster.Ready.Seconds(), "s-to-ready")
		b.ReportMetric(rss/3/(1<<20), "MiB/cp-node")
		for _, p := range procs {
			p.terminate(b)
		}
	}
}

// treeRSS is the resident memory of pid and its descendants, in bytes.
func treeRSS(tb testing.TB, pid int) float64 {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			total += kb * 1024
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		children, _ := os.ReadFile(task)
		for field := range strings.FieldsSeq(string(children)) {
			if child, err := strconv.Atoi(field); err == nil {
				total += treeRSS(tb, child)
			}
		}
	}
	return total
}
