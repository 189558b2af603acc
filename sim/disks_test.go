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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/api/storage"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc/codes"

	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
)

// TestDataDisks: a node's data disks are listed beside its system disk and wiped only when a
// wipe names them, with Talos' checks and codes: in maintenance mode any caller may wipe a
// disk; once the node is installed only an admin, never a disk it runs from, and a reset
// wipes the user disks it names and keeps the rest.
func TestDataDisks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	const address = "127.0.42.31"
	disks := t.TempDir()
	hasData := func(disk string) bool {
		entries, err := os.ReadDir(filepath.Join(disks, disk))
		g.Expect(err).NotTo(HaveOccurred())
		return len(entries) > 0
	}
	for _, disk := range []string{"sdb", "sdc", "sdd"} {
		g.Expect(os.MkdirAll(filepath.Join(disks, disk, "lost+found"), 0o700)).To(Succeed())
	}
	stateDir := t.TempDir()
	n, err := sim.NewNode(sim.Options{Address: address, StateDir: stateDir, DisksDir: disks})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Start(ctx, nil)).To(Succeed())
	t.Cleanup(n.Stop)

	// Maintenance mode: every disk listed, none the system disk, no volume on any.
	c := simtest.MaintenanceClient(t, address)
	list, err := c.Disks(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Messages[0].Disks).To(ConsistOf(
		And(HaveField("DeviceName", "/dev/sda"), HaveField("SystemDisk", false)),
		And(HaveField("DeviceName", "/dev/sdb"), HaveField("SystemDisk", false), HaveField("Type", storage.Disk_SSD)),
		HaveField("DeviceName", "/dev/sdc"), HaveField("DeviceName", "/dev/sdd"),
	))
	_, err = safe.StateGetByID[*block.SystemDisk](ctx, c.COSI, block.SystemDiskID)
	g.Expect(state.IsNotFoundError(err)).To(BeTrue(), "no system disk before an install: %v", err)
	sdb, err := safe.StateGetByID[*block.Disk](ctx, c.COSI, "sdb")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sdb.TypedSpec().BusPath).NotTo(Equal("/virtual"))

	err = c.BlockDeviceWipe(ctx, &storage.BlockDeviceWipeRequest{Devices: []*storage.BlockDeviceWipeDescriptor{{Device: "sdb"}, {Device: "sdz"}}})
	g.Expect(code(err)).To(Equal(codes.NotFound))
	g.Expect(err.Error()).To(ContainSubstring(`blockdevice "sdz" not found`))
	g.Expect(hasData("sdb")).To(BeTrue(), "nothing is wiped when one device is refused")
	err = c.BlockDeviceWipe(ctx, &storage.BlockDeviceWipeRequest{Devices: []*storage.BlockDeviceWipeDescriptor{{Device: "sdb", Method: 7}}})
	g.Expect(code(err)).To(Equal(codes.InvalidArgument))
	g.Expect(c.BlockDeviceWipe(ctx, &storage.BlockDeviceWipeRequest{Devices: []*storage.BlockDeviceWipeDescriptor{{Device: "sdb"}}})).To(Succeed())
	g.Expect(hasData("sdb")).To(BeFalse(), "the maintenance-mode wipe emptied sdb")
	g.Expect(hasData("sdc")).To(BeTrue())

	// Installed: sda is the system disk, its partitions hold volumes.
	_, err = c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: renderControlPlane(t, "cp-31", address)})
	g.Expect(err).NotTo(HaveOccurred())
	admin := simtest.Client(t, simtest.Bundle(), address)
	g.Eventually(func(g Gomega) {
		list, err = admin.Disks(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.Messages[0].Disks).To(ContainElement(And(HaveField("DeviceName", "/dev/sda"), HaveField("SystemDisk", true))))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	reader := simtest.Client(t, simtest.Bundle(), address, role.Reader)
	err = reader.BlockDeviceWipe(ctx, &storage.BlockDeviceWipeRequest{Devices: []*storage.BlockDeviceWipeDescriptor{{Device: "sdc"}}})
	g.Expect(code(err)).To(Equal(codes.PermissionDenied), "readers wipe in maintenance mode only")
	for device, volume := range map[string]string{"sda": `blockdevice "sda" is in use by volume`, "sda3": `blockdevice "sda3" is in use by volume "EPHEMERAL"`} {
		err = admin.BlockDeviceWipe(ctx, &storage.BlockDeviceWipeRequest{Devices: []*storage.BlockDeviceWipeDescriptor{{Device: device}}})
		g.Expect(code(err)).To(Equal(codes.FailedPrecondition), device)
		g.Expect(err.Error()).To(ContainSubstring(volume))
	}

	for disk, refusal := range map[string]string{"/dev/sda": "device /dev/sda is the system disk", "/dev/sdz": "device /dev/sdz wasn't found"} {
		err = admin.ResetGeneric(ctx, &machine.ResetRequest{UserDisksToWipe: []string{"/dev/sdc", disk}})
		g.Expect(err).To(MatchError(ContainSubstring(refusal)))
	}
	err = admin.ResetGeneric(ctx, &machine.ResetRequest{UserDisksToWipe: []string{"/dev/sdc"}, Mode: machine.ResetRequest_SYSTEM_DISK})
	g.Expect(err).To(MatchError(ContainSubstring("wipe mode SYSTEM_DISK doesn't support UserDisksToWipe parameter")))
	g.Expect(hasData("sdc")).To(BeTrue(), "a refused reset wipes nothing")

	// A reset of the user disks only: sdc is wiped, the config and sdd stay.
	g.Expect(admin.ResetGeneric(ctx, &machine.ResetRequest{UserDisksToWipe: []string{"/dev/sdc"}, Mode: machine.ResetRequest_USER_DISKS})).To(Succeed())
	g.Eventually(func() bool { return hasData("sdc") }).WithTimeout(30 * time.Second).Should(BeFalse())
	g.Expect(hasData("sdd")).To(BeTrue())
	g.Expect(filepath.Join(stateDir, "config.yaml")).To(BeARegularFile())
}
