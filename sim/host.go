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
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// HostOptions configure a simulated bare-metal host.
type HostOptions struct {
	// Interface is the host's network interface: up, with the host's MAC address, on the
	// provisioning network. The host adds the address DHCP leases to it. Required.
	Interface string
	// Firmware is FirmwareUEFI (the default) or FirmwareBIOS.
	Firmware string
	// StateDir is the host's system disk. Required.
	StateDir string
	// DisksDir holds the host's data disks: see Options.DisksDir.
	DisksDir string
	// BinDir holds kube-apiserver and kube-controller-manager for control-plane nodes.
	BinDir string
	// OnPowerOff is called when the host powers itself off (Talos shut it down); its BMC
	// sees the power go off.
	OnPowerOff func()
	// Log receives the host's boot and node messages.
	Log logr.Logger
}

// Host is a simulated bare-metal host: powered on, it boots from the network (PXE, then
// iPXE, then the Talos kernel the script names, which fetches talos.config) or from its disk,
// and runs a simulated Talos node on the address DHCP leased.
type Host struct {
	opts HostOptions

	mu     sync.Mutex
	node   *Node
	cancel context.CancelFunc
	boots  []NetBoot
	err    error
}

// NewHost returns a powered-off host.
func NewHost(opts HostOptions) (*Host, error) {
	if opts.Interface == "" || opts.StateDir == "" {
		return nil, errors.New("a simulated host needs an interface and a state directory")
	}
	if opts.Firmware == "" {
		opts.Firmware = FirmwareUEFI
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	opts.Log = opts.Log.WithValues("host", opts.Interface)
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, err
	}
	return &Host{opts: opts}, nil
}

// PowerOn boots the host in the background, from the network when network is true or its
// disk holds no Talos, else from its disk. ctx bounds the host's whole power-on time.
func (h *Host) PowerOn(ctx context.Context, network bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	h.err = nil
	go func() {
		if err := h.boot(ctx, network); err != nil && ctx.Err() == nil {
			h.opts.Log.Error(err, "Boot failed; the host stays on without an operating system")
			h.mu.Lock()
			h.err = err
			h.mu.Unlock()
		}
	}()
}

// PowerOff cuts the host's power.
func (h *Host) PowerOff() {
	h.mu.Lock()
	cancel, node := h.cancel, h.node
	h.cancel, h.node = nil, nil
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if node != nil {
		node.Stop()
	}
}

// Node returns the Talos node the host runs, nil while it is off or booting.
func (h *Host) Node() *Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.node
}

// NetBoots returns the host's network boots so far, oldest first.
func (h *Host) NetBoots() []NetBoot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]NetBoot(nil), h.boots...)
}

// Err returns why the last boot failed, nil when it did not.
func (h *Host) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// installed reports whether the host's disk holds an installed Talos (a config).
func (h *Host) installed() bool {
	_, err := os.Stat(filepath.Join(h.opts.StateDir, "config.yaml"))
	return err == nil
}

func (h *Host) boot(ctx context.Context, network bool) error {
	var configURL string
	var address string
	if network || !h.installed() {
		boot, err := NetworkBoot(ctx, h.opts.Interface, h.opts.Firmware, func(address net.IPNet) error {
			return h.configureAddress(ctx, address.String())
		})
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.boots = append(h.boots, *boot)
		h.mu.Unlock()
		if ctx.Err() != nil {
			// Powered off while it booted: it fetched what it fetched, and runs nothing.
			return ctx.Err()
		}
		if boot.Exit() && !h.installed() {
			return errors.New("iPXE exited to boot the disk, which holds no operating system")
		}
		if boot.Wipe {
			// As Talos: talos.experimental.wipe=system wipes the system disk before the
			// config is read, then reboots (from the network again, the disk being empty).
			if err := wipeDir(h.opts.StateDir); err != nil {
				return fmt.Errorf("failed to wipe the system disk: %w", err)
			}
			h.opts.Log.Info("Wiped the system disk; rebooting")
			return h.boot(ctx, true)
		}
		address, configURL = boot.Address.IP.String(), boot.ConfigURL
	} else {
		lease, err := DHCPAddress(ctx, h.opts.Interface)
		if err != nil {
			return err
		}
		if err := h.configureAddress(ctx, lease.String()); err != nil {
			return err
		}
		address = lease.IP.String()
	}
	node, err := NewNode(Options{
		Address: address, StateDir: h.opts.StateDir, DisksDir: h.opts.DisksDir, Mode: configgen.ModeMetal, BinDir: h.opts.BinDir,
		ConfigURL: configURL, Log: h.opts.Log, OnShutdown: h.shutdown, SharedNetworkNamespace: true,
		Link: h.opts.Interface,
	})
	if err != nil {
		return err
	}
	h.mu.Lock()
	if ctx.Err() != nil {
		h.mu.Unlock()
		return ctx.Err()
	}
	h.node = node
	h.mu.Unlock()
	return node.Start(ctx, nil)
}

// shutdown is the node powering the host off.
func (h *Host) shutdown() {
	h.mu.Lock()
	cancel := h.cancel
	h.cancel, h.node = nil, nil
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if h.opts.OnPowerOff != nil {
		h.opts.OnPowerOff()
	}
}

// configureAddress puts the leased address on the host's interface, as the kernel's DHCP
// client does, replacing the addresses it had.
func (h *Host) configureAddress(ctx context.Context, cidr string) error {
	for _, args := range [][]string{
		{"address", "flush", "dev", h.opts.Interface},
		{"address", "add", cidr, "dev", h.opts.Interface},
	} {
		//nolint:gosec // ip with the host's own interface and leased address
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	return nil
}

// wipeDir removes everything in dir.
func wipeDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}
