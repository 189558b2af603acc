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

package bmc

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
)

// Redfish PowerState values of a ComputerSystem.
const (
	// PowerOn: the system is on.
	PowerOn = "On"
	// PowerOff: the system is off.
	PowerOff = "Off"
)

// Redfish BootSourceOverrideEnabled values.
const (
	// OverrideDisabled: the system boots from its normal boot order.
	OverrideDisabled = "Disabled"
	// OverrideOnce: the system boots from the override target once, then the BMC sets
	// BootSourceOverrideEnabled back to Disabled.
	OverrideOnce = "Once"
	// OverrideContinuous: the system boots from the override target until it is disabled.
	OverrideContinuous = "Continuous"
)

// BootTargets are the BootSourceOverrideTarget values a simulated system allows.
var BootTargets = []string{"None", "Pxe", "Hdd", "Cd", "Usb", "BiosSetup", "UefiShell"}

// BootModes are the BootSourceOverrideMode values a simulated system allows.
var BootModes = []string{"UEFI", "Legacy"}

// ResetTypes are the ResetType values a simulated system allows unless Config.ResetTypes
// says otherwise.
var ResetTypes = []string{"On", "ForceOn", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle", "PushPowerButton"}

// BootOverride is a system's Redfish Boot source override.
type BootOverride struct {
	// Enabled is BootSourceOverrideEnabled: Disabled, Once or Continuous.
	Enabled string
	// Target is BootSourceOverrideTarget, e.g. Pxe or Hdd.
	Target string
	// Mode is BootSourceOverrideMode: UEFI or Legacy.
	Mode string
}

// PowerEvent is a power change of a simulated system.
type PowerEvent struct {
	// System is the Id of the ComputerSystem.
	System string
	// On is true when the system was powered on (it boots), false when it was powered off.
	On bool
	// Boot is the boot source override the system boots with when On; Enabled is Disabled
	// when it boots from its normal boot order.
	Boot BootOverride
}

// Config configures a BMC.
type Config struct {
	// Username and Password are the only credentials the BMC accepts.
	Username, Password string
	// Systems are the Ids of the ComputerSystems; ["1"] when empty. Each starts off, with
	// its boot override disabled.
	Systems []string
	// ResetTypes are the reset types the systems allow; ResetTypes when empty.
	ResetTypes []string
	// OnPowerChange, if set, is called for every power change, in order, once the request
	// that caused it has been applied and before the BMC answers it: a restart reports
	// off, then on, and the BMC already reads on. It may call the BMC's methods; it must
	// not block for long.
	OnPowerChange func(PowerEvent)
}

// system is the state of one ComputerSystem.
type system struct {
	power  string
	boot   BootOverride
	resets []string
}

// BMC is a simulated Redfish BMC. It is an http.Handler; Start, StartTLS, NewServer and
// NewTLSServer serve it. StartIPMI and ServeIPMI serve the same BMC over IPMI too.
type BMC struct {
	cfg Config

	mu          sync.Mutex
	systems     map[string]*system
	sessions    map[string]string // session Id → token
	nextSession int
	ignorePower bool
	// release is open while the BMC is unreachable; closing it lets waiting requests go.
	release chan struct{}
	// held counts the requests waiting on release.
	held int
	// ipmi is the IPMI LAN interface's state (ipmi.go).
	ipmi ipmiState

	server *httptest.Server
}

// New returns a BMC that is not serving yet. It panics on a Config no BMC could have
// (duplicate or malformed system Ids, unknown reset types), as httptest does on errors.
func New(cfg Config) *BMC {
	if len(cfg.Systems) == 0 {
		cfg.Systems = []string{"1"}
	}
	if len(cfg.ResetTypes) == 0 {
		cfg.ResetTypes = ResetTypes
	}
	for _, t := range cfg.ResetTypes {
		if !slices.Contains(ResetTypes, t) {
			panic(fmt.Sprintf("bmc: unknown reset type %q, want one of %v", t, ResetTypes))
		}
	}
	b := &BMC{cfg: cfg, systems: map[string]*system{}, sessions: map[string]string{}}
	for _, id := range cfg.Systems {
		if id == "" || strings.ContainsAny(id, "/?#") || b.systems[id] != nil {
			panic(fmt.Sprintf("bmc: invalid or duplicate system Id %q", id))
		}
		b.systems[id] = &system{power: PowerOff, boot: BootOverride{Enabled: OverrideDisabled, Target: "None", Mode: "UEFI"}}
	}
	return b
}

// PowerState returns the Redfish PowerState of a system (PowerOn or PowerOff), or "" if
// there is no such system.
func (b *BMC) PowerState(systemID string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.systems[systemID]; s != nil {
		return s.power
	}
	return ""
}

// BootOverride returns the boot source override of a system, or the zero value if there
// is no such system.
func (b *BMC) BootOverride(systemID string) BootOverride {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.systems[systemID]; s != nil {
		return s.boot
	}
	return BootOverride{}
}

// Resets returns the reset types a system accepted, oldest first, including those
// SetIgnorePower made it ignore.
func (b *BMC) Resets(systemID string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.systems[systemID]; s != nil {
		return slices.Clone(s.resets)
	}
	return nil
}

// Sessions returns the number of open Redfish sessions.
func (b *BMC) Sessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

// SetPower turns a system on or off as its power button would, booting it (and reporting
// the change) like a reset does. It panics if there is no such system.
func (b *BMC) SetPower(systemID string, on bool) {
	b.mu.Lock()
	s := b.systems[systemID]
	if s == nil {
		b.mu.Unlock()
		panic(fmt.Sprintf("bmc: no system %q", systemID))
	}
	event := powerOn(systemID, s)
	if !on {
		event = powerOff(systemID, s)
	}
	b.mu.Unlock()
	b.notify([]PowerEvent{event})
}

// SetUnreachable makes the BMC stop answering (true): requests hang until the client gives
// up, and then their connections close, as with a BMC whose network is gone. false makes
// it answer again; requests that were waiting are dropped.
func (b *BMC) SetUnreachable(unreachable bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case unreachable && b.release == nil:
		b.release = make(chan struct{})
	case !unreachable && b.release != nil:
		close(b.release)
		b.release = nil
	}
}

