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

package docker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	testdocker "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// BenchmarkClusterUp measures the time from applying a cluster of one control-plane and two
// worker Machines to all three Running (Nodes linked), on each runtime, through Cluster API's
// core reconcilers and Talon's three providers. Reported as s/cluster; deletion is not timed.
//
//	go test ./infrastructure/docker/ -run '^$' -bench ClusterUp -benchtime 2x
func BenchmarkClusterUp(b *testing.B) {
	env := envtest.Get(b)
	b.Run("sim", func(b *testing.B) {
		rt := runtime.NewSim(b.Context(), envtest.BinDir(), b.TempDir(), logr.Discard())
		benchmarkClusterUp(b, env, rt, "127.0.71.0/24", "")
	})
	b.Run("docker", func(b *testing.B) {
		require.Layer(b, testdocker.Layer, testdocker.Available(b.Context()))
		var opts []runtime.DockerOption
		if !testdocker.CanRunPrivileged(b.Context()) {
			opts = append(opts, runtime.WithUnprivilegedNodes())
		}
		rt, err := runtime.NewDocker(opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rt.Close() })
		testdocker.RemoveLabelled(b, map[string]string{runtime.LabelCluster: "bench"})
		benchmarkClusterUp(b, env, rt, "172.30.125.0/24", testdocker.SimImage())
	})
}

func benchmarkClusterUp(b *testing.B, env *envtest.Environment, rt runtime.Runtime, subnet, image string) {
	b.Helper()
	startProviders(b, env, rt, image)
	var total time.Duration
	i := 0
	for b.Loop() {
		s := clusterSpec{
			name: "bench", namespace: env.NewNamespace(b, fmt.Sprintf("bench-%s-%d", rt.Name(), i)),
			subnet: subnet, image: image, controlPlanes: 1, workers: 2,
		}
		i++
		start := time.Now()
		createCluster(b, env.Client, s)
		waitForRunning(b, env.Client, s, 3)
		total += time.Since(start)
		b.StopTimer()
		deleteCluster(b, env.Client, rt, s)
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(i), "s/cluster")
	b.ReportMetric(0, "ns/op")
}
