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
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

var (
	serverIP  = net.IPv4(10, 0, 0, 1).To4()
	otherIP   = net.IPv4(10, 0, 0, 2).To4()
	hostBIOS  = types.NamespacedName{Namespace: "metal", Name: "host-bios"}
	macBIOS   = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0xb1}
	hostFixed = types.NamespacedName{Namespace: "metal", Name: "host-fixed"}
	macFixed  = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0xf1}
	fixedIP   = net.IPv4(10, 0, 0, 50).To4()
)

func dhcpHosts() *StaticHosts {
	hosts := testHosts()
	hosts.Set(macBIOS, Host{Name: hostBIOS, Firmware: FirmwareBIOS, Action: BootActionDisk})
	hosts.Set(macFixed, Host{Name: hostFixed, Firmware: FirmwareUEFI, Action: BootActionDisk, IP: fixedIP})
	return hosts
}

func testPool() *AddressPool {
	return &AddressPool{
		Start: net.IPv4(10, 0, 0, 100), End: net.IPv4(10, 0, 0, 101), Netmask: net.CIDRMask(24, 32),
		Router: serverIP, DNS: []net.IP{net.IPv4(10, 0, 0, 53)}, LeaseTime: 10 * time.Minute,
	}
}

// Client kinds: what PXE firmware, iPXE and the Talos kernel send.
func pxeClient(arch iana.Arch) dhcpv4.Modifier {
	return func(d *dhcpv4.DHCPv4) {
		d.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003016"))
		d.UpdateOption(dhcpv4.OptClientArch(arch))
	}
}

func ipxeClient(arch iana.Arch) dhcpv4.Modifier {
	return func(d *dhcpv4.DHCPv4) {
		pxeClient(arch)(d)
		d.UpdateOption(dhcpv4.OptUserClass("iPXE"))
	}
}

func pxeClientNoArch(d *dhcpv4.DHCPv4) {
	d.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient"))
}

func plainClient(*dhcpv4.DHCPv4) {}

func discover(g Gomega, mac net.HardwareAddr, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	m, err := dhcpv4.NewDiscovery(mac, mods...)
	g.Expect(err).NotTo(HaveOccurred())
	return m
}

func request(g Gomega, mac net.HardwareAddr, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	m := discover(g, mac, mods...)
	m.UpdateOption(dhcpv4.OptMessageType(dhcpv4.MessageTypeRequest))
	return m
}

func withOption(o dhcpv4.Option) dhcpv4.Modifier { return dhcpv4.WithOption(o) }

