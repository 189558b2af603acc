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

package power

import (
	"context"
	"fmt"
	"time"
)

// Controller is the part of a BMC that Talon uses.
//
// PowerOn and PowerOff are idempotent: they do nothing when the host already is in the
// requested state. All methods return once the BMC has accepted the request; the host may
// take a while to get there, so callers read PowerState again later instead of assuming it.
type Controller interface {
	// PowerState reports the power state the BMC reports for the host.
	PowerState(ctx context.Context) (State, error)
	// PowerOn turns the host on.
	PowerOn(ctx context.Context) error
	// PowerOff turns the host off at once, without waiting for the operating system.
	PowerOff(ctx context.Context) error
	// PowerCycle restarts a host that is on, and turns on a host that is off.
	PowerCycle(ctx context.Context) error
	// SetOneTimeBoot makes the host boot from the given device the next time it boots,
	// and from its normal boot order after that.
	SetOneTimeBoot(ctx context.Context, boot BootDevice) error
}

// State is the power state of a host.
type State string

// The power states a Controller reports.
const (
	// StateOn: the host is powered on.
	StateOn State = "On"
	// StateOff: the host is powered off.
	StateOff State = "Off"
	// StateUnknown: the host is between states (powering on or off, paused) or the BMC
	// reports a state Talon does not know.
	StateUnknown State = "Unknown"
)

// Device is a device a host can boot from.
type Device string

// The boot devices a Controller can select.
const (
	// DevicePXE boots from the network.
	DevicePXE Device = "PXE"
	// DeviceDisk boots from the first hard disk.
	DeviceDisk Device = "Disk"
)

// BootMode is the firmware interface a host boots through.
type BootMode string

// The boot modes a Controller can select.
const (
	// BootModeUEFI boots through UEFI firmware.
	BootModeUEFI BootMode = "UEFI"
	// BootModeLegacy boots through the legacy BIOS.
	BootModeLegacy BootMode = "Legacy"
)

// BootDevice is a one-time boot target: a device and the firmware mode to boot it in, as
// Redfish's BootSourceOverrideTarget and BootSourceOverrideMode (and IPMI's boot flags)
// carry them together.
type BootDevice struct {
	// Device is the device to boot from.
	Device Device
	// Mode is the firmware mode to boot in; empty means BootModeUEFI.
	Mode BootMode
}

// String returns the device and mode, e.g. "PXE (UEFI)".
func (b BootDevice) String() string {
	return fmt.Sprintf("%s (%s)", b.Device, b.mode())
}

// mode is Mode with its default applied.
func (b BootDevice) mode() BootMode {
	if b.Mode == "" {
		return BootModeUEFI
	}
	return b.Mode
}

// validate rejects devices and modes no Controller knows.
func (b BootDevice) validate() error {
	if b.Device != DevicePXE && b.Device != DeviceDisk {
		return fmt.Errorf("unknown boot device %q, want %q or %q", b.Device, DevicePXE, DeviceDisk)
	}
	if m := b.mode(); m != BootModeUEFI && m != BootModeLegacy {
		return fmt.Errorf("unknown boot mode %q, want %q or %q", b.Mode, BootModeUEFI, BootModeLegacy)
	}
	return nil
}

// DefaultTimeout bounds each Controller call unless WithTimeout says otherwise: long enough
// for a slow BMC, short enough that a reconciler does not hang on a dead one.
const DefaultTimeout = 10 * time.Second

// Options are the settings of a Controller beyond its address and credentials.
type Options struct {
	// Timeout bounds each Controller call, all of its requests together. New starts from
	// DefaultTimeout and rejects a timeout that is not positive.
	Timeout time.Duration
}

// Option changes Options.
type Option func(*Options)

// WithTimeout bounds each Controller call to d.
func WithTimeout(d time.Duration) Option {
	return func(o *Options) { o.Timeout = d }
}

// New returns a Controller for the BMC at address (see the package documentation for the
// forms), authenticating with creds. insecureSkipVerify accepts any TLS certificate, for
// Redfish BMCs with self-signed ones; IPMI has no certificates. New only parses; it does
// not contact the BMC.
func New(address string, creds Credentials, insecureSkipVerify bool, opts ...Option) (Controller, error) {
	options := Options{Timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&options)
	}
	if options.Timeout <= 0 {
		return nil, fmt.Errorf("invalid BMC timeout %s: must be positive", options.Timeout)
	}
	addr, err := parseAddress(address)
	if err != nil {
		return nil, err
	}
	if creds.Username == "" {
		return nil, fmt.Errorf("no username for BMC %s", addr)
	}
	switch addr.protocol {
	case protocolRedfish:
		return newRedfish(addr, creds, insecureSkipVerify, options), nil
	default: // protocolIPMI
		return newIPMI(addr, creds, options)
	}
}
