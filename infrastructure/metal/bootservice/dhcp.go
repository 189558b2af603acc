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

package bootservice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// DHCPMode says how much of DHCP the service does.
type DHCPMode string

const (
	// DHCPModeProxy answers only PXE clients, with boot options and no address (proxyDHCP);
	// the site's DHCP server leases addresses.
	DHCPModeProxy DHCPMode = "Proxy"
	// DHCPModeFull also leases addresses to known hosts, from a pool or the host's fixed IP.
	DHCPModeFull DHCPMode = "Full"
)

// DHCPOptions configure the DHCP responder.
type DHCPOptions struct {
	// Mode is proxy or full DHCP. Required.
	Mode DHCPMode
	// ServerIP is this service's IPv4 address on the provisioning network: the TFTP server
	// and DHCP server identifier. Required.
	ServerIP net.IP
	// BaseURL is the HTTP base URL of the boot service, for iPXE clients. Required.
	BaseURL string
	// Pool leases addresses in full mode; required there, ignored in proxy mode.
	Pool *AddressPool
	// PreferSNP hands x86-64 UEFI clients snponly.efi instead of ipxe.efi.
	PreferSNP bool
	// Register, when set, is called for PXE clients no host boots from (auto-registration),
	// on every DHCP message they send: it must not block, and it deduplicates. They still get
	// no answer, and never a config.
	Register func(ctx context.Context, mac net.HardwareAddr)
	// AnnouncementTTL is how long, in proxy mode, the address a host announced in its DHCP
	// exchange stays the only one its install script goes to; DefaultAnnouncementTTL when
	// zero.
	AnnouncementTTL time.Duration
	// Subnet is the provisioning network, ServerIP's; in proxy mode an address announced
	// outside it is not taken. Optional.
	Subnet *net.IPNet
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// DHCPResponder decides the answer to each DHCP request. It keeps the full-mode leases and is
// safe for concurrent use.
type DHCPResponder struct {
	hosts    Hosts
	opts     DHCPOptions
	serverIP net.IP
	baseURL  *url.URL
	// leases are full mode's, announced proxy mode's.
	leases    *leases
	announced *announcements
}

// NewDHCPResponder returns a responder for the hosts in hosts.
func NewDHCPResponder(hosts Hosts, opts DHCPOptions) (*DHCPResponder, error) {
	if hosts == nil {
		return nil, errors.New("DHCP responder needs hosts")
	}
	serverIP := opts.ServerIP.To4()
	if serverIP == nil || serverIP.IsUnspecified() {
		return nil, fmt.Errorf("DHCP server IP %q is not an IPv4 address", opts.ServerIP)
	}
	base, err := url.Parse(opts.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("invalid boot service base URL %q: want http(s)://host[:port][/path]", opts.BaseURL)
	}
	// The BOOTP file field holds 127 bytes; a longer script URL would be cut short there.
	if n := len(ScriptURL(base, make(net.HardwareAddr, 6))); n > 127 {
		return nil, fmt.Errorf("boot service base URL %q is too long: script URLs would be %d bytes, DHCP carries 127", opts.BaseURL, n)
	}
	d := &DHCPResponder{hosts: hosts, opts: opts, serverIP: serverIP, baseURL: base}
	switch opts.Mode {
	case DHCPModeProxy:
		d.announced = newAnnouncements(opts.AnnouncementTTL, opts.Now)
	case DHCPModeFull:
		if opts.Pool == nil {
			return nil, errors.New("full DHCP mode needs an address pool")
		}
		if d.leases, err = newLeases(*opts.Pool); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown DHCP mode %q: want %s or %s", opts.Mode, DHCPModeProxy, DHCPModeFull)
	}
	return d, nil
}

// Respond returns the reply to req, or nil when the service should stay silent: a message
// type it does not answer, a non-PXE client in proxy mode, an unknown host, another server
// chosen by the client. It does not know where req came from, so it notes no address; the
// server uses RespondFrom.
func (d *DHCPResponder) Respond(ctx context.Context, req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, error) {
	return d.RespondFrom(ctx, req, nil)
}

// RespondFrom is Respond for a request that came from the address from. In proxy mode it
// also notes the address a known PXE client takes, even from another server, which its
// install script then goes to: option 50 of a REQUEST sent by a client without an address
// (source 0.0.0.0), or ciaddr of a REQUEST sent from that very address (the
// ProxyDHCP request on port 4011). Relayed requests (giaddr set), addresses outside Subnet
// and requests whose source does not match are not taken. A RELEASE or DECLINE of a known
// host forgets its address.
func (d *DHCPResponder) RespondFrom(ctx context.Context, req *dhcpv4.DHCPv4, from *net.UDPAddr) (*dhcpv4.DHCPv4, error) {
	if req == nil || req.OpCode != dhcpv4.OpcodeBootRequest || req.HWType != iana.HWTypeEthernet || len(req.ClientHWAddr) != 6 {
		return nil, nil
	}
	msgType := req.MessageType()
	if d.announced != nil && (msgType == dhcpv4.MessageTypeRelease || msgType == dhcpv4.MessageTypeDecline) {
		d.announced.forget(req.ClientHWAddr)
		return nil, nil
	}
	if msgType != dhcpv4.MessageTypeDiscover && msgType != dhcpv4.MessageTypeRequest {
		return nil, nil
	}
	// A REQUEST for another server's offer is not ours to answer; in proxy mode it still tells
	// which address the host takes.
	sid := req.ServerIdentifier()
	otherServer := msgType == dhcpv4.MessageTypeRequest && sid != nil && !sid.Equal(d.serverIP)
	if otherServer && d.opts.Mode != DHCPModeProxy {
		return nil, nil
	}
	pxe := strings.HasPrefix(req.ClassIdentifier(), "PXEClient")
	if d.opts.Mode == DHCPModeProxy && !pxe {
		return nil, nil
	}
	mac := req.ClientHWAddr
	log := logr.FromContextOrDiscard(ctx).WithValues("mac", mac.String())
	host, err := d.hosts.Lookup(ctx, mac)
	if err != nil {
		return nil, fmt.Errorf("failed to look up host for MAC %s: %w", mac, err)
	}
	if host == nil {
		if pxe && !otherServer && d.opts.Register != nil {
			d.opts.Register(ctx, mac)
		}
		log.V(4).Info("Ignoring DHCP request from unknown MAC address")
		return nil, nil
	}
	if d.announced != nil && msgType == dhcpv4.MessageTypeRequest {
		if ip := d.announcedAddress(req, from); ip != nil {
			d.announced.record(mac, ip)
			log.V(4).Info("Host announced its address", "host", host.Name.String(), "ip", ip.String())
		}
	}
	if otherServer {
		return nil, nil
	}

	bootFile := ""
	if pxe || isIPXE(req) {
		if bootFile = d.bootFile(req, host); bootFile == "" && d.opts.Mode == DHCPModeProxy {
			log.V(2).Info("Ignoring PXE client with an unsupported architecture", "host", host.Name.String())
			return nil, nil
		}
	}

	reply, err := dhcpv4.NewReplyFromRequest(req,
		dhcpv4.WithServerIP(d.serverIP),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(d.serverIP)),
	)
	if err != nil {
		return nil, fmt.Errorf("failed to build DHCP reply: %w", err)
	}
	replyType := dhcpv4.MessageTypeOffer
	if msgType == dhcpv4.MessageTypeRequest {
		replyType = dhcpv4.MessageTypeAck
	}

	if d.opts.Mode == DHCPModeFull {
		ip, err := d.leases.addressFor(mac, host.IP)
		if err != nil {
			log.Info("No address to lease", "host", host.Name.String(), "reason", err.Error())
			return nil, nil
		}
		if msgType == dhcpv4.MessageTypeRequest && !requestedAddress(req).Equal(ip) {
			// The client asks for an address it does not own here: make it start over.
			reply.UpdateOption(dhcpv4.OptMessageType(dhcpv4.MessageTypeNak))
			reply.ServerIPAddr = net.IPv4zero
			return reply, nil
		}
		reply.YourIPAddr = ip
		d.leases.pool.addOptions(reply)
	} else {
		reply.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient"))
		// PXE discovery control: boot the file named here, do not look for boot servers.
		reply.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionVendorSpecificInformation, []byte{6, 1, 8, 255}))
	}
	reply.UpdateOption(dhcpv4.OptMessageType(replyType))
	if bootFile != "" {
		reply.BootFileName = bootFile
		reply.UpdateOption(dhcpv4.OptBootFileName(bootFile))
		reply.UpdateOption(dhcpv4.OptTFTPServerName(d.serverIP.String()))
	}
	log.V(4).Info("Answering DHCP request", "host", host.Name.String(), "type", replyType.String(), "bootFile", bootFile)
	return reply, nil
}

