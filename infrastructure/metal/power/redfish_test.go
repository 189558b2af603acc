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
	"net"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/talon-capi/talon/infrastructure/metal/power"
	"github.com/talon-capi/talon/sim/bmc"
)

const (
	testUser     = "admin"
	testPassword = "pw-Kx7q2-never-print-me" //nolint:gosec // a test password, to prove it is never printed
)

var testCreds = power.Credentials{Username: testUser, Password: testPassword}

// startBMC starts a simulated BMC that serves plain HTTP and stops it when the test ends.
func startBMC(t *testing.T, cfg bmc.Config) *bmc.BMC {
	t.Helper()
	cfg.Username, cfg.Password = testUser, testPassword
	b := bmc.NewServer(cfg)
	t.Cleanup(b.Close)
	return b
}

// newController returns a Controller for the BMC's only system over plain HTTP.
func newController(t *testing.T, b *bmc.BMC, opts ...power.Option) power.Controller {
	t.Helper()
	c, err := power.New("redfish+http://"+b.Address(), testCreds, false, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// powerEvents records a BMC's power events.
type powerEvents struct {
	mu     sync.Mutex
	events []bmc.PowerEvent
}

func (p *powerEvents) record(e bmc.PowerEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
}

func (p *powerEvents) get() []bmc.PowerEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]bmc.PowerEvent(nil), p.events...)
}

// TestRedfishPower: each power operation sends the reset type the system allows and its
// state calls for, and the state read back is the BMC's.
func TestRedfishPower(t *testing.T) {
	operations := map[string]func(context.Context, power.Controller) error{
		"on":    func(ctx context.Context, c power.Controller) error { return c.PowerOn(ctx) },
		"off":   func(ctx context.Context, c power.Controller) error { return c.PowerOff(ctx) },
		"cycle": func(ctx context.Context, c power.Controller) error { return c.PowerCycle(ctx) },
	}
	for _, tc := range []struct {
		name       string
		resetTypes []string
		startOn    bool
		operation  string
		wantState  power.State
		wantResets []string
		wantEvents []bool
		wantErr    string
	}{
		{name: "on turns an off host on", operation: "on", wantState: power.StateOn, wantResets: []string{"On"}, wantEvents: []bool{true}},
		{name: "on leaves an on host alone", startOn: true, operation: "on", wantState: power.StateOn},
		{name: "on falls back to ForceOn", resetTypes: []string{"ForceOn", "ForceOff"}, operation: "on", wantState: power.StateOn, wantResets: []string{"ForceOn"}, wantEvents: []bool{true}},
		{name: "off forces an on host off", startOn: true, operation: "off", wantState: power.StateOff, wantResets: []string{"ForceOff"}, wantEvents: []bool{false}},
		{name: "off leaves an off host alone", operation: "off", wantState: power.StateOff},
		{name: "cycle restarts an on host", startOn: true, operation: "cycle", wantState: power.StateOn, wantResets: []string{"ForceRestart"}, wantEvents: []bool{false, true}},
		{name: "cycle turns an off host on", operation: "cycle", wantState: power.StateOn, wantResets: []string{"On"}, wantEvents: []bool{true}},
		{name: "cycle uses PowerCycle without ForceRestart", resetTypes: []string{"On", "ForceOff", "PowerCycle"}, startOn: true, operation: "cycle", wantState: power.StateOn, wantResets: []string{"PowerCycle"}, wantEvents: []bool{false, true}},
		{name: "cycle without a restart reset type", resetTypes: []string{"On", "ForceOff"}, startOn: true, operation: "cycle", wantState: power.StateOn, wantErr: "allows none of the reset types [ForceRestart PowerCycle]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			events := &powerEvents{}
			b := startBMC(t, bmc.Config{ResetTypes: tc.resetTypes, OnPowerChange: events.record})
			if tc.startOn {
				b.SetPower("1", true)
			}
			ignoreSetup := len(events.get())
			c := newController(t, b)

			err := operations[tc.operation](t.Context(), c)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(And(ContainSubstring(tc.wantErr), ContainSubstring(b.Address()))))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(b.Resets("1")).To(Equal(tc.wantResets))
			got := events.get()[ignoreSetup:]
			on := make([]bool, 0, len(got))
			for _, e := range got {
				on = append(on, e.On)
			}
			g.Expect(on).To(Equal(append([]bool{}, tc.wantEvents...)))
			g.Expect(c.PowerState(t.Context())).To(Equal(tc.wantState))
		})
	}
}

