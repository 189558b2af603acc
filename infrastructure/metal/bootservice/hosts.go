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

package bootservice

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Arch is the CPU architecture a host boots.
type Arch string

// The architectures Talos ships boot assets for.
const (
	// ArchAMD64 is x86-64.
	ArchAMD64 Arch = "amd64"
	// ArchARM64 is 64-bit ARM.
	ArchARM64 Arch = "arm64"
)

// Firmware is the kind of firmware a host network-boots with.
type Firmware string

// The firmware kinds the service can chain-load iPXE from.
const (
	// FirmwareBIOS is legacy BIOS PXE.
	FirmwareBIOS Firmware = "BIOS"
	// FirmwareUEFI is UEFI PXE.
	FirmwareUEFI Firmware = "UEFI"
)

// BootAction is what the service tells a known host to do when it network-boots.
type BootAction string

const (
	// BootActionInstall boots the Talos kernel and initramfs with a one-time config URL.
	BootActionInstall BootAction = "Install"
	// BootActionDisk makes iPXE exit so the firmware boots the next device, the installed disk.
	BootActionDisk BootAction = "Disk"
	// BootActionWipe boots the Talos kernel and initramfs with talos.experimental.wipe=system
	// and no config: Talos wipes the system disk and reboots.
	BootActionWipe BootAction = "Wipe"
	// BootActionMaintenance boots the Talos kernel and initramfs with no config: Talos waits
	// in maintenance mode.
	BootActionMaintenance BootAction = "Maintenance"
)

// Host is what the boot service needs to know about one host it serves.
type Host struct {
	// Name is the MetalHost the host belongs to.
	Name types.NamespacedName
	// Arch is the host's CPU architecture; empty means amd64.
	Arch Arch
	// Firmware is how the host network-boots; the DHCP client architecture (option 93) wins
	// when the client sends it.
	Firmware Firmware
	// Action is what the host should do when it network-boots.
	Action BootAction
	// Kernel is the name of the Talos kernel in the service's asset directory, e.g.
	// "v1.13.3/vmlinuz-amd64".
	Kernel string
	// Initramfs is the name of the Talos initramfs in the asset directory.
	Initramfs string
	// KernelArgs are added to the kernel command line after the arguments Talos requires.
	// A console= argument here replaces the default consoles.
	KernelArgs []string
	// IP is the host's fixed address: full-mode DHCP leases it, and the install script goes
	// only to it in both modes. Nil when the host has none: full mode leases from the pool,
	// and the script goes to the address DHCP shows (see HTTPOptions.Addresses).
	IP net.IP
}

// Hosts is the inventory the service asks about a MAC address.
type Hosts interface {
	// Lookup returns the host that boots from mac, or nil when no host does.
	Lookup(ctx context.Context, mac net.HardwareAddr) (*Host, error)
}

// StaticHosts is an in-memory Hosts, for tests and fixed inventories. It is safe for
// concurrent use.
type StaticHosts struct {
	mu    sync.RWMutex
	hosts map[string]Host
}

var _ Hosts = &StaticHosts{}

// NewStaticHosts returns an empty inventory.
func NewStaticHosts() *StaticHosts {
	return &StaticHosts{hosts: map[string]Host{}}
}

// Set makes mac boot as host, replacing what it booted as before.
func (s *StaticHosts) Set(mac net.HardwareAddr, host Host) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts[mac.String()] = host
}

// Delete forgets mac.
func (s *StaticHosts) Delete(mac net.HardwareAddr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hosts, mac.String())
}

// Lookup returns a copy of the host that boots from mac, or nil.
func (s *StaticHosts) Lookup(_ context.Context, mac net.HardwareAddr) (*Host, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.hosts[mac.String()]
	if !ok {
		return nil, nil
	}
	h.KernelArgs = append([]string(nil), h.KernelArgs...)
	if h.IP != nil {
		h.IP = append(net.IP(nil), h.IP...)
	}
	return &h, nil
}

// validate reports what makes h unbootable.
func (h *Host) validate() error {
	switch h.Arch {
	case "", ArchAMD64, ArchARM64:
	default:
		return fmt.Errorf("host %s has unsupported architecture %q", h.Name, h.Arch)
	}
	if h.Action != BootActionInstall && h.Action != BootActionWipe && h.Action != BootActionMaintenance {
		return nil
	}
	if h.Kernel == "" || h.Initramfs == "" {
		return fmt.Errorf("host %s has no kernel or initramfs to boot", h.Name)
	}
	for _, asset := range []string{h.Kernel, h.Initramfs} {
		if !fs.ValidPath(asset) || asset == "." {
			return fmt.Errorf("host %s has boot asset %q that is not a name in the asset directory", h.Name, asset)
		}
	}
	for _, arg := range h.KernelArgs {
		if arg == "" || strings.ContainsFunc(arg, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("host %s has kernel argument %q with whitespace or control characters", h.Name, arg)
		}
	}
	return nil
}

// arch returns the host's architecture, amd64 when unset.
func (h *Host) arch() Arch {
	if h.Arch == "" {
		return ArchAMD64
	}
	return h.Arch
}

// ParseMAC parses a MAC address in any form net.ParseMAC accepts, as iPXE and Talos write
// them (aa:bb:cc:dd:ee:ff or aa-bb-...), and refuses anything but 6-byte Ethernet addresses.
func ParseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil {
		return nil, err
	}
	if len(mac) != 6 {
		return nil, fmt.Errorf("MAC address %q is not a 6-byte Ethernet address", s)
	}
	return mac, nil
}
