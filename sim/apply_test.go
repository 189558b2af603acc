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

package sim_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosclient "github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestApplyModesFollowTheTalosVersion applies a change Talos 1.13 can only apply with a
// reboot (machine.env) in each mode, to a node of each version, through the Talos API client.
// A Talos 1.13 node refuses it without a reboot and reboots for it in auto mode; a Talos 1.14
// node (which dropped the check, 995bc30d5 "feat: drop apply config method reboot") applies it
// at once in no_reboot and auto mode, does not reboot, and refuses the reboot mode. A 1.13.3
// node refuses applies once one started a reboot; on 1.14 a dry run keeps a tried config.
func TestApplyModesFollowTheTalosVersion(t *testing.T) {
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	for i, version := range []string{"v1.13.3", "v1.14.1"} {
		t.Run(version, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			address := fmt.Sprintf("127.0.46.%d", i+1)
			n, err := sim.NewNode(sim.Options{
				Address: address, StateDir: t.TempDir(), BinDir: envtest.BinDir(), RebootDelay: 500 * time.Millisecond,
				TalosVersion: version, Log: testr.NewWithOptions(t, testr.Options{Verbosity: 1}),
			})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Start(ctx, nil)).To(Succeed())
			t.Cleanup(n.Stop)
			withEnv := func(value string) []byte {
				return simtest.Render(t, bootstrapv1.GenerateTypeControlPlane, "cp-0", address, bootstrapv1.ConfigPatch{
					Op: "add", Path: "/machine/env", Value: &apiextensionsv1.JSON{Raw: []byte(`{"TALON_TEST":"` + value + `"}`)},
				})
			}
			_, err = simtest.MaintenanceClient(t, address).ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: withEnv("initial")})
			g.Expect(err).NotTo(HaveOccurred())
			talos := simtest.Client(t, simtest.Bundle(), address)
			g.Eventually(func() error { _, err := bootID(ctx, talos); return err }, 30*time.Second, 500*time.Millisecond).Should(Succeed())
			apply := func(value string, mode machine.ApplyConfigurationRequest_Mode) (*machine.ApplyConfiguration, error) {
				resp, err := talos.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: withEnv(value), Mode: mode})
				if err != nil {
					return nil, err
				}
				return resp.Messages[0], nil
			}
			boot, err := bootID(ctx, talos)
			g.Expect(err).NotTo(HaveOccurred())
			// rebooted waits until the node answers from another boot, and returns that boot.
			rebooted := func() string {
				var next string
				g.Eventually(func() (string, error) { var err error; next, err = bootID(ctx, talos); return next, err }, time.Minute, 500*time.Millisecond).
					ShouldNot(Equal(boot))
				return next
			}

			if version == "v1.13.3" {
				_, err := apply("first", machine.ApplyConfigurationRequest_NO_REBOOT)
				g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
				g.Expect(err.Error()).To(ContainSubstring("this config change can't be applied in immediate mode"))

				resp, err := apply("second", machine.ApplyConfigurationRequest_AUTO)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(resp.Mode).To(Equal(machine.ApplyConfigurationRequest_REBOOT))
				g.Expect(resp.ModeDetails).To(HavePrefix("Applied configuration with a reboot: this config change can't be applied in immediate mode"))
				// Talos 1.13.3 refuses every apply from then until the node has rebooted.
				_, err = apply("staged", machine.ApplyConfigurationRequest_STAGED)
				g.Expect(status.Code(err)).To(Equal(codes.FailedPrecondition))
				g.Expect(err.Error()).To(ContainSubstring("configuration was already applied and node is rebooting, cannot apply more configuration changes until next reboot"))
				boot = rebooted()

				resp, err = apply("third", machine.ApplyConfigurationRequest_REBOOT)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(resp.Mode).To(Equal(machine.ApplyConfigurationRequest_REBOOT))
				rebooted()
				return
			}

			resp, err := apply("first", machine.ApplyConfigurationRequest_NO_REBOOT)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.ModeDetails).To(Equal("Applied configuration without a reboot"))

			resp, err = apply("second", machine.ApplyConfigurationRequest_AUTO)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.Mode).To(Equal(machine.ApplyConfigurationRequest_NO_REBOOT))
			g.Expect(resp.ModeDetails).To(Equal("Applied configuration without a reboot"))

			_, err = apply("third", machine.ApplyConfigurationRequest_REBOOT)
			g.Expect(status.Code(err)).To(Equal(codes.Unimplemented))
			g.Expect(err.Error()).To(ContainSubstring("the REBOOT mode is not supported, please use AUTO or NO_REBOOT modes instead"))

			g.Consistently(func() (string, error) { return bootID(ctx, talos) }, 3*time.Second, 500*time.Millisecond).Should(Equal(boot),
				"the node did not reboot")
			applied := func() string {
				cfg, err := talos.Read(ctx, "/system/state/config.yaml")
				g.Expect(err).NotTo(HaveOccurred())
				data, err := io.ReadAll(cfg)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cfg.Close()).To(Succeed())
				return string(data)
			}
			g.Expect(applied()).To(ContainSubstring("TALON_TEST: second"), "the auto apply took effect at once")

			// A config applied in try mode is kept once a request in another mode comes, even a
			// dry run: Talos cancels the rollback before it looks at the request.
			_, err = talos.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{
				Data: withEnv("tried"), Mode: machine.ApplyConfigurationRequest_TRY, TryModeTimeout: durationpb.New(2 * time.Second),
			})
			g.Expect(err).NotTo(HaveOccurred())
			_, err = talos.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: withEnv("dry"), Mode: machine.ApplyConfigurationRequest_NO_REBOOT, DryRun: true})
			g.Expect(err).NotTo(HaveOccurred())
			g.Consistently(applied, 3*time.Second, 500*time.Millisecond).Should(ContainSubstring("TALON_TEST: tried"), "the tried config is not rolled back")

			// A second try replaces the first one's rollback and, when its own runs out, puts
			// back the first try's config.
			try := func(value string, timeout time.Duration) {
				_, err := talos.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{
					Data: withEnv(value), Mode: machine.ApplyConfigurationRequest_TRY, TryModeTimeout: durationpb.New(timeout),
				})
				g.Expect(err).NotTo(HaveOccurred())
			}
			try("first try", time.Second)
			try("second try", 3*time.Second)
			g.Consistently(applied, 2*time.Second, 250*time.Millisecond).Should(ContainSubstring("TALON_TEST: second try"), "the first try's rollback was cancelled")
			g.Eventually(applied, 5*time.Second, 250*time.Millisecond).Should(ContainSubstring("TALON_TEST: first try"), "the second try rolled back to the first")
		})
	}
}

// bootID is the node's boot ID, which a reboot changes, read as talosctl reads it.
func bootID(ctx context.Context, c *talosclient.Client) (string, error) {
	r, err := c.Read(ctx, "/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	data, err := io.ReadAll(r)
	if closeErr := r.Close(); err == nil {
		err = closeErr
	}
	return strings.TrimSpace(string(data)), err
}