// TestRedfishOneTimeBoot: the BMC records a one-time boot override with the device and
// mode asked for, and the host boots from it once.
func TestRedfishOneTimeBoot(t *testing.T) {
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
			b := startBMC(t, bmc.Config{OnPowerChange: events.record})
			c := newController(t, b)

			g.Expect(c.SetOneTimeBoot(t.Context(), tc.boot)).To(Succeed())
			g.Expect(b.BootOverride("1")).To(Equal(tc.want))

			g.Expect(c.PowerOn(t.Context())).To(Succeed())
			g.Expect(events.get()).To(Equal([]bmc.PowerEvent{{System: "1", On: true, Boot: tc.want}}))
			// Once means once: the BMC disables the override when the host boots.
			g.Expect(b.BootOverride("1").Enabled).To(Equal("Disabled"))
		})
	}

	t.Run("unknown device or mode", func(t *testing.T) {
		g := NewWithT(t)
		b := startBMC(t, bmc.Config{})
		c := newController(t, b)
		g.Expect(c.SetOneTimeBoot(t.Context(), power.BootDevice{Device: "Floppy"})).To(MatchError(ContainSubstring(`unknown boot device "Floppy"`)))
		g.Expect(c.SetOneTimeBoot(t.Context(), power.BootDevice{Device: power.DevicePXE, Mode: "CSM"})).To(MatchError(ContainSubstring(`unknown boot mode "CSM"`)))
		g.Expect(b.BootOverride("1").Enabled).To(Equal("Disabled"))
	})
}

// TestRedfishSystemSelection: the address path selects a system; without one the BMC must
// have exactly one.
func TestRedfishSystemSelection(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{Systems: []string{"blade-1", "blade-2"}})
	base := "redfish+http://" + b.Address()

	c, err := power.New(base, testCreds, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.PowerOn(t.Context())).To(MatchError(And(
		ContainSubstring("failed to power on via BMC redfish+http://"+b.Address()+": 2 ComputerSystems listed (/redfish/v1/Systems/blade-1, /redfish/v1/Systems/blade-2)"),
		ContainSubstring("e.g. redfish+http://"+b.Address()+"/redfish/v1/Systems/blade-1"))))

	c, err = power.New(base+"/redfish/v1/Systems/blade-2", testCreds, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.PowerOn(t.Context())).To(Succeed())
	g.Expect(b.PowerState("blade-2")).To(Equal(bmc.PowerOn))
	g.Expect(b.PowerState("blade-1")).To(Equal(bmc.PowerOff))

	c, err = power.New(base+"/redfish/v1/Systems/blade-9", testCreds, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.PowerOn(t.Context())).To(MatchError(ContainSubstring("no ComputerSystem /redfish/v1/Systems/blade-9")))
}

// TestRedfishTLS: redfish:// speaks HTTPS and verifies the BMC's certificate unless told
// not to.
func TestRedfishTLS(t *testing.T) {
	g := NewWithT(t)
	b := bmc.NewTLSServer(bmc.Config{Username: testUser, Password: testPassword})
	t.Cleanup(b.Close)
	address := "redfish://" + b.Address()

	c, err := power.New(address, testCreds, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.PowerOn(t.Context())).To(Succeed())
	g.Expect(c.PowerState(t.Context())).To(Equal(power.StateOn))

	c, err = power.New(address, testCreds, false)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.PowerState(t.Context())
	g.Expect(err).To(MatchError(And(ContainSubstring(address), ContainSubstring("certificate"))))

	// Plain HTTP to an HTTPS port is refused, it does not fall back.
	c, err = power.New("redfish+http://"+b.Address(), testCreds, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.PowerOff(t.Context())).To(MatchError(ContainSubstring("HTTP 400: Client sent an HTTP request to an HTTPS server")))
	g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOn))
}

