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

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	dockertest "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
)

// BenchmarkScenarios is make bench's table: on a management plane of separate processes as
// talon up makes it, the time from creating a cluster to every Machine Running with a
// Ready Node (1 + 2 and 3 + 3, on Docker with the simulator image and in-process), the time
// for a rolling Kubernetes upgrade of 3 control-plane nodes, configs rendered per second,
// and each manager's peak memory. It prints the table and reports; it never fails on a
// timing. Run it with "go test -run '^$' -bench Scenarios -benchtime 1x ./test/e2e/".
func BenchmarkScenarios(b *testing.B) {
	ctx := b.Context()
	bin, config := benchInputs(b)
	b.Setenv("HOME", b.TempDir())
	b.Setenv("TALON_SIM_IMAGE", dockertest.SimImage())
	runtimes := []string{quickstart.RuntimeSim}
	if err := dockertest.Available(ctx); err == nil {
		runtimes = append([]string{quickstart.RuntimeDocker}, runtimes...)
	} else {
		b.Logf("Docker scenarios skipped: %v", err)
	}

	var rows [][]string
	for b.Loop() {
		rows = rows[:0]
		for _, rt := range runtimes {
			rows = append(rows, benchRuntime(ctx, b, bin, config, rt)...)
			b.Logf("Measured so far:\n%s", strings.Join(rowLines(rows), "\n"))
		}
		rows = append(rows, []string{"config rendering", "one control-plane config rendered and validated", fmt.Sprintf("%.0f configs/s", configsPerSecond(b))})
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	lines := append([]string{"scenario\twhat\tresult", "--------\t----\t------"}, rowLines(rows)...)
	_, _ = fmt.Fprintln(tw, strings.Join(lines, "\n"))
	_ = tw.Flush()
}

// benchInputs are the programs a benchmark's management plane runs and the clusterctl
// config of the release manifests; the benchmark is skipped without them.
func benchInputs(b *testing.B) (bin, config string) {
	b.Helper()
	bin, err := binDir()
	if err != nil {
		b.Skipf("Skipping: %v", err)
	}
	config = filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml")
	if _, err := os.Stat(config); err != nil {
		b.Skipf("Skipping: %s is missing: run 'make release-manifests' first", config)
	}
	return bin, config
}

// benchRuntime runs the cluster scenarios on a fresh plane whose infrastructure manager
// uses rt, and returns the table's rows.
func benchRuntime(ctx context.Context, b *testing.B, bin, config, rt string) [][]string {
	b.Helper()
	dir := b.TempDir()
	// Not in <dir>/.plane: Down would remove a plane it finds there once its clusters are gone.
	p, err := plane.Start(ctx, plane.Options{Dir: filepath.Join(dir, "bench-plane"), BinDir: bin})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Remove(context.WithoutCancel(ctx)) }()
	if err := quickstart.InstallProviders(ctx, p, config, rt, nil); err != nil {
		b.Fatal(err)
	}
	label := map[string]string{quickstart.RuntimeDocker: "Docker, simulator image", quickstart.RuntimeSim: "in-process"}[rt]
	var rows [][]string
	up := func(name string, cps, workers int, version string) time.Duration {
		start := time.Now()
		_, err := quickstart.Up(ctx, quickstart.Options{
			Name: name, Namespace: "default", ControlPlanes: cps, Workers: workers, KubernetesVersion: version,
			Runtime: rt, Kubeconfig: p.Kubeconfig(), BinDir: bin, ClusterctlConfig: config, OutDir: dir,
			Timeout: 10 * time.Minute, Out: io.Discard,
		})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	down := func(name string) {
		if err := quickstart.Down(ctx, quickstart.DownOptions{OutDir: dir, Name: name, Timeout: 5 * time.Minute, Out: io.Discard}); err != nil {
			b.Fatal(err)
		}
	}

	took := up("bench-1-2-"+rt, 1, 2, newVersion)
	rows = append(rows, []string{"1 + 2 to Ready (" + label + ")", "talon up's cluster: every Machine Running with a Ready Node", seconds(took)})
	down("bench-1-2-" + rt)

	name := "bench-3-3-" + rt
	took = up(name, 3, 3, oldVersion)
	rows = append(rows, []string{"3 + 3 to Ready (" + label + ")", "same, 3 control-plane nodes joining etcd one by one", seconds(took)})
	took = upgradeControlPlane(ctx, b, p, name)
	rows = append(rows, []string{"rolling upgrade (" + label + ")", "3 control-plane nodes " + oldVersion + " -> " + newVersion + ", one at a time", seconds(took)})
	down(name)

	for _, m := range p.Managers() {
		for _, proc := range p.Processes() {
			if proc.Name != m.Name {
				continue
			}
			peak, err := proc.PeakMemory()
			if err != nil {
				b.Fatal(err)
			}
			what := "peak resident memory over the scenarios above"
			if rt == quickstart.RuntimeSim && m.Name == "talon-infrastructure" {
				what += " (hosts the simulated nodes' Talos API and etcd)"
			}
			rows = append(rows, []string{m.Name + " (" + label + ")", what, fmt.Sprintf("%d MiB", peak>>20)})
		}
	}
	return rows
}

// upgradeControlPlane changes the control plane's Kubernetes version and waits until every
// control-plane Machine has the new version, Running with a Ready Node.
func upgradeControlPlane(ctx context.Context, b *testing.B, p *plane.Plane, name string) time.Duration {
	b.Helper()
	c, err := p.Client(client.Options{Scheme: quickstart.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	return upgrade(ctx, b, c, name, &controlplanev1.TalosControlPlane{}, name+"-control-plane", fmt.Sprintf(`{"spec":{"version":%q}}`, newVersion), 3, true)
}

// configsPerSecond measures how many control-plane configs Talon renders and validates
// per second, as the bootstrap provider does for each Machine.
func configsPerSecond(b *testing.B) float64 {
	b.Helper()
	bundle, err := configgen.NewBundle("", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	cluster := configgen.Cluster{
		Name: "bench", Endpoint: configgen.Endpoint{Host: "10.5.0.2", Port: 6443}, KubernetesVersion: newVersion,
		PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"}, DNSDomain: "cluster.local",
	}
	m := configgen.Machine{
		Spec:     bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane},
		Hostname: "bench-cp-0", Mode: configgen.ModeContainer,
	}
	// testing.Benchmark cannot run inside a benchmark (they share one lock): a timed loop.
	start, n := time.Now(), 0
	for time.Since(start) < 3*time.Second {
		if _, err := configgen.Render(bundle, cluster, m); err != nil {
			b.Fatal(err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}

// rowLines joins each row's cells with tabs.
func rowLines(rows [][]string) []string {
	lines := make([]string, 0, len(rows))
	for _, row := range rows {
		lines = append(lines, strings.Join(row, "\t"))
	}
	return lines
}

// seconds formats d in seconds with one decimal.
func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
