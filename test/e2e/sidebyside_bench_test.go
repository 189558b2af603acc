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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	dockertest "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
)

// talonControlPlaneGVK is Talon's TalosControlPlane.
var talonControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta1", Kind: "TalosControlPlane"}

// contender is one set of bootstrap and control-plane providers in the side-by-side table,
// on a management plane of its own with Cluster API and Talon's Docker infrastructure.
type contender struct {
	name     string
	plane    *plane.Plane
	client   client.Client
	template []string
	gvk      schema.GroupVersionKind
}

// BenchmarkSideBySide is make bench's comparison of Talon's providers with Sidero Labs'
// (CABPT v0.6.12 + CACPPT v0.5.13) on the same infrastructure (Talon's Docker provider and
// the simulator image), each scenario run with one and then the other: a 1 + 2 cluster to
// Ready, its control plane scaled 1 -> 3, a 3 + 3 cluster to Ready, and a rolling change of
// its 3 control-plane nodes' Kubernetes patch version. "Ready" is the same for both: every
// Machine Running with a Ready Node and a Ready condition, none being deleted. It prints the
// table (Talon, Sidero, Sidero/Talon); it never fails on a timing. Run it with
// "go test -run '^$' -bench SideBySide -benchtime 1x ./test/e2e/".
func BenchmarkSideBySide(b *testing.B) {
	ctx := b.Context()
	bin, err := binDir()
	if err != nil {
		b.Skipf("Skipping: %v", err)
	}
	if err := dockertest.Available(ctx); err != nil {
		b.Skipf("Skipping: the side-by-side scenarios run on Docker: %v", err)
	}
	out := filepath.Join(envtest.RepoRoot(), "out")
	for _, f := range []string{"clusterctl.yaml", "clusterctl-sidero.yaml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			b.Skipf("Skipping: %s is missing: run 'make release-manifests' first", filepath.Join(out, f))
		}
	}
	b.Setenv("HOME", b.TempDir())
	b.Setenv("TALON_SIM_IMAGE", dockertest.SimImage())

	talonConfig := filepath.Join(out, "clusterctl.yaml")
	contenders := []*contender{
		{name: "Talon", template: []string{"--config", talonConfig, "--infrastructure", "talon"}, gvk: talonControlPlaneGVK},
		{name: "Sidero", template: sideroTemplate(), gvk: sideroControlPlaneGVK},
	}
	dir := b.TempDir()
	for _, ct := range contenders {
		p, err := plane.Start(ctx, plane.Options{Dir: filepath.Join(dir, strings.ToLower(ct.name)+"-plane"), BinDir: bin})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Remove(context.WithoutCancel(ctx)) })
		install := quickstart.InstallProviders
		config := talonConfig
		if ct.name == "Sidero" {
			install, config = quickstart.InstallSideroProviders, filepath.Join(out, "clusterctl-sidero.yaml")
		}
		if err := install(ctx, p, config, quickstart.RuntimeDocker, nil); err != nil {
			b.Fatal(err)
		}
		if ct.client, err = p.Client(client.Options{Scheme: quickstart.Scheme}); err != nil {
			b.Fatal(err)
		}
		ct.plane = p
	}

	const ns = "default"
	var rows [][]string
	// measure runs step for each contender in turn (its cluster called name-<contender>) and
	// adds a row with the times and their ratio.
	measure := func(scenario, name string, step func(ct *contender, cluster string) error) {
		took := make([]time.Duration, len(contenders))
		for i, ct := range contenders {
			cluster := name + "-" + strings.ToLower(ct.name)
			b.Cleanup(func() { dockertest.RemoveLabelled(b, map[string]string{dockerruntime.LabelCluster: cluster}) })
			start := time.Now()
			if err := step(ct, cluster); err != nil {
				b.Fatalf("%s with %s's providers: %v", scenario, ct.name, err)
			}
			took[i] = time.Since(start)
			b.Logf("%s with %s's providers: %s", scenario, ct.name, seconds(took[i]))
		}
		rows = append(rows, []string{scenario, seconds(took[0]), seconds(took[1]), fmt.Sprintf("%.2f", took[1].Seconds()/took[0].Seconds())})
	}
	create := func(cps, workers int, version string) func(ct *contender, cluster string) error {
		return func(ct *contender, cluster string) error {
			if err := createCluster(ctx, bin, ct.plane.Kubeconfig(), ct.client, ct.template, ns, cluster, cps, workers, version, io.Discard); err != nil {
				return err
			}
			return waitSettled(ctx, ct.client, ns, cluster, cps, workers, version)
		}
	}
	change := func(spec map[string]any, cps, workers int, version string) func(ct *contender, cluster string) error {
		return func(ct *contender, cluster string) error {
			if err := patchControlPlane(ctx, ct.client, ct.gvk, ns, cluster, spec); err != nil {
				return err
			}
			return waitSettled(ctx, ct.client, ns, cluster, cps, workers, version)
		}
	}

	for b.Loop() {
		rows = rows[:0]
		measure("1 + 2 to Ready", "sbs-small", create(1, 2, sideroVersion))
		measure("control plane 1 -> 3", "sbs-small", change(map[string]any{"replicas": int64(3)}, 3, 2, sideroVersion))
		for _, ct := range contenders {
			if err := deleteCluster(ctx, ct.client, ns, "sbs-small-"+strings.ToLower(ct.name)); err != nil {
				b.Fatal(err)
			}
		}
		measure("3 + 3 to Ready", "sbs-large", create(3, 3, sideroVersion))
		measure("rolling "+sideroVersion+" -> "+sideroNextVersion, "sbs-large",
			change(map[string]any{"version": sideroNextVersion}, 3, 3, sideroNextVersion))
		for _, ct := range contenders {
			if err := deleteCluster(ctx, ct.client, ns, "sbs-large-"+strings.ToLower(ct.name)); err != nil {
				b.Fatal(err)
			}
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	lines := append([]string{"scenario (Docker, simulator image)\tTalon\tSidero\tSidero/Talon", "---------------------------------\t-----\t------\t------------"}, rowLines(rows)...)
	_, _ = fmt.Fprintln(tw, strings.Join(lines, "\n"))
	_ = tw.Flush()
}

// waitSettled waits up to 15 minutes until settled holds.
func waitSettled(ctx context.Context, c client.Client, ns, name string, cps, workers int, version string) error {
	return waitFor(ctx, 15*time.Minute, func() error { return settled(ctx, c, ns, name, cps, workers, version) })
}

// waitFor polls check every second until it returns nil, and returns its last error once
// timeout has passed.
func waitFor(ctx context.Context, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still not done after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// settled is nil once the cluster has exactly cps control-plane Machines of version and
// workers other Machines, each Running with a Node and Ready, none being deleted; otherwise
// it says what is missing.
func settled(ctx context.Context, c client.Client, ns, name string, cps, workers int, version string) error {
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return err
	}
	var problems []error
	gotCPs, gotWorkers := 0, 0
	for i := range list.Items {
		m := &list.Items[i]
		_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
		switch {
		case !m.DeletionTimestamp.IsZero():
			problems = append(problems, fmt.Errorf("machine %s is being deleted", m.Name))
		case m.Status.Phase != string(clusterv1.MachinePhaseRunning) || !m.Status.NodeRef.IsDefined() || !conditions.IsTrue(m, clusterv1.ReadyCondition):
			problems = append(problems, fmt.Errorf("machine %s is %s, not Running with a Ready Node", m.Name, m.Status.Phase))
		case cp && m.Spec.Version != version:
			problems = append(problems, fmt.Errorf("machine %s has version %s", m.Name, m.Spec.Version))
		}
		if cp {
			gotCPs++
		} else {
			gotWorkers++
		}
	}
	if gotCPs != cps || gotWorkers != workers {
		problems = append(problems, fmt.Errorf("%d control-plane and %d worker Machines, want %d and %d", gotCPs, gotWorkers, cps, workers))
	}
	return errors.Join(problems...)
}

// deleteCluster deletes the Cluster and waits until it is gone with its Machines.
func deleteCluster(ctx context.Context, c client.Client, ns, name string) error {
	cluster := &clusterv1.Cluster{}
	cluster.Namespace, cluster.Name = ns, name
	if err := client.IgnoreNotFound(c.Delete(ctx, cluster)); err != nil {
		return err
	}
	return waitFor(ctx, 5*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return client.IgnoreNotFound(err)
		}
		return fmt.Errorf("cluster %s/%s is still being deleted", ns, name)
	})
}
