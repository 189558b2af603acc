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
	"encoding/binary"

	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"
)

// The IPMI commands the BMC answers; any other gets Invalid Command (C1h). The chassis
// commands act on the first of Config.Systems.

// ipmiChannel is the number of the BMC's LAN channel.
const ipmiChannel = 0x01

// ipmiCall is one IPMI request being answered.
type ipmiCall struct {
	// session is the session the request came in, nil outside one.
	session *ipmiSession
	data    []byte
	// events are the power changes the request caused.
	events []PowerEvent
}

// ipmiResult is the answer to a request: the response message and the power changes.
type ipmiResult struct {
	message []byte
	events  []PowerEvent
}

// ipmiHandler answers a request with a completion code and response data. The caller
// holds BMC.mu.
type ipmiHandler func(b *BMC, call *ipmiCall) (types.CompletionCode, []byte)

// ipmiCommand is a command the BMC answers and the lowest session privilege it needs;
// PrivilegeLevelUnspecified means it may be sent outside a session.
type ipmiCommand struct {
	privilege types.PrivilegeLevel
	handle    ipmiHandler
}

var ipmiCommands = map[types.CommandKey]ipmiCommand{
	types.CommandGetChannelAuthCapabilities.Key(): {types.PrivilegeLevelUnspecified, (*BMC).getChannelAuthCapabilities},
	types.CommandGetChannelCipherSuites.Key():     {types.PrivilegeLevelUnspecified, (*BMC).getChannelCipherSuites},
	types.CommandSetSessionPrivilegeLevel.Key():   {types.PrivilegeLevelCallback, (*BMC).setSessionPrivilegeLevel},
	types.CommandCloseSession.Key():               {types.PrivilegeLevelCallback, (*BMC).closeSession},
	types.CommandGetChassisStatus.Key():           {types.PrivilegeLevelUser, (*BMC).getChassisStatus},
	types.CommandChassisControl.Key():             {types.PrivilegeLevelOperator, (*BMC).chassisControl},
	types.CommandSetSystemBootOptions.Key():       {types.PrivilegeLevelOperator, (*BMC).setSystemBootOptions},
	types.CommandGetSystemBootOptions.Key():       {types.PrivilegeLevelOperator, (*BMC).getSystemBootOptions},
}

// dispatchIPMI answers a request that came in session s, or outside a session if s is nil.
func (b *BMC) dispatchIPMI(s *ipmiSession, req ipmiRequest) ipmiResult {
	cmd, ok := ipmiCommands[types.CommandKey{NetFn: req.netFn, ID: req.command}]
	if !ok {
		return ipmiResult{message: req.response(types.CodeInvalidCommand, nil)}
	}
	if cmd.privilege != types.PrivilegeLevelUnspecified && (s == nil || s.privilege < cmd.privilege) {
		return ipmiResult{message: req.response(types.CodeInsufficientPrivilege, nil)}
	}
	call := &ipmiCall{session: s, data: req.data}
	cc, data := cmd.handle(b, call)
	return ipmiResult{message: req.response(cc, data), events: call.events}
}

// getChannelAuthCapabilities answers Get Channel Authentication Capabilities (22.13): a
// LAN channel for IPMI v2.0 (RMCP+) logins of named users, without IPMI v1.5 logins.
func (b *BMC) getChannelAuthCapabilities(call *ipmiCall) (types.CompletionCode, []byte) {
	if len(call.data) != 2 {
		return types.CodeRequestDataLengthInvalid, nil
	}
	channel, priv := call.data[0]&0x0f, types.PrivilegeLevel(call.data[1]&0x0f)
	if (channel != types.ChannelNumberSelf && channel != ipmiChannel) || priv < types.PrivilegeLevelCallback || priv > types.PrivilegeLevelOEM {
		return types.CodeRequestDataFieldInvalid, nil
	}
	extended := call.data[0]&0x80 != 0
	res := []byte{ipmiChannel, 0, 0x04, 0, 0, 0, 0, 0} // non-null user names enabled
	if extended {
		res[1] = 0x80 // v2.0 extended capabilities follow
		res[3] = 0x02 // the channel supports IPMI v2.0 connections
	}
	return types.CodeOK, res
}

