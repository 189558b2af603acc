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
	"io"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
)

func renderControlPlane(t *testing.T, hostname, endpoint string) []byte {
	t.Helper()
	return simtest.Render(t, bootstrapv1.GenerateTypeControlPlane, hostname, endpoint)
}

func startNode(t *testing.T, address string, userData []byte) *sim.Node {
	t.Helper()
	n, err := sim.NewNode(sim.Options{Address: address, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context(), userData); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

func code(err error) codes.Code { return status.Code(err) }

// TestMaintenanceModeAndConfigIntake: a node without a config answers only Version and
// ApplyConfiguration, refuses an invalid config with machinery's reason and stays as it
// was, and takes a valid one.
func TestMaintenanceModeAndConfigIntake(t *testing.T) {
	g := NewWithT(t)
	const address = "127.0.42.1"
	startNode(t, address, nil)
	c := simtest.MaintenanceClient(t, address)
	ctx := t.Context()

	v, err := c.Version(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Messages[0].Version.Tag).To(Equal(sim.DefaultTalosVersion))

	// Maintenance mode makes every caller a reader, as Talos' apid does; Bootstrap needs admin.
	g.Expect(code(c.Bootstrap(ctx, &machine.BootstrapRequest{}))).To(Equal(codes.PermissionDenied))

	_, err = c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: []byte("machine:\n  type: nonsense\n")})
	g.Expect(code(err)).To(Equal(codes.InvalidArgument))
	g.Expect(err.Error()).To(ContainSubstring("the machine config is not valid"))
	_, err = c.Version(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "the node is still in maintenance mode")

	_, err = c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: renderControlPlane(t, "cp-1", address)})
	g.Expect(err).NotTo(HaveOccurred())

	admin := simtest.Client(t, simtest.Bundle(), address)
	v, err = admin.Version(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Messages[0].Metadata).To(BeNil(), "a node's own reply names no node, as machined's does")
	g.Expect(simtest.ServedNames(ctx, address)).To(ContainElement("cp-1"))
}

// TestTalosVersionDecidesWhichDocumentsLoad: a node running Talos v1.13 refuses a config of
// the v1.14 contract, as Talos v1.13 does (its config loader has not registered the v1.14
// document kinds), and stays in maintenance mode; a config of the v1.13 contract it takes.
// A v1.14 node takes the v1.14 config.
func TestTalosVersionDecidesWhichDocumentsLoad(t *testing.T) {
	render := func(talosVersion, endpoint string) []byte {
		data, err := configgen.Render(simtest.Bundle(), configgen.Cluster{
			Name: "sim", Endpoint: configgen.Endpoint{Host: endpoint, Port: 6443}, KubernetesVersion: simtest.KubernetesVersion,
		}, configgen.Machine{
			Spec:     bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: talosVersion},
			Hostname: "cp-1", Mode: configgen.ModeContainer,
		})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	g := NewWithT(t)
	ctx := t.Context()

	const old = "127.0.42.11"
	n, err := sim.NewNode(sim.Options{Address: old, StateDir: t.TempDir(), TalosVersion: "v1.13.3"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Start(ctx, nil)).To(Succeed())
	t.Cleanup(n.Stop)
	c := simtest.MaintenanceClient(t, old)
	_, err = c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: render("v1.14", old)})
	g.Expect(code(err)).To(Equal(codes.InvalidArgument))
	g.Expect(err.Error()).To(MatchRegexp(`error decoding document v1alpha1/\w+/\w*: "\w+" "v1alpha1": not registered`))
	v, err := c.Version(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "the node is still in maintenance mode")
	g.Expect(v.Messages[0].Version.Tag).To(Equal("v1.13.3"))
	_, err = c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: render("v1.13", old)})
	g.Expect(err).NotTo(HaveOccurred())

	const current = "127.0.42.12"
	startNode(t, current, nil)
	c = simtest.MaintenanceClient(t, current)
	v, err = c.Version(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Messages[0].Version.Tag).To(Equal("v1.14.1"))
	_, err = c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: render("v1.14", current)})
	g.Expect(err).NotTo(HaveOccurred())
}

// TestBootstrapEtcdAndAuthorization: bootstrap starts a real etcd member once; roles, other
// clusters' certificates and a second bootstrap are refused with Talos' codes; a snapshot is
// a real etcd snapshot.
func TestBootstrapEtcdAndAuthorization(t *testing.T) {
	g := NewWithT(t)
	const address = "127.0.42.2"
	startNode(t, address, renderControlPlane(t, "cp-2", address))
	ctx := t.Context()
	admin := simtest.Client(t, simtest.Bundle(), address)

	reader := simtest.Client(t, simtest.Bundle(), address, role.Reader)
	_, err := reader.Version(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "a reader may read")
	g.Expect(code(reader.Bootstrap(ctx, &machine.BootstrapRequest{}))).To(Equal(codes.PermissionDenied))

	otherBundle, err := configgen.NewBundle("", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	// The stranger trusts this node's CA, so the refusal can only come from the node
	// checking the client certificate.
	stranger := simtest.ClientWithCert(t, simtest.Bundle(), otherBundle, address)
	_, err = stranger.Version(ctx)
	g.Expect(err).To(HaveOccurred(), "a client certificate from another cluster's CA is refused")
	// The node ends the handshake: the client sees a bad-certificate alert or the closed
	// connection, depending on timing.
	g.Expect(code(err)).To(Equal(codes.Unavailable))

	g.Expect(admin.Bootstrap(ctx, &machine.BootstrapRequest{})).To(Succeed())
	g.Expect(code(admin.Bootstrap(ctx, &machine.BootstrapRequest{}))).To(Equal(codes.AlreadyExists))

	members, err := admin.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members.Messages[0].Members).To(ConsistOf(HaveField("Hostname", "cp-2")))

	st, err := admin.EtcdStatus(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Messages[0].MemberStatus.Leader).To(Equal(members.Messages[0].Members[0].Id))

	snapshot, err := admin.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	data, err := io.ReadAll(snapshot)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(data)).To(BeNumerically(">", 1024), "a real bbolt snapshot")
}

// TestRestartKeepsConfigAndEtcd stops a bootstrapped node and starts it again on the same
// state: it comes back configured, with its etcd member, without a new Bootstrap.
func TestRestartKeepsConfigAndEtcd(t *testing.T) {
	g := NewWithT(t)
	const address = "127.0.42.3"
	ctx := t.Context()
	state := t.TempDir()
	first, err := sim.NewNode(sim.Options{Address: address, StateDir: state})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Start(ctx, renderControlPlane(t, "cp-3", address))).To(Succeed())
	admin := simtest.Client(t, simtest.Bundle(), address)
	g.Expect(admin.Bootstrap(ctx, &machine.BootstrapRequest{})).To(Succeed())
	first.Stop()

	second, err := sim.NewNode(sim.Options{Address: address, StateDir: state})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.Start(ctx, nil)).To(Succeed())
	t.Cleanup(second.Stop)
	again := simtest.Client(t, simtest.Bundle(), address)
	g.Eventually(func(g Gomega) {
		members, err := again.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(members.Messages[0].Members).To(ConsistOf(HaveField("Hostname", "cp-3")))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(code(again.Bootstrap(ctx, &machine.BootstrapRequest{}))).To(Equal(codes.AlreadyExists))
}
