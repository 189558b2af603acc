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
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestClusterOneProcessPerNode runs the cluster scenario of the simulator (three
// control-plane nodes and a worker, see simtest.Scenario) with each node in its own
// `talon sim` process, the placement containers and network namespaces use. Then it cuts a
// node off through the faults endpoint of its process and heals it.
func TestClusterOneProcessPerNode(t *testing.T) {
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	g := NewWithT(t)
	ctx := t.Context()
	talon := filepath.Join(buildCommands(t), "talon")
	controlPlanes, workers := []string{"127.0.44.1", "127.0.44.2", "127.0.44.3"}, []string{"127.0.44.4"}
	nodes := map[string]*process{}
	for _, address := range []string{"127.0.44.1", "127.0.44.2", "127.0.44.3", "127.0.44.4"} {
		nodes[address] = startProcess(t, talon, []string{"PLATFORM=container"},
			"sim", "--address", address, "--state-dir", t.TempDir(), "--bin-dir", envtest.BinDir(),
			"--control-address", address+":50080")
	}
	simtest.Scenario(t, controlPlanes, workers)

	t.Log("The faults endpoint of a node's process partitions it and heals it")
	worker := simtest.Client(t, simtest.Bundle(), workers[0])
	fault := func(name string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+workers[0]+":50080/"+name, http.NoBody)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}
	versionErr := func() error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := worker.Version(ctx)
		return err
	}
	g.Expect(versionErr()).To(Succeed())
	fault("partition")
	g.Expect(status.Code(versionErr())).To(Equal(codes.DeadlineExceeded))
	fault("heal")
	g.Eventually(versionErr, 10*time.Second, 200*time.Millisecond).Should(Succeed())

	for _, address := range []string{"127.0.44.1", "127.0.44.2", "127.0.44.3", "127.0.44.4"} {
		nodes[address].terminate(t)
	}
}
