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

package sim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/enums"
	"github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/network"
	"github.com/siderolabs/talos/pkg/machinery/cel/celenv"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	coreconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
)

// linkSettings are what a node's config says of its link (Options.Link): the static
// addresses that replace its DHCP lease, and the Layer 2 VIP it shares with the other
// control-plane nodes.
type linkSettings struct {
	addresses []netip.Prefix
	vip       netip.Addr
}

// linkSettings reads cfg for the node's link, which the config names by the link's own name
// or by an alias (a LinkAliasConfig whose selector matches the link, evaluated as Talos does)
// under the v1.12+ documents, or by name or hardware address in machine.network.interfaces.
func (n *Node) linkSettings(cfg talosconfig.Provider) (linkSettings, error) {
	var s linkSettings
	if n.opts.Link == "" {
		return s, nil
	}
	iface, err := net.InterfaceByName(n.opts.Link)
	if err != nil {
		return s, fmt.Errorf("the node's link: %w", err)
	}
	names := map[string]bool{n.opts.Link: true}
	// The link as Talos' LinkStatus resource describes a physical Ethernet link (no kind),
	// which the host's veth stands for, with its MAC address as the permanent one.
	status := &network.LinkStatusSpec{HardwareAddr: iface.HardwareAddr, PermanentAddr: iface.HardwareAddr, Type: enums.NethelpersLinkType_LINK_ETHER}
	// Talos tries the aliases in the order of their names and gives a link the first that
	// matches it.
	aliases := slices.SortedFunc(slices.Values(cfg.NetworkLinkAliasConfigs()), func(a, b coreconfig.NetworkLinkAliasConfig) int {
		return strings.Compare(a.Name(), b.Name())
	})
	for _, alias := range aliases {
		match, err := alias.LinkSelector().EvalBool(celenv.LinkLocator(), map[string]any{"link": status})
		if err != nil {
			return s, fmt.Errorf("LinkAliasConfig %s: %w", alias.Name(), err)
		}
		if !match {
			continue
		}
		name := alias.Name()
		if alias.IsPatternAlias() {
			// The node has one link: it is the first the pattern names.
			name = fmt.Sprintf(name, 0)
		}
		names[name] = true
		break
	}
	for _, link := range cfg.NetworkCommonLinkConfigs() {
		if !names[link.Name()] {
			continue
		}
		for _, a := range link.Addresses() {
			s.addresses = append(s.addresses, a.Address())
		}
	}
	for _, vip := range cfg.NetworkVirtualIPConfigs() {
		if _, hcloud := vip.(coreconfig.NetworkHCloudVIPConfig); !hcloud && names[vip.Link()] {
			s.vip = vip.VIP()
		}
	}
	if cfg.Machine() == nil {
		return s, nil
	}
	for _, device := range cfg.Machine().Network().Devices() {
		selector := device.Selector()
		byMAC := selector != nil && strings.EqualFold(selector.HardwareAddress(), iface.HardwareAddr.String())
		if device.Interface() != n.opts.Link && !byMAC {
			continue
		}
		for _, a := range device.Addresses() {
			prefix, err := netip.ParsePrefix(a)
			if err != nil {
				return s, fmt.Errorf("machine.network.interfaces: address %q: %w", a, err)
			}
			s.addresses = append(s.addresses, prefix)
		}
		if vip := device.VIPConfig(); vip != nil {
			if addr, err := netip.ParseAddr(vip.IP()); err == nil {
				s.vip = addr
			}
		}
	}
	return s, nil
}

// configureLink gives the node's link the static addresses of cfg, when it has any, in
// place of the DHCP lease, and makes the first of them the node's address, as Talos stops
// its DHCP client on a link the config addresses statically. Routes are not installed: the
// simulated hosts share the test machine's network namespace. It runs before the node
// starts a service with its new config; changed reports that the address changed.
func (n *Node) configureLink(ctx context.Context, cfg talosconfig.Provider) (changed bool, err error) {
	s, err := n.linkSettings(cfg)
	if err != nil || len(s.addresses) == 0 {
		return false, err
	}
	first := s.addresses[0].Addr()
	if first.String() == n.ip.String() {
		return false, nil
	}
	commands := [][]string{{"address", "flush", "dev", n.opts.Link}}
	for _, a := range s.addresses {
		commands = append(commands, []string{"address", "add", a.String(), "dev", n.opts.Link})
	}
	for _, args := range commands {
		//nolint:gosec // ip with the node's own link and the addresses of its config
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return false, fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	n.mu.Lock()
	n.ip = net.IP(first.AsSlice())
	n.opts.Address = first.String()
	n.mu.Unlock()
	n.opts.Log.Info("Static address configured; the DHCP lease is released", "link", n.opts.Link, "addresses", fmt.Sprint(s.addresses))
	return true, nil
}