func TestDHCPRespond(t *testing.T) {
	scriptA := "http://10.0.0.1:8081/ipxe?mac=52%3A54%3A00%3A00%3A00%3A0a"
	for _, tc := range []struct {
		name      string
		mode      DHCPMode
		preferSNP bool
		req       func(g Gomega) *dhcpv4.DHCPv4
		// wantType is the reply's type; zero means no reply.
		wantType     dhcpv4.MessageType
		wantBootFile string
		wantYourIP   net.IP
		wantRegister bool
	}{
		// Proxy mode: only PXE clients, never an address.
		{name: "proxy, UEFI x86-64", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeOffer, wantBootFile: "ipxe.efi",
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, pxeClient(iana.EFI_X86_64)) }},
		{name: "proxy, UEFI byte code", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeOffer, wantBootFile: "ipxe.efi",
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, pxeClient(iana.EFI_BC)) }},
		{name: "proxy, UEFI x86-64 preferring SNP", mode: DHCPModeProxy, preferSNP: true, wantType: dhcpv4.MessageTypeOffer, wantBootFile: "snponly.efi",
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, pxeClient(iana.EFI_X86_64)) }},
		{name: "proxy, BIOS", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeOffer, wantBootFile: "undionly.kpxe",
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, pxeClient(iana.INTEL_X86PC)) }},
		{name: "proxy, arm64 UEFI", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeOffer, wantBootFile: "ipxe-arm64.efi",
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, pxeClient(iana.EFI_ARM64)) }},
		{name: "proxy, no option 93, BIOS host", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeOffer, wantBootFile: "undionly.kpxe",
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macBIOS, pxeClientNoArch) }},
		{name: "proxy, no option 93, UEFI host", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeOffer, wantBootFile: "ipxe.efi",
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, pxeClientNoArch) }},
		{name: "proxy, iPXE gets the script URL", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeOffer, wantBootFile: scriptA,
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, ipxeClient(iana.EFI_X86_64)) }},
		{name: "proxy, iPXE with an RFC 3004 user class", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeOffer, wantBootFile: scriptA,
			req: func(g Gomega) *dhcpv4.DHCPv4 {
				return discover(g, macA, pxeClient(iana.INTEL_X86PC), dhcpv4.WithUserClass("iPXE", true))
			}},
		{name: "proxy, boot-server request without server identifier", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeAck, wantBootFile: "ipxe.efi",
			req: func(g Gomega) *dhcpv4.DHCPv4 { return request(g, macA, pxeClient(iana.EFI_X86_64)) }},
		{name: "proxy, request to this server", mode: DHCPModeProxy, wantType: dhcpv4.MessageTypeAck, wantBootFile: "ipxe.efi",
			req: func(g Gomega) *dhcpv4.DHCPv4 {
				return request(g, macA, pxeClient(iana.EFI_X86_64), withOption(dhcpv4.OptServerIdentifier(serverIP)))
			}},
		{name: "proxy, request to the site's DHCP server", mode: DHCPModeProxy,
			req: func(g Gomega) *dhcpv4.DHCPv4 {
				return request(g, macA, pxeClient(iana.EFI_X86_64), withOption(dhcpv4.OptServerIdentifier(otherIP)))
			}},
		{name: "proxy, non-PXE client", mode: DHCPModeProxy,
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, plainClient) }},
		{name: "proxy, unsupported architecture", mode: DHCPModeProxy,
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, pxeClient(iana.EFI_IA32)) }},
		{name: "proxy, unknown host is registered, not answered", mode: DHCPModeProxy, wantRegister: true,
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macNone, pxeClient(iana.EFI_X86_64)) }},
		{name: "proxy, release", mode: DHCPModeProxy,
			req: func(g Gomega) *dhcpv4.DHCPv4 {
				m := discover(g, macA, pxeClient(iana.EFI_X86_64))
				m.UpdateOption(dhcpv4.OptMessageType(dhcpv4.MessageTypeRelease))
				return m
			}},
		{name: "proxy, a reply is not a request", mode: DHCPModeProxy,
			req: func(g Gomega) *dhcpv4.DHCPv4 {
				m := discover(g, macA, pxeClient(iana.EFI_X86_64))
				m.OpCode = dhcpv4.OpcodeBootReply
				return m
			}},

		// Full mode: addresses for known hosts, boot files for PXE clients among them.
		{name: "full, UEFI x86-64", mode: DHCPModeFull, wantType: dhcpv4.MessageTypeOffer, wantBootFile: "ipxe.efi", wantYourIP: net.IPv4(10, 0, 0, 100),
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, pxeClient(iana.EFI_X86_64)) }},
		{name: "full, iPXE", mode: DHCPModeFull, wantType: dhcpv4.MessageTypeOffer, wantBootFile: scriptA, wantYourIP: net.IPv4(10, 0, 0, 100),
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, ipxeClient(iana.EFI_X86_64)) }},
		{name: "full, the Talos kernel gets an address and no boot file", mode: DHCPModeFull, wantType: dhcpv4.MessageTypeOffer, wantYourIP: net.IPv4(10, 0, 0, 100),
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macA, plainClient) }},
		{name: "full, fixed IP", mode: DHCPModeFull, wantType: dhcpv4.MessageTypeOffer, wantBootFile: "ipxe.efi", wantYourIP: fixedIP,
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macFixed, pxeClient(iana.EFI_X86_64)) }},
		{name: "full, request for the offered address", mode: DHCPModeFull, wantType: dhcpv4.MessageTypeAck, wantBootFile: "undionly.kpxe", wantYourIP: net.IPv4(10, 0, 0, 100),
			req: func(g Gomega) *dhcpv4.DHCPv4 {
				return request(g, macA, pxeClient(iana.INTEL_X86PC),
					withOption(dhcpv4.OptServerIdentifier(serverIP)), withOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 0, 0, 100))))
			}},
		{name: "full, renewal from the leased address", mode: DHCPModeFull, wantType: dhcpv4.MessageTypeAck, wantYourIP: fixedIP,
			req: func(g Gomega) *dhcpv4.DHCPv4 { return request(g, macFixed, plainClient, dhcpv4.WithClientIP(fixedIP)) }},
		{name: "full, request for another address is refused", mode: DHCPModeFull, wantType: dhcpv4.MessageTypeNak,
			req: func(g Gomega) *dhcpv4.DHCPv4 {
				return request(g, macA, plainClient, withOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 0, 0, 7))))
			}},
		{name: "full, unknown non-PXE client", mode: DHCPModeFull,
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macNone, plainClient) }},
		{name: "full, unknown PXE client is registered, not answered", mode: DHCPModeFull, wantRegister: true,
			req: func(g Gomega) *dhcpv4.DHCPv4 { return discover(g, macNone, pxeClient(iana.EFI_X86_64)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var registered []string
			var mu sync.Mutex
			d, err := NewDHCPResponder(dhcpHosts(), DHCPOptions{
				Mode: tc.mode, ServerIP: serverIP, BaseURL: testBaseURL, Pool: testPool(), PreferSNP: tc.preferSNP,
				Register: func(_ context.Context, mac net.HardwareAddr) {
					mu.Lock()
					defer mu.Unlock()
					registered = append(registered, mac.String())
				},
			})
			g.Expect(err).NotTo(HaveOccurred())
			req := tc.req(g)

			reply, err := d.Respond(context.Background(), req)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.wantRegister {
				g.Expect(registered).To(ConsistOf(req.ClientHWAddr.String()))
			} else {
				g.Expect(registered).To(BeEmpty())
			}
			if tc.wantType == dhcpv4.MessageTypeNone {
				g.Expect(reply).To(BeNil())
				return
			}
			g.Expect(reply).NotTo(BeNil())
			// What goes on the wire parses back to the same answer.
			reply, err = dhcpv4.FromBytes(reply.ToBytes())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reply.OpCode).To(Equal(dhcpv4.OpcodeBootReply))
			g.Expect(reply.MessageType()).To(Equal(tc.wantType))
			g.Expect(reply.TransactionID).To(Equal(req.TransactionID))
			g.Expect(reply.ClientHWAddr).To(Equal(req.ClientHWAddr))
			g.Expect(reply.ServerIdentifier()).To(Equal(serverIP))
			if tc.wantType == dhcpv4.MessageTypeNak {
				g.Expect(reply.YourIPAddr.IsUnspecified()).To(BeTrue())
				g.Expect(reply.BootFileName).To(BeEmpty())
				return
			}
			g.Expect(reply.BootFileName).To(Equal(tc.wantBootFile))
			g.Expect(reply.BootFileNameOption()).To(Equal(tc.wantBootFile))
			if tc.wantBootFile != "" {
				g.Expect(reply.ServerIPAddr.Equal(serverIP)).To(BeTrue(), "next-server")
				g.Expect(reply.TFTPServerName()).To(Equal("10.0.0.1"))
			}
			if tc.mode == DHCPModeProxy {
				g.Expect(reply.YourIPAddr.IsUnspecified()).To(BeTrue(), "proxy DHCP leases no address")
				g.Expect(reply.ClassIdentifier()).To(Equal("PXEClient"))
				g.Expect(reply.SubnetMask()).To(BeNil())
				return
			}
			g.Expect(reply.YourIPAddr.Equal(tc.wantYourIP)).To(BeTrue(), "yiaddr %s", reply.YourIPAddr)
			g.Expect(reply.SubnetMask()).To(Equal(net.CIDRMask(24, 32)))
			g.Expect(ipStrings(reply.Router())).To(ConsistOf("10.0.0.1"))
			g.Expect(ipStrings(reply.DNS())).To(ConsistOf("10.0.0.53"))
			g.Expect(reply.IPAddressLeaseTime(0)).To(Equal(10 * time.Minute))
		})
	}
}