// getChannelCipherSuites answers Get Channel Cipher Suites (22.15) for IPMI payloads:
// cipher suite 3 only.
func (b *BMC) getChannelCipherSuites(call *ipmiCall) (types.CompletionCode, []byte) {
	if len(call.data) != 3 {
		return types.CodeRequestDataLengthInvalid, nil
	}
	channel, payloadType := call.data[0]&0x0f, types.PayloadType(call.data[1]&0x3f)
	if (channel != types.ChannelNumberSelf && channel != ipmiChannel) || payloadType != types.PayloadTypeIPMI {
		return types.CodeRequestDataFieldInvalid, nil
	}
	records := []byte{ // the algorithms, tagged
		types.CipherAlgTagBitAuthMask | uint8(ipmiAuthAlg),
		types.CipherAlgTagBitIntegrityMask | uint8(ipmiIntegrityAlg),
		types.CipherAlgTagBitEncryptionMask | uint8(ipmiCryptAlg),
	}
	if call.data[2]&types.LIST_ALGORITHMS_BY_CIPHER_SUITE != 0 {
		records = append([]byte{types.StandardCipherSuite, uint8(ipmiCipherSuite)}, records...)
	}
	const perResponse = 16
	start := int(call.data[2]&0x3f) * perResponse
	res := []byte{ipmiChannel}
	if start < len(records) {
		res = append(res, records[start:min(start+perResponse, len(records))]...)
	}
	return types.CodeOK, res
}

// setSessionPrivilegeLevel answers Set Session Privilege Level (22.18): up to the level
// RAKP Message 1 asked for.
func (b *BMC) setSessionPrivilegeLevel(call *ipmiCall) (types.CompletionCode, []byte) {
	if len(call.data) != 1 {
		return types.CodeRequestDataLengthInvalid, nil
	}
	s := call.session
	switch level := types.PrivilegeLevel(call.data[0] & 0x0f); {
	case level == types.PrivilegeLevelUnspecified: // report the present level
	case level < types.PrivilegeLevelUser || level > types.PrivilegeLevelOEM:
		return types.CodeRequestDataFieldInvalid, nil
	case level > s.maxPrivilege:
		return types.CodeSetSessionPrivilegeLevelExceedsLimit, nil
	default:
		s.privilege = level
	}
	return types.CodeOK, []byte{uint8(s.privilege)}
}

// closeSession answers Close Session (22.19). The answer still travels in the closed
// session's keys.
func (b *BMC) closeSession(call *ipmiCall) (types.CompletionCode, []byte) {
	if len(call.data) != 4 && len(call.data) != 5 {
		return types.CodeRequestDataLengthInvalid, nil
	}
	id := binary.LittleEndian.Uint32(call.data)
	if id == 0 { // by session handle, which this BMC does not hand out
		return types.CodeCloseSessionInvalidSessionHandle, nil
	}
	target := b.ipmi.sessions[id]
	if target == nil || target.state != sessionActive {
		return types.CodeCloseSessionInvalidSessionID, nil
	}
	if target != call.session && call.session.privilege < types.PrivilegeLevelAdministrator {
		return types.CodeInsufficientPrivilege, nil
	}
	delete(b.ipmi.sessions, id)
	return types.CodeOK, nil
}

// getChassisStatus answers Get Chassis Status (28.2) with the system's power state.
func (b *BMC) getChassisStatus(_ *ipmiCall) (types.CompletionCode, []byte) {
	_, s := b.ipmiSystem()
	res := chassis.GetChassisStatusResponse{
		PowerIsOn:          s.power == PowerOn,
		PowerRestorePolicy: chassis.PowerRestorePolicyAlwaysOff,
	}
	return types.CodeOK, res.Pack()
}

// chassisResets are the Redfish resets that do what a Chassis Control does.
var chassisResets = map[chassis.ChassisControl]string{
	chassis.ChassisControlPowerDown:    "ForceOff",
	chassis.ChassisControlPowerUp:      "On",
	chassis.ChassisControlPowerCycle:   "PowerCycle",
	chassis.ChassisControlHardReset:    "ForceRestart",
	chassis.ChassisControlSoftShutdown: "GracefulShutdown",
}

// chassisControl answers Chassis Control (28.3) with the matching reset. A power cycle
// or hard reset of a system that is off is not supported in the present state (D5h), as
// on most BMCs.
func (b *BMC) chassisControl(call *ipmiCall) (types.CompletionCode, []byte) {
	var req chassis.ChassisControlRequest
	if len(call.data) != 1 || req.Unpack(call.data) != nil {
		return types.CodeRequestDataLengthInvalid, nil
	}
	resetType, ok := chassisResets[req.ChassisControl]
	if !ok {
		return types.CodeRequestDataFieldInvalid, nil
	}
	id, s := b.ipmiSystem()
	if resetType == "PowerCycle" && s.power != PowerOn {
		return types.CodeNotSupported, nil
	}
	events, refused := b.reset(id, s, resetType)
	if refused != "" {
		return types.CodeNotSupported, nil
	}
	call.events = events
	return types.CodeOK, nil
}

