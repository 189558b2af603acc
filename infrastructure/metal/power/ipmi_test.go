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

package power_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/talon-capi/talon/infrastructure/metal/power"
	"github.com/talon-capi/talon/sim/bmc"
)

// ipmiTestPassword is a password of IPMI's maximum length, 20 bytes.
const ipmiTestPassword = "pw-Kx7q2-never-print" //nolint:gosec // a test password, to prove it is never printed

// startIPMIBMC starts a simulated BMC that serves IPMI on 127.0.0.1 and stops it when the
// test ends; the address is its ipmi:// address.
func startIPMIBMC(t *testing.T, cfg bmc.Config) (b *bmc.BMC, address string) {
	t.Helper()
	cfg.Username, cfg.Password = testUser, ipmiTestPassword
	b = bmc.New(cfg)
	addr, err := b.StartIPMI("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, "ipmi://" + addr
}

// newIPMIController returns a Controller for the BMC's address.
func newIPMIController(t *testing.T, address string, creds power.Credentials, opts ...power.Option) power.Controller {
	t.Helper()
	c, err := power.New(address, creds, false, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var ipmiCreds = power.Credentials{Username: testUser, Password: ipmiTestPassword}

// TestIPMIPower: each power operation sends the chassis control the host's state calls
// for, or none, reads back the BMC's state, and leaves no session open.
func TestIPMIPower(t *testing.T) {
	operations := map[string]func(context.Context, power.Controller) error{
		"on":    func(ctx context.Context, c power.Controller) error { return c.PowerOn(ctx) },
		"off":   func(ctx context.Context, c power.Controller) error { return c.PowerOff(ctx) },
		"cycle": func(ctx context.Context, c power.Controller) error { return c.PowerCycle(ctx) },
	}
	for _, tc := range []struct {
		name       string
		startOn    bool
		operation  string
		wantState  power.State
		wantResets []string
		wantEvents []bool
	}{
		{name: "on turns an off host on", operation: "on", wantState: power.StateOn, wantResets: []string{"On"}, wantEvents: []bool{true}},
		{name: "on leaves an on host alone", startOn: true, operation: "on", wantState: power.StateOn},
		{name: "off turns an on host off", startOn: true, operation: "off", wantState: power.StateOff, wantResets: []string{"ForceOff"}, wantEvents: []bool{false}},
		{name: "off leaves an off host alone", operation: "off", wantState: power.StateOff},
		{name: "cycle restarts an on host", startOn: true, operation: "cycle", wantState: power.StateOn, wantResets: []string{"PowerCycle"}, wantEvents: []bool{false, true}},
		{name: "cycle turns an off host on", operation: "cycle", wantState: power.StateOn, wantResets: []string{"On"}, wantEvents: []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			events := &powerEvents{}
			b, address := startIPMIBMC(t, bmc.Config{OnPowerChange: events.record})
			if tc.startOn {
				b.SetPower("1", true)
			}
			ignoreSetup := len(events.get())
			c := newIPMIController(t, address, ipmiCreds)

			g.Expect(operations[tc.operation](t.Context(), c)).To(Succeed())
			g.Expect(b.IPMISessions()).To(BeZero())
			g.Expect(b.Resets("1")).To(Equal(tc.wantResets))
			got := events.get()[ignoreSetup:]
			on := make([]bool, 0, len(got))
			for _, e := range got {
				on = append(on, e.On)
			}
			g.Expect(on).To(Equal(append([]bool{}, tc.wantEvents...)))
			g.Expect(c.PowerState(t.Context())).To(Equal(tc.wantState))
			g.Expect(b.IPMISessions()).To(BeZero())
		})
	}
}

// TestIPMIOneTimeBoot: the BMC records boot flags for the device and mode asked for,
// for the next boot only, and the host boots from them once.
func TestIPMIOneTimeBoot(t *testing.T) {
	for _, tc := range []struct {
		name string
		boot power.BootDevice
		want bmc.BootOverride
	}{
		{boot: power.BootDevice{Device: power.DevicePXE, Mode: power.BootModeUEFI}, want: bmc.BootOverride{Enabled: "Once", Target: "Pxe", Mode: "UEFI"}},
		{boot: power.BootDevice{Device: power.DevicePXE, Mode: power.BootModeLegacy}, want: bmc.BootOverride{Enabled: "Once", Target: "Pxe", Mode: "Legacy"}},
		{boot: power.BootDevice{Device: power.DeviceDisk, Mode: power.BootModeLegacy}, want: bmc.BootOverride{Enabled: "Once", Target: "Hdd", Mode: "Legacy"}},
		{name: "PXE (default mode)", boot: power.BootDevice{Device: power.DevicePXE}, want: bmc.BootOverride{Enabled: "Once", Target: "Pxe", Mode: "UEFI"}},
	} {
		name := tc.name
		if name == "" {
			name = tc.boot.String()
		}
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			events := &powerEvents{}
			b, address := startIPMIBMC(t, bmc.Config{OnPowerChange: events.record})
			c := newIPMIController(t, address, ipmiCreds)

			g.Expect(c.SetOneTimeBoot(t.Context(), tc.boot)).To(Succeed())
			g.Expect(b.BootOverride("1")).To(Equal(tc.want))
			g.Expect(b.IPMISessions()).To(BeZero())

			g.Expect(c.PowerOn(t.Context())).To(Succeed())
			g.Expect(events.get()).To(Equal([]bmc.PowerEvent{{System: "1", On: true, Boot: tc.want}}))
			g.Expect(b.BootOverride("1").Enabled).To(Equal("Disabled"), "once means once")

			// The set-in-progress lock was released: a second write takes it again.
			g.Expect(c.SetOneTimeBoot(t.Context(), tc.boot)).To(Succeed())
			g.Expect(b.BootOverride("1")).To(Equal(tc.want))
		})
	}

	t.Run("unknown device", func(t *testing.T) {
		g := NewWithT(t)
		b, address := startIPMIBMC(t, bmc.Config{})
		c := newIPMIController(t, address, ipmiCreds)
		g.Expect(c.SetOneTimeBoot(t.Context(), power.BootDevice{Device: "Floppy"})).To(MatchError(ContainSubstring(`unknown boot device "Floppy"`)))
		g.Expect(b.BootOverride("1").Enabled).To(Equal("Disabled"))
	})
}