func TestDHCPFullModeLeases(t *testing.T) {
	g := NewWithT(t)
	hosts := NewStaticHosts()
	macs := []net.HardwareAddr{macA, macB, macDisk}
	for i, mac := range macs {
		hosts.Set(mac, Host{Name: types.NamespacedName{Namespace: "metal", Name: string(rune('a' + i))}, Action: BootActionDisk})
	}
	d, err := NewDHCPResponder(hosts, DHCPOptions{Mode: DHCPModeFull, ServerIP: serverIP, BaseURL: testBaseURL, Pool: testPool()})
	g.Expect(err).NotTo(HaveOccurred())
	offer := func(mac net.HardwareAddr) *dhcpv4.DHCPv4 {
		reply, err := d.Respond(context.Background(), discover(g, mac, plainClient))
		g.Expect(err).NotTo(HaveOccurred())
		return reply
	}
	g.Expect(offer(macA).YourIPAddr.String()).To(Equal("10.0.0.100"))
	g.Expect(offer(macB).YourIPAddr.String()).To(Equal("10.0.0.101"))
	g.Expect(offer(macA).YourIPAddr.String()).To(Equal("10.0.0.100"), "a host keeps its address")
	g.Expect(offer(macDisk)).To(BeNil(), "the pool of two is exhausted")
}

func TestNewDHCPResponderRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    DHCPOptions
		wantErr string
	}{
		{name: "no mode", opts: DHCPOptions{ServerIP: serverIP, BaseURL: testBaseURL}, wantErr: `unknown DHCP mode ""`},
		{name: "no server IP", opts: DHCPOptions{Mode: DHCPModeProxy, BaseURL: testBaseURL}, wantErr: "is not an IPv4 address"},
		{name: "IPv6 server IP", opts: DHCPOptions{Mode: DHCPModeProxy, ServerIP: net.ParseIP("fd00::1"), BaseURL: testBaseURL}, wantErr: "is not an IPv4 address"},
		{name: "bad base URL", opts: DHCPOptions{Mode: DHCPModeProxy, ServerIP: serverIP, BaseURL: "10.0.0.1"}, wantErr: "invalid boot service base URL"},
		{name: "base URL too long for DHCP", opts: DHCPOptions{Mode: DHCPModeProxy, ServerIP: serverIP, BaseURL: testBaseURL + "/" + strings.Repeat("a", 70)},
			wantErr: "is too long: script URLs would be 128 bytes"},
		{name: "full without pool", opts: DHCPOptions{Mode: DHCPModeFull, ServerIP: serverIP, BaseURL: testBaseURL}, wantErr: "needs an address pool"},
		{name: "full, reversed range", opts: DHCPOptions{Mode: DHCPModeFull, ServerIP: serverIP, BaseURL: testBaseURL,
			Pool: &AddressPool{Start: net.IPv4(10, 0, 0, 9), End: net.IPv4(10, 0, 0, 1), Netmask: net.CIDRMask(24, 32)}}, wantErr: "invalid DHCP address range"},
		{name: "full, no netmask", opts: DHCPOptions{Mode: DHCPModeFull, ServerIP: serverIP, BaseURL: testBaseURL,
			Pool: &AddressPool{Start: net.IPv4(10, 0, 0, 1), End: net.IPv4(10, 0, 0, 9)}}, wantErr: "invalid DHCP netmask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := NewDHCPResponder(dhcpHosts(), tc.opts)
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

func TestDHCPResponderKnowsItsLeases(t *testing.T) {
	g := NewWithT(t)
	d, err := NewDHCPResponder(dhcpHosts(), DHCPOptions{Mode: DHCPModeFull, ServerIP: serverIP, BaseURL: testBaseURL, Pool: testPool()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.AddressOf(macA)).To(BeNil())
	_, err = d.Respond(context.Background(), discover(g, macA, pxeClient(iana.EFI_X86_64)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.AddressOf(macA).String()).To(Equal("10.0.0.100"))

	proxy, err := NewDHCPResponder(dhcpHosts(), DHCPOptions{Mode: DHCPModeProxy, ServerIP: serverIP, BaseURL: testBaseURL})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(proxy.AddressOf(macA)).To(BeNil())
}

// TestProxyNotesAnnouncedAddresses: in proxy mode the address a known PXE client asks the
// site's server for (sent from 0.0.0.0), or presents to the proxy on port 4011 from that very
// address, becomes its address for the announcement TTL; unknown clients, non-PXE clients,
// relayed requests, mismatched sources, addresses outside the subnet and full mode note
// nothing, and a RELEASE forgets.
func TestProxyNotesAnnouncedAddresses(t *testing.T) {
	leased, other := net.IPv4(10, 0, 0, 77).To4(), net.IPv4(10, 0, 0, 78).To4()
	noAddress := &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort} // as server4 reports 0.0.0.0
	toSite := func(ip net.IP) dhcpv4.Modifier {
		return func(d *dhcpv4.DHCPv4) {
			withOption(dhcpv4.OptServerIdentifier(otherIP))(d)
			withOption(dhcpv4.OptRequestedIPAddress(ip))(d)
		}
	}
	toProxy := func(ip net.IP) dhcpv4.Modifier {
		return func(d *dhcpv4.DHCPv4) {
			withOption(dhcpv4.OptServerIdentifier(serverIP))(d)
			d.ClientIPAddr = ip
		}
	}
	type sent struct {
		req  *dhcpv4.DHCPv4
		from *net.UDPAddr
	}
	from := func(ip net.IP) *net.UDPAddr { return &net.UDPAddr{IP: ip, Port: dhcpv4.ClientPort} }
	for _, tc := range []struct {
		name     string
		mode     DHCPMode
		requests func(g Gomega) []sent
		after    time.Duration
		want     net.IP
	}{
		{name: "iPXE's REQUEST to the site's server", mode: DHCPModeProxy, want: leased,
			requests: func(g Gomega) []sent {
				return []sent{{request(g, macA, ipxeClient(iana.EFI_X86_64), toSite(leased)), noAddress}}
			}},
		{name: "ProxyDHCP REQUEST on port 4011 from its address", mode: DHCPModeProxy, want: leased,
			requests: func(g Gomega) []sent {
				return []sent{{request(g, macA, pxeClient(iana.EFI_X86_64), toProxy(leased)), from(leased)}}
			}},
		{name: "the latest announcement wins", mode: DHCPModeProxy, want: other,
			requests: func(g Gomega) []sent {
				return []sent{
					{request(g, macA, pxeClient(iana.EFI_X86_64), toSite(leased)), noAddress},
					{request(g, macA, ipxeClient(iana.EFI_X86_64), toSite(other)), noAddress},
				}
			}},
		{name: "forgotten after the TTL", mode: DHCPModeProxy, after: DefaultAnnouncementTTL + time.Second,
			requests: func(g Gomega) []sent {
				return []sent{{request(g, macA, ipxeClient(iana.EFI_X86_64), toSite(leased)), noAddress}}
			}},
		{name: "forgotten on RELEASE", mode: DHCPModeProxy,
			requests: func(g Gomega) []sent {
				release := request(g, macA, pxeClient(iana.EFI_X86_64))
				release.UpdateOption(dhcpv4.OptMessageType(dhcpv4.MessageTypeRelease))
				return []sent{{request(g, macA, ipxeClient(iana.EFI_X86_64), toSite(leased)), noAddress}, {release, from(leased)}}
			}},
		{name: "a source unknown to Respond announces nothing", mode: DHCPModeProxy,
			requests: func(g Gomega) []sent {
				return []sent{{request(g, macA, ipxeClient(iana.EFI_X86_64), toSite(leased)), nil}}
			}},
		{name: "ciaddr from another source announces nothing", mode: DHCPModeProxy,
			requests: func(g Gomega) []sent {
				return []sent{{request(g, macA, pxeClient(iana.EFI_X86_64), toProxy(leased)), from(other)}}
			}},
		{name: "option 50 from a source with an address announces nothing", mode: DHCPModeProxy,
			requests: func(g Gomega) []sent {
				return []sent{{request(g, macA, ipxeClient(iana.EFI_X86_64), toSite(leased)), from(other)}}
			}},
		{name: "a relayed REQUEST announces nothing", mode: DHCPModeProxy,
			requests: func(g Gomega) []sent {
				relayed := request(g, macA, ipxeClient(iana.EFI_X86_64), toSite(leased))
				relayed.GatewayIPAddr = net.IPv4(10, 9, 0, 1)
				return []sent{{relayed, from(net.IPv4(10, 9, 0, 1))}}
			}},
		{name: "an address outside the provisioning network announces nothing", mode: DHCPModeProxy,
			requests: func(g Gomega) []sent {
				outside := net.IPv4(192, 168, 7, 7).To4()
				return []sent{{request(g, macA, pxeClient(iana.EFI_X86_64), toProxy(outside)), from(outside)}}
			}},
		{name: "a DISCOVER announces nothing", mode: DHCPModeProxy,
			requests: func(g Gomega) []sent {
				return []sent{{discover(g, macA, ipxeClient(iana.EFI_X86_64), withOption(dhcpv4.OptRequestedIPAddress(leased))), noAddress}}
			}},
		{name: "a non-PXE client announces nothing", mode: DHCPModeProxy,
			requests: func(g Gomega) []sent {
				return []sent{{request(g, macA, plainClient, toSite(leased)), noAddress}}
			}},
		{name: "broadcast and zero addresses are not addresses", mode: DHCPModeProxy,
			requests: func(g Gomega) []sent {
				return []sent{
					{request(g, macA, pxeClient(iana.EFI_X86_64), toSite(net.IPv4bcast)), noAddress},
					{request(g, macA, pxeClient(iana.EFI_X86_64), toSite(net.IPv4zero)), noAddress},
				}
			}},
		{name: "full mode: the lease, not the announcement", mode: DHCPModeFull,
			requests: func(g Gomega) []sent {
				return []sent{{request(g, macA, ipxeClient(iana.EFI_X86_64), toSite(leased)), noAddress}}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			clock := &fakeClock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
			d, err := NewDHCPResponder(dhcpHosts(), DHCPOptions{
				Mode: tc.mode, ServerIP: serverIP, BaseURL: testBaseURL, Pool: testPool(), Now: clock.Now,
				Subnet: &net.IPNet{IP: net.IPv4(10, 0, 0, 0).To4(), Mask: net.CIDRMask(24, 32)},
			})
			g.Expect(err).NotTo(HaveOccurred())
			// An unknown MAC address announcing an address is never noted.
			for _, s := range append(tc.requests(g), sent{request(g, macNone, ipxeClient(iana.EFI_X86_64), toSite(leased)), noAddress}) {
				_, err := d.RespondFrom(context.Background(), s.req, s.from)
				g.Expect(err).NotTo(HaveOccurred())
			}
			clock.Advance(tc.after)
			if tc.want == nil {
				g.Expect(d.AddressOf(macA)).To(BeNil())
			} else {
				g.Expect(d.AddressOf(macA).String()).To(Equal(tc.want.String()))
			}
			g.Expect(d.AddressOf(macNone)).To(BeNil())
		})
	}
}