// bootDevices maps the boot device selectors of the boot flags (Table 28-14, parameter
// 5) to Redfish boot source override targets.
var bootDevices = map[types.BootDeviceSelector]string{
	types.BootDeviceSelectorNoOverride:       "None",
	types.BootDeviceSelectorForcePXE:         "Pxe",
	types.BootDeviceSelectorForceHardDrive:   "Hdd",
	types.BootDeviceSelectorForceCDROM:       "Cd",
	types.BootDeviceSelectorForceBIOSSetup:   "BiosSetup",
	types.BootDeviceSelectorForceRemoteMedia: "Usb",
}

// setSystemBootOptions answers Set System Boot Options (28.12): parameter 0 (set in
// progress), 3 and 4 (accepted, no effect), and 5, the boot flags, which set the
// system's boot source override.
func (b *BMC) setSystemBootOptions(call *ipmiCall) (types.CompletionCode, []byte) {
	if len(call.data) < 1 {
		return types.CodeRequestDataLengthInvalid, nil
	}
	param := call.data[1:]
	switch types.BootOptionParamSelector(call.data[0] & 0x7f) {
	case types.BootOptionParamSelector_SetInProgress:
		if len(param) != 1 {
			return types.CodeRequestDataLengthInvalid, nil
		}
		switch types.SetInProgressState(param[0] & 0x03) {
		case types.SetInProgress_SetComplete:
			b.ipmi.bootSetInProgress = false
		case types.SetInProgress_SetInProgress:
			if b.ipmi.bootSetInProgress {
				return types.CodeParamConfigSetInProgressConflict, nil
			}
			b.ipmi.bootSetInProgress = true
		case types.SetInProgress_CommitWrite: // writes take effect at once
		default:
			return types.CodeRequestDataFieldInvalid, nil
		}
	case types.BootOptionParamSelector_BMCBootFlagValidBitClear:
		if len(param) != 1 {
			return types.CodeRequestDataLengthInvalid, nil
		}
	case types.BootOptionParamSelector_BootInfoAcknowledge:
		if len(param) != 2 {
			return types.CodeRequestDataLengthInvalid, nil
		}
	case types.BootOptionParamSelector_BootFlags:
		var flags types.BootOptionParam_BootFlags
		if flags.Unpack(param) != nil {
			return types.CodeRequestDataLengthInvalid, nil
		}
		target, ok := bootDevices[flags.BootDeviceSelector]
		if !ok {
			return types.CodeRequestDataFieldInvalid, nil
		}
		boot := BootOverride{Enabled: OverrideDisabled, Target: target, Mode: "Legacy"}
		if flags.BootFlagsValid {
			boot.Enabled = OverrideOnce
			if flags.Persist {
				boot.Enabled = OverrideContinuous
			}
		}
		if flags.BIOSBootType == types.BIOSBootTypeEFI {
			boot.Mode = "UEFI"
		}
		_, s := b.ipmiSystem()
		s.boot = boot
	default:
		return types.CodeParameterNotSupported, nil
	}
	return types.CodeOK, nil
}

// getSystemBootOptions answers Get System Boot Options (28.13) for the parameters
// setSystemBootOptions takes.
func (b *BMC) getSystemBootOptions(call *ipmiCall) (types.CompletionCode, []byte) {
	if len(call.data) != 3 {
		return types.CodeRequestDataLengthInvalid, nil
	}
	selector := types.BootOptionParamSelector(call.data[0] & 0x7f)
	var param []byte
	switch selector {
	case types.BootOptionParamSelector_SetInProgress:
		state := types.SetInProgress_SetComplete
		if b.ipmi.bootSetInProgress {
			state = types.SetInProgress_SetInProgress
		}
		param = []byte{uint8(state)}
	case types.BootOptionParamSelector_BMCBootFlagValidBitClear:
		param = []byte{0}
	case types.BootOptionParamSelector_BootInfoAcknowledge:
		param = []byte{0, 0}
	case types.BootOptionParamSelector_BootFlags:
		_, s := b.ipmiSystem()
		flags := types.BootOptionParam_BootFlags{
			BootFlagsValid: s.boot.Enabled != OverrideDisabled,
			Persist:        s.boot.Enabled == OverrideContinuous,
			BIOSBootType:   types.BIOSBootType(s.boot.Mode == "UEFI"),
		}
		for selector, target := range bootDevices {
			if target == s.boot.Target {
				flags.BootDeviceSelector = selector
			}
		}
		param = flags.Pack()
	default:
		return types.CodeParameterNotSupported, nil
	}
	const parameterVersion = 0x01
	return types.CodeOK, append([]byte{parameterVersion, uint8(selector)}, param...)
}

// ipmiSystem is the system the IPMI interface controls: the first of Config.Systems.
func (b *BMC) ipmiSystem() (string, *system) {
	id := b.cfg.Systems[0]
	return id, b.systems[id]
}