// TestIPMIFailures: rejected credentials and a BMC that does not answer produce errors
// that name the BMC, match ErrUnauthorized or ErrTimeout, never show the password, and
// leave no session behind.
func TestIPMIFailures(t *testing.T) {
	t.Run("wrong password", func(t *testing.T) {
		g := NewWithT(t)
		b, address := startIPMIBMC(t, bmc.Config{})
		c := newIPMIController(t, address, power.Credentials{Username: testUser, Password: "not-" + ipmiTestPassword[:10]})
		err := c.PowerOn(t.Context())
		g.Expect(err).To(MatchError(power.ErrUnauthorized))
		g.Expect(err).To(MatchError(`failed to power on via BMC ` + address + `: credentials rejected, or the user may not control the chassis`))
		g.Expect(err.Error()).NotTo(ContainSubstring(ipmiTestPassword[:10]))
		g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOff))
		g.Expect(b.IPMISessions()).To(BeZero())
	})

	t.Run("unknown user", func(t *testing.T) {
		g := NewWithT(t)
		b, address := startIPMIBMC(t, bmc.Config{})
		c := newIPMIController(t, address, power.Credentials{Username: "operator", Password: ipmiTestPassword})
		_, err := c.PowerState(t.Context())
		g.Expect(err).To(MatchError(power.ErrUnauthorized))
		g.Expect(err.Error()).To(ContainSubstring(address))
		g.Expect(err.Error()).NotTo(ContainSubstring(ipmiTestPassword))
		g.Expect(b.IPMISessions()).To(BeZero())
	})

	t.Run("unreachable", func(t *testing.T) {
		g := NewWithT(t)
		b, address := startIPMIBMC(t, bmc.Config{})
		b.SetUnreachable(true)
		const timeout = 300 * time.Millisecond
		c := newIPMIController(t, address, ipmiCreds, power.WithTimeout(timeout))
		start := time.Now()
		err := c.PowerOn(t.Context())
		g.Expect(time.Since(start)).To(BeNumerically("<", 2*timeout))
		g.Expect(err).To(MatchError(power.ErrTimeout))
		g.Expect(err).To(MatchError("failed to power on via BMC " + address + ": no answer within 300ms"))

		b.SetUnreachable(false)
		g.Expect(c.PowerOn(t.Context())).To(Succeed())
		g.Expect(b.IPMISessions()).To(BeZero())
	})

	t.Run("caller cancels", func(t *testing.T) {
		g := NewWithT(t)
		b, address := startIPMIBMC(t, bmc.Config{})
		b.SetUnreachable(true)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := newIPMIController(t, address, ipmiCreds).PowerOn(ctx)
		g.Expect(err).To(MatchError(context.Canceled))
		g.Expect(err).NotTo(MatchError(power.ErrTimeout))
	})
}
