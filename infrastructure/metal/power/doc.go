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

// Package power controls bare-metal hosts through their BMCs behind one small interface,
// Controller: power state, power on, off and cycle, and a one-time boot device (PXE or disk,
// UEFI or legacy).
//
// New picks the protocol from the BMC address:
//
//	redfish://host[:port][/redfish/v1/Systems/<id>]       Redfish over HTTPS
//	redfish+http://host[:port][/redfish/v1/Systems/<id>]  Redfish over plain HTTP
//	ipmi://host[:port]                                    IPMI v2.0 over LAN (RMCP+), port 623 by default
//
// IPMI sessions log in at the Operator privilege with the cipher suite go-ipmi picks from
// those the BMC lists (17 or else 3, the one every IPMI v2.0 BMC has); IPMI limits user
// names to 16 bytes and passwords to 20. Every call of a Controller opens its own session
// or connection and closes it before it returns.
//
// Credentials come only from Secrets (CredentialsFromSecret) and never reach logs, events,
// status or errors: Credentials prints, marshals and logs without its password.
//
// The package does not decide when to power a host on or off, and it does not wait for a
// host to reach a power state: a Controller reports what the BMC says, and the MetalHost
// reconciler compares that with what it asked for.
package power
