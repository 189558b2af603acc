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

package metal

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
)

// staticAddress is the address a host with static network settings runs its node at: the
// first address of its first interface. "" for a host whose addresses come from DHCP.
func staticAddress(h *infrav1.MetalHost) string {
	if h.Spec.Network == nil || len(h.Spec.Network.Interfaces) == 0 || len(h.Spec.Network.Interfaces[0].Addresses) == 0 {
		return ""
	}
	prefix, err := netip.ParsePrefix(h.Spec.Network.Interfaces[0].Addresses[0])
	if err != nil {
		return ""
	}
	return prefix.Addr().String()
}

// vipLink is the link of h that holds vip: the one vip names, else the static interface of h
// whose network contains the VIP.
func vipLink(h *infrav1.MetalHost, vip *infrav1.ControlPlaneVIP) (string, error) {
	if vip.Link != "" {
		return vip.Link, nil
	}
	address, err := netip.ParseAddr(vip.Address)
	if err != nil {
		return "", fmt.Errorf("the control-plane VIP %q is not an IP address", vip.Address)
	}
	if h.Spec.Network != nil {
		for _, iface := range h.Spec.Network.Interfaces {
			for _, a := range iface.Addresses {
				if prefix, err := netip.ParsePrefix(a); err == nil && prefix.Masked().Contains(address) {
					return iface.Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("MetalHost %s has no static interface on the network of the control-plane VIP %s: set controlPlaneVIP.link of the TalosMetalCluster to the link that holds it, or give the host an address on that network in spec.network", h.Name, vip.Address)
}

// networkPatches are the config patches that give a host its static network settings and, for
// a control-plane host (vip not nil), the cluster's shared VIP on vipLink. Under contracts
// with network documents (Talos 1.12+, multidoc) they are LinkAliasConfig (naming each
// interface by its MAC address), LinkConfig, ResolverConfig and Layer2VIPConfig documents;
// before, machine.network. A VIP the config already has (a ClusterClass patch) is not added
// twice.
func networkPatches(cfg talosconfig.Provider, multidoc bool, network *infrav1.HostNetwork, vip *infrav1.ControlPlaneVIP, link string) []string {
	if vip != nil && hasVIP(cfg, vip.Address) {
		vip = nil
	}
	if !multidoc {
		return legacyNetwork(network, vip, link)
	}
	legacy := legacyResolvers(cfg)
	docs := multidocNetwork(network, vip, link, !legacy)
	if network != nil && legacy {
		// Talos refuses a ResolverConfig beside the v1alpha1 resolver settings a patch of the
		// Machine's config made (1.12 and 1.13 generate none): the name servers join those.
		docs = append(docs, legacyNetwork(&infrav1.HostNetwork{Nameservers: network.Nameservers}, nil, "")...)
	}
	return docs
}

// legacyResolvers reports whether cfg sets machine.network's name servers or search
// domains, which a ResolverConfig document may not repeat.
func legacyResolvers(cfg talosconfig.Provider) bool {
	raw := cfg.RawV1Alpha1()
	//nolint:staticcheck // SA1019: the deprecated fields are what a ResolverConfig may not repeat
	if raw == nil || raw.MachineConfig == nil || raw.MachineConfig.MachineNetwork == nil {
		return false
	}
	n := raw.MachineConfig.MachineNetwork                                                       //nolint:staticcheck // SA1019, as above
	return len(n.NameServers) > 0 || len(n.Searches) > 0 || n.NetworkDisableSearchDomain != nil //nolint:staticcheck // SA1019, as above
}

// hasVIP reports whether cfg already shares address as a VIP, in a document or in
// machine.network.
func hasVIP(cfg talosconfig.Provider, address string) bool {
	want, err := netip.ParseAddr(address)
	if err != nil {
		return false
	}
	for _, v := range cfg.NetworkVirtualIPConfigs() {
		if v.VIP() == want {
			return true
		}
	}
	if cfg.Machine() == nil {
		return false
	}
	for _, device := range cfg.Machine().Network().Devices() {
		if device.VIPConfig() == nil {
			continue
		}
		if ip, err := netip.ParseAddr(device.VIPConfig().IP()); err == nil && ip == want {
			return true
		}
	}
	return false
}

// multidocNetwork writes the documents of networkPatches (the ResolverConfig only when
// resolver is true). A config with a LinkConfig runs no DHCP on the links it does not
// configure, so a VIP on a link other than the static interfaces gets a DHCPv4Config.
func multidocNetwork(network *infrav1.HostNetwork, vip *infrav1.ControlPlaneVIP, link string, resolver bool) []string {
	var docs []string
	static := false
	if network != nil {
		for _, iface := range network.Interfaces {
			static = static || iface.Name == link
			docs = append(docs, "apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: "+strconv.Quote(iface.Name)+
				"\nselector:\n  match: "+strconv.Quote("mac(link.permanent_addr) == "+strconv.Quote(iface.MACAddress))+"\n")
			var b strings.Builder
			b.WriteString("apiVersion: v1alpha1\nkind: LinkConfig\nname: " + strconv.Quote(iface.Name) + "\nup: true\naddresses:\n")
			for _, a := range iface.Addresses {
				b.WriteString("  - address: " + strconv.Quote(a) + "\n")
			}
			if iface.Gateway != "" {
				b.WriteString("routes:\n  - gateway: " + strconv.Quote(iface.Gateway) + "\n")
			}
			docs = append(docs, b.String())
		}
		if len(network.Nameservers) > 0 && resolver {
			var b strings.Builder
			b.WriteString("apiVersion: v1alpha1\nkind: ResolverConfig\nnameservers:\n")
			for _, ns := range network.Nameservers {
				b.WriteString("  - address: " + strconv.Quote(ns) + "\n")
			}
			docs = append(docs, b.String())
		}
	}
	if vip != nil {
		docs = append(docs, "apiVersion: v1alpha1\nkind: Layer2VIPConfig\nname: "+strconv.Quote(vip.Address)+"\nlink: "+strconv.Quote(link)+"\n")
		if network != nil && !static {
			docs = append(docs, "apiVersion: v1alpha1\nkind: DHCPv4Config\nname: "+strconv.Quote(link)+"\n")
		}
	}
	return docs
}

// legacyNetwork writes networkPatches' machine.network.
func legacyNetwork(network *infrav1.HostNetwork, vip *infrav1.ControlPlaneVIP, link string) []string {
	var b strings.Builder
	vipOn := func(name string) {
		if vip != nil && name == link {
			b.WriteString("        vip:\n          ip: " + strconv.Quote(vip.Address) + "\n")
			vip = nil
		}
	}
	if network != nil {
		for _, iface := range network.Interfaces {
			b.WriteString("      - deviceSelector:\n          hardwareAddr: " + strconv.Quote(iface.MACAddress) + "\n        addresses:\n")
			for _, a := range iface.Addresses {
				b.WriteString("          - " + strconv.Quote(a) + "\n")
			}
			if iface.Gateway != "" {
				b.WriteString("        routes:\n          - network: " + strconv.Quote(defaultRoute(iface.Gateway)) +
					"\n            gateway: " + strconv.Quote(iface.Gateway) + "\n")
			}
			vipOn(iface.Name)
		}
	}
	if vip != nil {
		// A link of the host's own naming, addressed by DHCP as it was.
		b.WriteString("      - interface: " + strconv.Quote(link) + "\n        dhcp: true\n")
		vipOn(link)
	}
	var doc strings.Builder
	if b.Len() > 0 {
		doc.WriteString("    interfaces:\n" + b.String())
	}
	if network != nil && len(network.Nameservers) > 0 {
		doc.WriteString("    nameservers:\n")
		for _, ns := range network.Nameservers {
			doc.WriteString("      - " + strconv.Quote(ns) + "\n")
		}
	}
	if doc.Len() == 0 {
		return nil
	}
	return []string{"machine:\n  network:\n" + doc.String()}
}

// defaultRoute is the default route's destination for gateway's address family.
func defaultRoute(gateway string) string {
	if a, err := netip.ParseAddr(gateway); err == nil && a.Is6() {
		return "::/0"
	}
	return "0.0.0.0/0"
}