// TestRedfishWrongPassword: a rejected login says so, names the BMC and the user, and
// shows neither password.
func TestRedfishWrongPassword(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{})
	const wrong = "wrong-Zq9-password"
	c, err := power.New("redfish+http://"+b.Address(), power.Credentials{Username: testUser, Password: wrong}, false)
	g.Expect(err).NotTo(HaveOccurred())

	err = c.PowerOn(t.Context())
	g.Expect(err).To(MatchError(power.ErrUnauthorized))
	g.Expect(err.Error()).To(And(
		ContainSubstring("failed to power on"),
		ContainSubstring(b.Address()),
		ContainSubstring(`credentials rejected (HTTP 401)`),
		Not(ContainSubstring(wrong)),
		Not(ContainSubstring(testPassword))))
	g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOff))
	g.Expect(b.Resets("1")).To(BeEmpty())
}

// TestRedfishLeavesNoSessions: the controller authenticates each request and never takes
// one of the BMC's session slots.
func TestRedfishLeavesNoSessions(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{})
	c := newController(t, b)
	g.Expect(c.SetOneTimeBoot(t.Context(), power.BootDevice{Device: power.DevicePXE})).To(Succeed())
	g.Expect(c.PowerCycle(t.Context())).To(Succeed())
	g.Expect(b.Sessions()).To(BeZero())
}

// TestRedfishUnreachable: a BMC that stops answering fails the call within the timeout,
// with an error that names the BMC; one that answers again works again.
func TestRedfishUnreachable(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{})
	c := newController(t, b, power.WithTimeout(300*time.Millisecond))

	b.SetUnreachable(true)
	start := time.Now()
	_, err := c.PowerState(t.Context())
	g.Expect(time.Since(start)).To(BeNumerically("<", 3*time.Second))
	g.Expect(err).To(MatchError(power.ErrTimeout))
	g.Expect(err).To(MatchError(And(
		ContainSubstring("failed to read the power state"),
		ContainSubstring("via BMC redfish+http://"+b.Address()),
		ContainSubstring(": no answer within 300ms"))))

	b.SetUnreachable(false)
	g.Expect(c.PowerOn(t.Context())).To(Succeed())
	g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOn))

	t.Run("the caller's context ends first", func(t *testing.T) {
		g := NewWithT(t)
		b.SetUnreachable(true)
		defer b.SetUnreachable(false)
		c := newController(t, b, power.WithTimeout(time.Minute))
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		err := c.PowerOff(ctx)
		g.Expect(err).To(MatchError(context.DeadlineExceeded))
		g.Expect(err).NotTo(MatchError(power.ErrTimeout))
		g.Expect(err.Error()).To(ContainSubstring("failed to power off via BMC redfish+http://" + b.Address()))
	})

	t.Run("nothing listens", func(t *testing.T) {
		g := NewWithT(t)
		l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
		g.Expect(err).NotTo(HaveOccurred())
		address := l.Addr().String()
		g.Expect(l.Close()).To(Succeed())
		c, err := power.New("redfish+http://"+address, testCreds, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.PowerOn(t.Context())).To(MatchError(And(ContainSubstring(address), ContainSubstring("connection refused"))))
	})
}

// TestRedfishIgnoredPower: when the BMC accepts a reset but the power state does not
// follow, the controller reports the state the BMC reports, not the one it asked for.
func TestRedfishIgnoredPower(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{})
	c := newController(t, b)
	b.SetIgnorePower(true)

	g.Expect(c.PowerOn(t.Context())).To(Succeed())
	g.Expect(b.Resets("1")).To(Equal([]string{"On"}))
	g.Expect(c.PowerState(t.Context())).To(Equal(power.StateOff))

	b.SetIgnorePower(false)
	g.Expect(c.PowerOn(t.Context())).To(Succeed())
	g.Expect(c.PowerState(t.Context())).To(Equal(power.StateOn))
}
