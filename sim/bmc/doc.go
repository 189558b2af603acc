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

// Package bmc is a simulated baseboard management controller that speaks Redfish over
// HTTP or HTTPS, for tests and for simulated bare-metal hosts.
//
// It serves the part of the Redfish schema a power controller uses, with the property
// names, annotations and status codes of DSP0266 and the DMTF schemas (checked against
// gofish's own payloads): the service root and version document (without authentication,
// as the specification requires), the SessionService, the Systems collection, and each
// ComputerSystem with its PowerState, its Boot source override (with
// BootSourceOverrideTarget@Redfish.AllowableValues) and the #ComputerSystem.Reset action
// (with ResetType@Redfish.AllowableValues). Requests authenticate with HTTP basic auth or
// a session token; anything else gets 401.
//
// Each system keeps its power state, boot override and the resets it received; Go methods
// read them, Config.OnPowerChange reports every power change (with the boot override the
// system boots with), and faults can be injected: SetUnreachable makes the BMC stop
// answering, SetIgnorePower makes it accept resets without changing the power state.
//
// It is not a BMC emulator: there is no IPMI, no virtual media, no BIOS settings, no
// event service, and only the boot targets and reset types listed in this package.
package bmc
