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
// says it is. The service therefore hands a host's install script only to the host's address —
// its fixed IP, its full-mode lease, or in proxy mode the address its PXE client announced in a
// DHCP REQUEST the service saw on the segment (option 50 of a REQUEST sent from 0.0.0.0, or
// ciaddr of a ProxyDHCP REQUEST on port 4011 sent from that address; see
// DHCPResponder.RespondFrom) — and to nobody while that address is unknown. The config token
// in the script is bound to that address as seen on the connection (never a MAC or address
// from a query parameter), hands the config out once and lives 15 minutes. A refused request
// issues no token, so it can neither learn nor replace the host's. What this does not stop is
// a machine on the same layer-2 segment that forges DHCP as the host's MAC and then asks from
// the address it announced, or takes over the host's address, while the host is being
// installed; Served lets the manager report a config served to two addresses.
// docs/metal.md has the whole threat model.
//
// The package is a library: it does not watch MetalHosts, render configs or emit events itself;
// the infrastructure manager wires those in through [Hosts], [ConfigSource] and [Refusals].
package bootservice