// AddressOf returns the address of mac as far as DHCP shows it, or nil: in full mode the
// address leased to it, in proxy mode the address it last announced in a DHCP REQUEST within
// the announcement TTL. The HTTP handler hands install scripts only to that address.
func (d *DHCPResponder) AddressOf(mac net.HardwareAddr) net.IP {
	if d.leases != nil {
		return d.leases.lookup(mac)
	}
	return d.announced.lookup(mac)
}

// bootFile is what the client should load next: the script URL once it runs iPXE, else the
// iPXE binary for its firmware. Empty for firmware the service has no iPXE for.
func (d *DHCPResponder) bootFile(req *dhcpv4.DHCPv4, host *Host) string {
	if isIPXE(req) {
		return ScriptURL(d.baseURL, req.ClientHWAddr)
	}
	if archs := req.ClientArch(); len(archs) > 0 {
		switch archs[0] {
		case iana.INTEL_X86PC:
			return BootFileBIOS
		case iana.EFI_X86_64, iana.EFI_BC:
			return d.uefiAMD64()
		case iana.EFI_ARM64:
			return BootFileUEFIARM64
		default:
			return ""
		}
	}
	switch {
	case host.Firmware == FirmwareBIOS:
		return BootFileBIOS
	case host.arch() == ArchARM64:
		return BootFileUEFIARM64
	default:
		return d.uefiAMD64()
	}
}