// SetIgnorePower makes the BMC accept resets (and record them) while leaving the power
// state as it is (true), as a BMC with a broken power controller does.
func (b *BMC) SetIgnorePower(ignore bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ignorePower = ignore
}

// reset applies a reset type to a system and returns the power events it caused, or an
// error message for a reset the system refuses in its state. The caller holds mu.
func (b *BMC) reset(id string, s *system, resetType string) ([]PowerEvent, string) {
	on := s.power == PowerOn
	if !on && (resetType == "GracefulRestart" || resetType == "ForceRestart") {
		return nil, fmt.Sprintf("System %s is powered off; %s needs a system that is on.", id, resetType)
	}
	s.resets = append(s.resets, resetType)
	if b.ignorePower {
		return nil, ""
	}
	var events []PowerEvent
	switch resetType {
	case "On", "ForceOn":
		if !on {
			events = append(events, powerOn(id, s))
		}
	case "ForceOff", "GracefulShutdown":
		if on {
			events = append(events, powerOff(id, s))
		}
	case "PushPowerButton":
		if on {
			events = append(events, powerOff(id, s))
		} else {
			events = append(events, powerOn(id, s))
		}
	case "GracefulRestart", "ForceRestart", "PowerCycle":
		if on {
			events = append(events, powerOff(id, s))
		}
		events = append(events, powerOn(id, s))
	}
	return events, ""
}

// powerOn boots a system, consuming a one-time boot override. The caller holds mu.
func powerOn(id string, s *system) PowerEvent {
	s.power = PowerOn
	boot := s.boot
	if s.boot.Enabled == OverrideOnce {
		s.boot.Enabled = OverrideDisabled
	}
	return PowerEvent{System: id, On: true, Boot: boot}
}

// powerOff turns a system off. The caller holds mu.
func powerOff(id string, s *system) PowerEvent {
	s.power = PowerOff
	return PowerEvent{System: id, On: false}
}

// notify reports power events; the caller does not hold mu, so OnPowerChange may call
// the BMC's methods.
func (b *BMC) notify(events []PowerEvent) {
	if b.cfg.OnPowerChange == nil {
		return
	}
	for _, e := range events {
		b.cfg.OnPowerChange(e)
	}
}
