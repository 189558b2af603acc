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
	"encoding/base64"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosclient "github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/test/envtest"
)

// TestTalonSimProcess runs a simulated node as its own process, booted from USERDATA like
// the Talos container image, and drives it with machinery's client: the one-node-per-process
// placement that containers and network namespaces use.
func TestTalonSimProcess(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	const address = "127.0.44.1"
	bundle, err := configgen.NewBundle("", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	config, err := configgen.Render(bundle, configgen.Cluster{
		Name: "proc", Endpoint: configgen.Endpoint{Host: address, Port: 6443}, KubernetesVersion: "v1.36.3",
	}, configgen.Machine{Spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane}, Hostname: "proc-cp", Mode: configgen.ModeContainer})
	g.Expect(err).NotTo(HaveOccurred())

	node := startProcess(t, filepath.Join(buildCommands(t), "talon"),
		[]string{"PLATFORM=container", "USERDATA=" + base64.StdEncoding.EncodeToString(config)},
		"sim", "--address", address, "--state-dir", t.TempDir(), "--bin-dir", envtest.BinDir())

	tc, err := configgen.NewTalosconfig(bundle, "proc", []string{address}, time.Now(), time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientconfig.FromBytes(tc.Data)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := talosclient.New(ctx, talosclient.WithConfig(cfg))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close() }()

	g.Eventually(func(g Gomega) {
		v, err := c.Version(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.Messages[0].Metadata.Hostname).To(Equal("proc-cp"), "booted from USERDATA")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(c.Bootstrap(ctx, &machine.BootstrapRequest{})).To(Succeed())
	members, err := c.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members.Messages[0].Members).To(ConsistOf(HaveField("Hostname", "proc-cp")))

	node.terminate(t)
}
