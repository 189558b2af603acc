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
	"errors"
	"fmt"
	"os"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// systemVolumes are the system disk's partitions a reset can wipe one by one, with what of
// the node's state directory each holds: STATE the machine config, EPHEMERAL /var (etcd's
// data, an etcd snapshot uploaded for recovery, the kubelet's certificates), META nothing the
// simulator keeps.
var systemVolumes = map[string][]string{
	"STATE":     {"config.yaml", "staged.yaml"},
	"EPHEMERAL": {"etcd", "etcd-pki", recoverySnapshotFile, "etcd.restoring", "kubelet"},
	"META":      nil,
}

// publishVolumes reports the system disk's partitions, as the node's volume manager does
// once they are mounted; a reset finds the partitions it is asked to wipe among them.
func (n *Node) publishVolumes() {
	index := 0
	for _, label := range []string{"META", "STATE", "EPHEMERAL"} {
		index++
		size := uint64(100 << 20)
		if label == "EPHEMERAL" {
			size = simDiskSize - 2*size
		}
		publish(n, block.NewVolumeStatus(block.NamespaceName, label), func(v *block.VolumeStatus) {
			spec := v.TypedSpec()
			spec.Phase, spec.Type = block.VolumePhaseReady, block.VolumeTypePartition
			spec.Location, spec.ParentLocation, spec.PartitionIndex = fmt.Sprintf("/dev/sda%d", index), "/dev/sda", index
			spec.Size, spec.PrettySize = size, fmt.Sprintf("%d MiB", size>>20)
			spec.Filesystem = block.FilesystemTypeXFS
			if label == "META" {
				spec.Filesystem = block.FilesystemTypeNone
			}
		})
	}
}

// resetWipe is what a reset wipes: parts of the node's state directory (all of it when
// system is nil, none when it is empty) and data disks.
type resetWipe struct {
	system    []string
	userDisks []string
}

// resetTargets checks a reset request as machined does before it answers, and returns what
// the reset wipes.
func (n *Node) resetTargets(ctx context.Context, req *machine.ResetRequest) (resetWipe, error) {
	var wipe resetWipe
	if len(req.GetUserDisksToWipe()) > 0 {
		if req.GetMode() == machine.ResetRequest_SYSTEM_DISK {
			return wipe, errors.New("reset failed: invalid input, wipe mode SYSTEM_DISK doesn't support UserDisksToWipe parameter")
		}
		disks, err := n.userDisksToWipe(ctx, req.GetUserDisksToWipe())
		if err != nil {
			return wipe, err
		}
		wipe.userDisks = disks
	}
	partitions := req.GetSystemPartitionsToWipe()
	if len(partitions) == 0 {
		if req.GetMode() == machine.ResetRequest_USER_DISKS {
			wipe.system = []string{}
		}
		return wipe, nil
	}
	if req.GetMode() == machine.ResetRequest_USER_DISKS {
		return wipe, errors.New("reset failed: invalid input, wipe mode USER_DISKS doesn't support SystemPartitionsToWipe parameter")
	}
	wipe.system = []string{}
	for _, spec := range partitions {
		if _, err := safe.StateGetByID[*block.VolumeStatus](ctx, n.res, spec.GetLabel()); err != nil {
			return wipe, fmt.Errorf("failed to get volume status with label %q: %w", spec.GetLabel(), err)
		}
		if spec.GetWipe() {
			wipe.system = append(wipe.system, systemVolumes[spec.GetLabel()]...)
		}
	}
	return wipe, nil
}

// reset is machined's reset sequence for actorID: leave etcd when asked to be graceful,
// stop every service, wipe (everything when wipe is nil), then reboot or power off.
func (n *Node) reset(ctx context.Context, req *machine.ResetRequest, wipe resetWipe, actorID string) {
	n.opts.Log.Info("Resetting", "graceful", req.GetGraceful(), "reboot", req.GetReboot(), "wipe", wipe.system, "userDisks", wipe.userDisks)
	n.sequence("reset", actorID)
	n.setStage(runtime.MachineStageResetting)
	if req.GetGraceful() && n.isControlPlane() {
		if err := n.leaveEtcd(ctx); err != nil && status.Code(err) != codes.FailedPrecondition {
			n.events().publish(&machine.SequenceEvent{
				Sequence: "reset", Action: machine.SequenceEvent_STOP, Error: &common.Error{Message: "failed to leave etcd: " + err.Error()},
			}, actorID)
			n.setStage(runtime.MachineStageRunning)
			n.opts.Log.Error(err, "Reset failed")
			return
		}
	}
	n.stopAllServices(ctx, actorID)
	n.Stop()
	if err := n.wipe(wipe.system); err != nil {
		n.opts.Log.Error(err, "Failed to wipe the node")
	}
	for _, disk := range wipe.userDisks {
		if err := n.wipeDataDisk(disk); err != nil {
			n.opts.Log.Error(err, "Failed to wipe a user disk", "disk", disk)
		}
	}
	if req.GetReboot() {
		n.bootAgain("a reset")
	} else {
		n.poweredOff()
	}
}

// wipe drops the parts of the node's state directory listed, or all of it when the list is
// nil.
func (n *Node) wipe(parts []string) error {
	n.images.reset()
	n.mu.Lock()
	defer n.mu.Unlock()
	if parts == nil {
		return wipeDir(n.opts.StateDir)
	}
	var errs []error
	for _, part := range parts {
		if err := os.RemoveAll(n.stateDir(part)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
