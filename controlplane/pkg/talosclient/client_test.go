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

package talosclient_test

import (
	"cmp"
	"errors"
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestTalosUpgradeSteps drives the steps of a Talos upgrade through the client against a
// simulated bare-metal control-plane node of Talos 1.14.1: an installer without a version
// fails with its exit code and output and changes nothing; a good one installs v1.14.2, which
// the node runs only after Reboot, from a new boot.
func TestTalosUpgradeSteps(t *testing.T) {
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	g := NewWithT(t)
	ctx := t.Context()
	const address = "127.0.67.1"
	n, err := sim.NewNode(sim.Options{
		Address: address, StateDir: t.TempDir(), BinDir: envtest.BinDir(), Mode: configgen.ModeMetal,
		TalosVersion: "v1.14.1", RebootDelay: 500 * time.Millisecond, Log: testr.New(t),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Start(ctx, simtest.RenderFor(t, configgen.ModeMetal, bootstrapv1.GenerateTypeControlPlane, "cp-0", address))).To(Succeed())
	t.Cleanup(n.Stop)

	c, err := talosclient.NewFactory().New(ctx, simtest.Bundle(), address)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	var boot string
	g.Eventually(func() (err error) { boot, err = c.BootID(ctx); return err }, 30*time.Second, 500*time.Millisecond).Should(Succeed())
	g.Expect(c.Version(ctx)).To(Equal("v1.14.1"))

	const factory = "factory.example.com/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
	err = c.InstallUpgrade(ctx, factory+":latest")
	var installerErr *talosclient.InstallerError
	g.Expect(errors.As(err, &installerErr)).To(BeTrue(), "%v", err)
	g.Expect(installerErr.ExitCode).To(BeEquivalentTo(1))
	g.Expect(installerErr.Output).To(ContainElement(ContainSubstring("has no version tag")))
	g.Expect(installerErr.Output).To(ContainElement(MatchRegexp(`^running installer `+regexp.QuoteMeta(factory)+`@sha256:[0-9a-f]{64} `)),
		"the installer runs the image the pull pinned")
	g.Expect(err.Error()).To(ContainSubstring(address))

	// Talos answers a pull with the image pinned to its digest, and the client installs the
	// image by that name (an installer tag moved meanwhile would not change what runs).
	images := simtest.Client(t, simtest.Bundle(), address).ImageClient
	pull, err := images.Pull(ctx, &machine.ImageServicePullRequest{ImageRef: factory + ":v1.14.2"})
	if err == nil {
		_, err = pull.Recv()
	}
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument), "Talos serves no pull without a containerd namespace: %v", err)
	system := &common.ContainerdInstance{Driver: common.ContainerDriver_CRI, Namespace: common.ContainerdNamespace_NS_SYSTEM}
	pull, err = images.Pull(ctx, &machine.ImageServicePullRequest{Containerd: system, ImageRef: factory + ":v1.14.2"})
	g.Expect(err).NotTo(HaveOccurred())
	var pinned string
	for resp, err := pull.Recv(); !errors.Is(err, io.EOF); resp, err = pull.Recv() {
		g.Expect(err).NotTo(HaveOccurred())
		pinned = cmp.Or(resp.GetName(), pinned)
	}
	g.Expect(pinned).To(MatchRegexp("^" + regexp.QuoteMeta(factory) + "@sha256:[0-9a-f]{64}$"))

	g.Expect(c.InstallUpgrade(ctx, factory+":v1.14.2")).To(Succeed())
	g.Expect(c.Version(ctx)).To(Equal("v1.14.1"), "installed, not running before the reboot")
	g.Expect(c.BootID(ctx)).To(Equal(boot))
	g.Expect(c.Reboot(ctx)).To(Succeed())
	g.Eventually(func(g Gomega) {
		id, err := c.BootID(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(id).NotTo(Equal(boot), "a new boot")
		g.Expect(c.Version(ctx)).To(Equal("v1.14.2"))
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
}
