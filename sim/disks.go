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

package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/storage"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// This file is the node's disks as Talos' block controllers report them (Disk, SystemDisk and
// the system volumes) and its StorageService lists and wipes them: the system disk sda, whose
// contents are the state directory, and the data disks of Options.DisksDir.

const (
	// systemDiskID is the simulated node's system disk.
	systemDiskID = "sda"
	// simDiskSize is the size of the system disk a simulated node reports.
	simDiskSize = 20 << 30
	// dataDiskSize is the size of each data disk.
	dataDiskSize = 100 << 30
)

// dataDisks returns the names of the node's data disks, the subdirectories of DisksDir.
func (n *Node) dataDisks() []string {
	if n.opts.DisksDir == "" {
		return nil
	}
	entries, err := os.ReadDir(n.opts.DisksDir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != systemDiskID {
			names = append(names, e.Name())
		}
	}
	return names
}

// publishDisks reports the node's disks as Talos' disks controller does: the system disk and
// every data disk, each on a virtio bus of its own.
func (n *Node) publishDisks() {
	for i, name := range append([]string{systemDiskID}, n.dataDisks()...) {
		size, model, serial := uint64(simDiskSize), "talon-sim disk", "talon-sim-"+n.opts.Address
		if name != systemDiskID {
			size, model, serial = dataDiskSize, "talon-sim data disk", serial+"-"+name
		}
		publish(n, block.NewDisk(block.NamespaceName, name), func(d *block.Disk) {
			spec := d.TypedSpec()
			spec.DevPath, spec.Model, spec.Serial, spec.Transport = "/dev/"+name, model, serial, "virtio"
			spec.BusPath = fmt.Sprintf("/pci0000:00/0000:00:%02x.0/virtio%d", 5+i, 2+i)
			spec.SetSize(size)
			spec.IOSize, spec.SectorSize, spec.SubSystem = 512, 512, "/sys/class/block"
		})
	}
}

// publishInstalled reports what Talos finds on an installed system disk: which disk it is and
// its partitions. A node in maintenance mode booted from the network has neither.
func (n *Node) publishInstalled() {
	publish(n, block.NewSystemDisk(block.NamespaceName, block.SystemDiskID), func(d *block.SystemDisk) {
		d.TypedSpec().DiskID, d.TypedSpec().DevPath = systemDiskID, "/dev/"+systemDiskID
	})
	n.publishVolumes()
}

// wipeDataDisk empties the data disk name.
func (n *Node) wipeDataDisk(name string) error {
	n.opts.Log.Info("Wiping a data disk", "disk", name)
	return wipeDir(filepath.Join(n.opts.DisksDir, name))
}

// userDisksToWipe checks the user disks a reset names as machined does: each a disk Talos
// found, by device path, writable and not the system disk. It returns their names.
func (n *Node) userDisksToWipe(ctx context.Context, devPaths []string) ([]string, error) {
	disks, err := safe.StateListAll[*block.Disk](ctx, n.res)
	if err != nil {
		return nil, fmt.Errorf("listing disks failed: %w", err)
	}
	system, err := safe.StateGetByID[*block.SystemDisk](ctx, n.res, block.SystemDiskID)
	if err != nil && !state.IsNotFoundError(err) {
		return nil, fmt.Errorf("system disk lookup failed: %w", err)
	}
	var names []string
	for _, devPath := range devPaths {
		disk, found := disks.Find(func(d *block.Disk) bool { return d.TypedSpec().DevPath == devPath })
		if !found {
			return nil, fmt.Errorf("reset user disk failed: device %s wasn't found", devPath)
		}
		if disk.TypedSpec().Readonly {
			return nil, fmt.Errorf("reset user disk failed: device %s is readonly", devPath)
		}
		if system != nil && devPath == system.TypedSpec().DevPath {
			return nil, fmt.Errorf("reset user disk failed: device %s is the system disk", devPath)
		}
		names = append(names, disk.Metadata().ID())
	}
	return names, nil
}

// storageService is the node's StorageService, also in maintenance mode.
type storageService struct {
	storage.UnimplementedStorageServiceServer
	node *Node
}

// Disks lists the node's disks from its Disk resources, as Talos' storaged does.
func (s *storageService) Disks(ctx context.Context, _ *emptypb.Empty) (*storage.DisksResponse, error) {
	n := s.node
	system, err := safe.StateGetByID[*block.SystemDisk](ctx, n.res, block.SystemDiskID)
	if err != nil && !state.IsNotFoundError(err) {
		return nil, err
	}
	disks, err := safe.StateListAll[*block.Disk](ctx, n.res)
	if err != nil {
		return nil, err
	}
	return &storage.DisksResponse{Messages: []*storage.Disks{{Disks: safe.ToSlice(disks, func(d *block.Disk) *storage.Disk {
		spec := d.TypedSpec()
		kind := storage.Disk_UNKNOWN
		switch {
		case spec.CDROM:
			kind = storage.Disk_CD
		case spec.Transport == "nvme":
			kind = storage.Disk_NVME
		case spec.Rotational:
			kind = storage.Disk_HDD
		case spec.Transport != "":
			kind = storage.Disk_SSD
		}
		return &storage.Disk{
			DeviceName: spec.DevPath, Model: spec.Model, Size: spec.Size, Serial: spec.Serial, Type: kind,
			BusPath: spec.BusPath, Subsystem: spec.SubSystem, Readonly: spec.Readonly,
			SystemDisk: system != nil && d.Metadata().ID() == system.TypedSpec().DiskID,
		}
	})}}}, nil
}

