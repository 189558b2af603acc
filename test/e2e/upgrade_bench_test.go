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
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
)

// BenchmarkUpgradeInPlaceVsReplacement is make bench's side-by-side of one upgrade: a 3 + 2
// cluster on Docker (simulator image) taken from Kubernetes oldVersion to newVersion, control
// plane first and then the workers, once in place (TalosControlPlane InPlace, workers through
// Cluster API's in-place hooks) and once by replacement (RollingUpdate, the core manager's
// in-place gates off), on one management plane in one run. It prints the table and never
// fails on a timing. Run it with
// "go test -run '^$' -bench UpgradeInPlaceVsReplacement -benchtime 1x ./test/e2e/".
func BenchmarkUpgradeInPlaceVsReplacement(b *testing.B) {
	ctx := b.Context()
	bin, config := benchInputs(b)
	if err := dockertest.Available(ctx); err != nil {
		b.Skipf("Skipping: %v", err)
	}
	b.Setenv("HOME", b.TempDir())
	b.Setenv("TALON_SIM_IMAGE", dockertest.SimImage())
	dir := b.TempDir()
	p, err := plane.Start(ctx, plane.Options{Dir: filepath.Join(dir, "bench-plane"), BinDir: bin})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Remove(context.WithoutCancel(ctx)) }()
	if err := quickstart.InstallProviders(ctx, p, config, quickstart.RuntimeDocker, nil); err != nil {
		b.Fatal(err)
	}

	var rows [][]string
	for b.Loop() {
		rows = rows[:0]
		rows = append(rows, upgradeBoth(ctx, b, p, bin, config, dir, "bench-in-place", true))
		restartManager(b, p, "cluster-api", "--feature-gates=ClusterTopology=true")
		rows = append(rows, upgradeBoth(ctx, b, p, bin, config, dir, "bench-replace", false))
		restartManager(b, p, "cluster-api", quickstart.CAPIFeatureGates)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	lines := append([]string{"3 + 2, " + oldVersion + " -> " + newVersion + "\tcontrol plane\tworkers\ttotal\tMachines created",
		"------\t-------------\t-------\t-----\t----------------"}, rowLines(rows)...)
	_, _ = fmt.Fprintln(tw, strings.Join(lines, "\n"))
	_ = tw.Flush()
}

// upgradeBoth makes a 3 + 2 cluster called name at oldVersion, upgrades its control plane
// and then its MachineDeployment to newVersion (the control plane in place when inPlace),
// deletes it, and returns the table's row: both times, their sum and the Machines created.
func upgradeBoth(ctx context.Context, b *testing.B, p *plane.Plane, bin, config, dir, name string, inPlace bool) []string {
	b.Helper()
	if _, err := quickstart.Up(ctx, quickstart.Options{
		Name: name, Namespace: "default", ControlPlanes: 3, Workers: 2, KubernetesVersion: oldVersion,
		Runtime: quickstart.RuntimeDocker, Kubeconfig: p.Kubeconfig(), BinDir: bin, ClusterctlConfig: config, OutDir: dir,
		Timeout: 10 * time.Minute, Out: io.Discard,
	}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := quickstart.Down(ctx, quickstart.DownOptions{OutDir: dir, Name: name, Timeout: 5 * time.Minute, Out: io.Discard}); err != nil {
			b.Fatal(err)
		}
	}()
	c, err := p.Client(client.Options{Scheme: quickstart.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	before := machineNames(ctx, b, c, name)
	tcpPatch := fmt.Sprintf(`{"spec":{"version":%q}}`, newVersion)
	how := "by replacement"
	if inPlace {
		tcpPatch = fmt.Sprintf(`{"spec":{"version":%q,"rollout":{"strategy":{"type":"InPlace"}}}}`, newVersion)
		how = "in place"
	}
	controlPlane := upgrade(ctx, b, c, name, &controlplanev1.TalosControlPlane{}, name+"-control-plane", tcpPatch, 3, true)
	workers := upgrade(ctx, b, c, name, &clusterv1.MachineDeployment{}, name+"-workers",
		fmt.Sprintf(`{"spec":{"template":{"spec":{"version":%q}}}}`, newVersion), 5, false)
	created := 0
	for _, m := range machineNames(ctx, b, c, name) {
		if !slices.Contains(before, m) {
			created++
		}
	}
	b.Logf("3 + 2 upgraded %s: control plane %s, workers %s, %d Machines created", how, seconds(controlPlane), seconds(workers), created)
	return []string{how, seconds(controlPlane), seconds(workers), seconds(controlPlane + workers), fmt.Sprint(created)}
}

// upgrade merge-patches the object called objName of cluster name and waits until the
// cluster has machines Machines at newVersion (the control plane's only, when controlPlane)
// and is ready, returning how long that took.
func upgrade(ctx context.Context, b *testing.B, c client.Client, name string, obj client.Object, objName, patch string, machines int, controlPlane bool) time.Duration {
	b.Helper()
	obj.SetNamespace("default")
	obj.SetName(objName)
	start := time.Now()
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		b.Fatal(err)
	}
	labels := client.MatchingLabels{clusterv1.ClusterNameLabel: name}
	for {
		tree, err := quickstart.Describe(ctx, c, "default", name)
		if err != nil {
			b.Fatal(err)
		}
		list := &clusterv1.MachineList{}
		if err := c.List(ctx, list, client.InNamespace("default"), labels); err != nil {
			b.Fatal(err)
		}
		upgraded, total := 0, 0
		for _, m := range list.Items {
			if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; controlPlane && !cp {
				continue
			}
			total++
			if _, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]; m.Spec.Version == newVersion && !updating {
				upgraded++
			}
		}
		if upgraded == machines && total == machines && tree.Ready() {
			return time.Since(start)
		}
		if time.Since(start) > 15*time.Minute {
			b.Fatalf("%s not upgraded after 15 minutes:\n%s", objName, tree)
		}
		time.Sleep(time.Second)
	}
}

// machineNames are the names of cluster name's Machines.
func machineNames(ctx context.Context, b *testing.B, c client.Client, name string) []string {
	b.Helper()
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		b.Fatal(err)
	}
	return clusters.Names(list.Items)
}
