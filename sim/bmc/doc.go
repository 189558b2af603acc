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
// HTTP or HTTPS, and IPMI over LAN, for tests and for simulated bare-metal hosts.
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
// StartIPMI and ServeIPMI serve the same BMC over IPMI v2.0 on UDP (ipmi*.go): RMCP and
// ASF presence pings, RMCP+ session setup (Open Session, RAKP 1-4) with cipher suite 3
// (RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128) for the configured user, authenticated and
// encrypted session packets with sequence numbers checked, and the commands a power
// controller sends: Get Channel Authentication Capabilities, Get Channel Cipher Suites,
// Set Session Privilege Level, Close Session, Get Chassis Status, Chassis Control and
// Get/Set System Boot Options (set in progress and boot flags). IPMI controls the first
// system; chassis controls are the Redfish resets, so the same power events and faults
// apply, and an unreachable BMC drops IPMI packets.
//
// It is not a BMC emulator: there are no IPMI v1.5 sessions, no virtual media, no BIOS
// settings, no event service, no sensors, and only the boot targets and reset types listed
// in this package.
package bmc