// BlockDeviceWipe wipes disks or partitions the node does not use, as Talos' storaged:
// readers may in maintenance mode, admins only once the node is configured; every device is
// checked before any is wiped.
func (s *storageService) BlockDeviceWipe(ctx context.Context, req *storage.BlockDeviceWipeRequest) (*storage.BlockDeviceWipeResponse, error) {
	n := s.node
	if n.configured() {
		roles, err := callerRoles(ctx)
		if err != nil {
			return nil, err
		}
		if !roles.Includes(role.Admin) {
			return nil, status.Error(codes.PermissionDenied, "not authorized")
		}
	}
	for _, d := range req.GetDevices() {
		if err := n.checkWipe(ctx, d.GetDevice(), d.GetSkipVolumeCheck(), d.GetSkipSecondaryCheck()); err != nil {
			return nil, err
		}
	}
	for _, d := range req.GetDevices() {
		if err := n.wipeDevice(ctx, d.GetDevice(), d.GetMethod()); err != nil {
			return nil, err
		}
	}
	return &storage.BlockDeviceWipeResponse{Messages: []*storage.BlockDeviceWipe{{}}}, nil
}

// blockDevice finds name among the node's block devices: a disk, or a partition of the
// system disk (while it is installed), with its parent disk.
func (n *Node) blockDevice(ctx context.Context, name string) (parent string, found bool, err error) {
	if _, err := safe.StateGetByID[*block.Disk](ctx, n.res, name); err == nil {
		return "", true, nil
	} else if !state.IsNotFoundError(err) {
		return "", false, err
	}
	volumes, err := safe.StateListAll[*block.VolumeStatus](ctx, n.res)
	if err != nil {
		return "", false, err
	}
	for v := range volumes.All() {
		if filepath.Base(v.TypedSpec().Location) == name && v.TypedSpec().ParentLocation != "" {
			return filepath.Base(v.TypedSpec().ParentLocation), true, nil
		}
	}
	return "", false, nil
}

// checkWipe refuses to wipe what Talos refuses to: an unknown device, a read-only disk or
// CD-ROM, a disk another disk is built on, and a device a volume is on.
func (n *Node) checkWipe(ctx context.Context, name string, skipVolumeCheck, skipSecondaryCheck bool) error {
	parent, found, err := n.blockDevice(ctx, name)
	if err != nil {
		return err
	}
	if !found {
		return status.Errorf(codes.NotFound, "blockdevice %q not found", name)
	}
	diskID := name
	if parent != "" {
		diskID = parent
	}
	disk, err := safe.StateGetByID[*block.Disk](ctx, n.res, diskID)
	if err != nil {
		return fmt.Errorf("failed to get disk (or parent) for %q: %w", name, err)
	}
	if disk.TypedSpec().Readonly {
		return status.Errorf(codes.FailedPrecondition, "blockdevice %q is read-only", name)
	}
	if disk.TypedSpec().CDROM {
		return status.Errorf(codes.FailedPrecondition, "blockdevice %q is a CD-ROM", name)
	}
	if !skipSecondaryCheck && parent == "" {
		disks, err := safe.StateListAll[*block.Disk](ctx, n.res)
		if err != nil {
			return err
		}
		for d := range disks.All() {
			if slices.Contains(d.TypedSpec().SecondaryDisks, name) {
				return status.Errorf(codes.FailedPrecondition, "blockdevice %q is in use by disk %q", name, d.Metadata().ID())
			}
		}
	}
	if skipVolumeCheck {
		return nil
	}
	volumes, err := safe.StateListAll[*block.VolumeStatus](ctx, n.res)
	if err != nil {
		return err
	}
	for v := range volumes.All() {
		spec := v.TypedSpec()
		for _, location := range []string{filepath.Base(spec.Location), filepath.Base(spec.MountLocation)} {
			for _, device := range []string{name, parent} {
				if device != "" && location != "" && location == device {
					return status.Errorf(codes.FailedPrecondition, "blockdevice %q is in use by volume %q", device, v.Metadata().ID())
				}
			}
		}
		if filepath.Base(spec.ParentLocation) == name {
			return status.Errorf(codes.FailedPrecondition, "blockdevice %q is in use by volume %q", name, v.Metadata().ID())
		}
	}
	return nil
}

// wipeDevice wipes a checked device: a data disk's contents, or the system disk's (the state
// directory) when no partition of it is mounted.
func (n *Node) wipeDevice(ctx context.Context, name string, method storage.BlockDeviceWipeDescriptor_Method) error {
	parent, _, err := n.blockDevice(ctx, name)
	if err != nil {
		return err
	}
	if name == systemDiskID || parent == systemDiskID {
		if n.configured() {
			// The node runs from its system disk's partitions.
			return status.Errorf(codes.FailedPrecondition, "block device %q is mounted or in use", name)
		}
	}
	if method != storage.BlockDeviceWipeDescriptor_FAST && method != storage.BlockDeviceWipeDescriptor_ZEROES {
		return status.Errorf(codes.InvalidArgument, "unsupported wipe method %s", method)
	}
	if name == systemDiskID {
		n.opts.Log.Info("Wiping the system disk")
		n.mu.Lock()
		defer n.mu.Unlock()
		return wipeDir(n.opts.StateDir)
	}
	if err := n.wipeDataDisk(name); err != nil {
		return status.Errorf(codes.Internal, "failed to wipe block device %q: %v", name, err)
	}
	return nil
}
