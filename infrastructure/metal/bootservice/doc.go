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

// Package bootservice is Talon's network boot service: DHCP (proxy or full), TFTP for iPXE
// binaries and HTTP for iPXE scripts, Talos kernels and initramfs, and each host's machine
// config, served once and to that host only.
//
// The chain a host follows:
//
//  1. Its PXE firmware asks DHCP. [DHCPResponder] answers only hosts that [Hosts] knows (by MAC),
//     with the iPXE binary for its firmware (option 93) on TFTP ([TFTPServer]). In proxy mode it
//     leaves addressing to the site's DHCP server; in full mode it also leases an address.
//  2. iPXE asks DHCP again (user class "iPXE") and is given the URL of its script on HTTP
//     ([NewHTTPHandler]). The script boots the Talos kernel and initramfs from /assets/, or exits
//     to the next boot device (the installed disk) when the host should boot from disk.
//  3. The kernel command line carries talos.config=<one-time URL>: a token from [Tokens], bound to
//     the host and, where known, to the IP address that fetched the script. The config endpoint
//     hands out the host's bootstrap data ([ConfigSource]) once, to that address; every refusal is
//     reported to [Refusals] so the manager can turn it into a Kubernetes event.
//
// Trust: DHCP, TFTP and plain HTTP carry no authentication, and a MAC address is whatever a client
// says it is. The service therefore binds a config token to the requester's IP address as seen on
// the connection (never a MAC or address from a query parameter), hands the config out only once
// and keeps tokens short-lived. When the service knows the host's address (a fixed IP, or a
// full-mode lease), the install script itself goes only to that address. In proxy mode without a
// fixed IP it does not know it: whoever asks for a host's script first while the host is to be
// installed can fetch its config, once; the host then fails, and the refusal ("token already used"
// or a replaced token) shows up as an event. A machine that spoofs a host's MAC and IP address can
// always race it. Put the provisioning network where only the hosts being provisioned reach it,
// keep hosts in the install action only while they are provisioned, and prefer full mode or
// fixed IPs where configs carry secrets (control-plane configs do).
//
// The package is a library: it does not watch MetalHosts, render configs or emit events itself;
// the infrastructure manager wires those in through [Hosts], [ConfigSource] and [Refusals].
package bootservice