func (d *DHCPResponder) uefiAMD64() string {
	if d.opts.PreferSNP {
		return BootFileUEFIAMD64SNP
	}
	return BootFileUEFIAMD64
}

// isIPXE reports whether the client is iPXE, which sends user class (option 77) "iPXE",
// raw or in RFC 3004 form.
func isIPXE(req *dhcpv4.DHCPv4) bool {
	if string(req.Options.Get(dhcpv4.OptionUserClassInformation)) == "iPXE" {
		return true
	}
	for _, uc := range req.UserClass() {
		if uc == "iPXE" {
			return true
		}
	}
	return false
}

// announcedAddress is the address a REQUEST sent from the address from announces for its
// client, or nil when it is not to be taken (see RespondFrom).
func (d *DHCPResponder) announcedAddress(req *dhcpv4.DHCPv4, from *net.UDPAddr) net.IP {
	if from == nil || (req.GatewayIPAddr != nil && !req.GatewayIPAddr.IsUnspecified()) {
		return nil
	}
	var ip net.IP
	switch ciaddr := req.ClientIPAddr.To4(); {
	case ciaddr != nil && !ciaddr.IsUnspecified():
		if !ciaddr.Equal(from.IP) {
			return nil
		}
		ip = ciaddr
	case from.IP.IsUnspecified() || from.IP.Equal(net.IPv4bcast):
		// Sent from 0.0.0.0 (the DHCP server library reports that as the broadcast
		// address, where the reply goes).
		ip = req.RequestedIPAddress().To4()
	}
	if ip == nil || (d.opts.Subnet != nil && !d.opts.Subnet.Contains(ip)) {
		return nil
	}
	return ip
}

// requestedAddress is the address a REQUEST asks for: option 50 while selecting, ciaddr
// while renewing.
func requestedAddress(req *dhcpv4.DHCPv4) net.IP {
	if ip := req.RequestedIPAddress(); ip != nil && !ip.IsUnspecified() {
		return ip.To4()
	}
	return req.ClientIPAddr.To4()
}
