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

package metal

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/storage"
	talosclient "github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
)

// maintenanceTimeout bounds one conversation with a node in maintenance mode.
const maintenanceTimeout = time.Minute

// maintenanceClient connects to Talos at address in maintenance mode, which serves a
// self-signed certificate and takes no client certificate.
func maintenanceClient(ctx context.Context, address string) (*talosclient.Client, error) {
	if net.ParseIP(address) == nil {
		return nil, fmt.Errorf("no address: %q", address)
	}
	return talosclient.New(ctx,
		talosclient.WithEndpoints(net.JoinHostPort(address, strconv.Itoa(50000))),
		//nolint:gosec // maintenance mode serves a self-signed certificate; nothing secret is sent.
		talosclient.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}))
}

// maintenanceMode checks that Talos at address answers in maintenance mode (no config yet).
func maintenanceMode(ctx context.Context, address string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := maintenanceClient(ctx, address)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_, err = c.Version(ctx)
	return err
}

// errWipeNotVerified is a wipe that did not empty the system disk, as far as Talos in
// maintenance mode can tell: it still finds an installed system disk, or cannot say.
type errWipeNotVerified string

func (e errWipeNotVerified) Error() string { return string(e) }

// checkWipe checks, through the Talos API of the node at address in maintenance mode, that
// Talos finds no installed system disk (an errWipeNotVerified when it does) and, with
// dataDisks, wipes every disk Talos found that may hold data: all but CD-ROMs, read-only and
// virtual devices (loop, device-mapper, RAID arrays). Talos erases their partition tables and
// filesystem signatures, and refuses them all when one is in use (the member of an assembled
// array). It returns the device paths wiped.
func checkWipe(ctx context.Context, address string, dataDisks bool) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, maintenanceTimeout)
	defer cancel()
	c, err := maintenanceClient(ctx, address)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	system, err := safe.StateGetByID[*block.SystemDisk](ctx, c.COSI, block.SystemDiskID)
	if err == nil {
		return nil, errWipeNotVerified("Talos still finds its system disk " + system.TypedSpec().DevPath)
	}
	if !state.IsNotFoundError(err) {
		return nil, errWipeNotVerified(fmt.Sprintf("cannot tell whether Talos finds a system disk: %v", err))
	}
	if !dataDisks {
		return nil, nil
	}
	disks, err := safe.StateListAll[*block.Disk](ctx, c.COSI)
	if err != nil {
		return nil, fmt.Errorf("cannot list the disks Talos found: %w", err)
	}
	var paths []string
	var devices []*storage.BlockDeviceWipeDescriptor
	for disk := range disks.All() {
		spec := disk.TypedSpec()
		if spec.Readonly || spec.CDROM || spec.BusPath == "/virtual" || len(spec.SecondaryDisks) > 0 {
			continue
		}
		paths = append(paths, spec.DevPath)
		devices = append(devices, &storage.BlockDeviceWipeDescriptor{Device: disk.Metadata().ID(), Method: storage.BlockDeviceWipeDescriptor_FAST})
	}
	if len(devices) == 0 {
		return nil, nil
	}
	if err := c.BlockDeviceWipe(ctx, &storage.BlockDeviceWipeRequest{Devices: devices}); err != nil {
		return nil, fmt.Errorf("its data disks (spec.wipeDataDisks) could not be wiped: cannot wipe %s: %w", strings.Join(paths, ", "), err)
	}
	slices.Sort(paths)
	// As many as status.lastWipe keeps.
	return paths[:min(len(paths), 512)], nil
}
