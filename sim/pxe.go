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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/pin/tftp/v3"
)

// NetBoot is what a host learned when it network-booted: its lease, the iPXE script and what
// the script told it to boot.
type NetBoot struct {
	// Address is the IPv4 address DHCP leased, with its network.
	Address net.IPNet
	// Firmware is the boot file the firmware loaded over TFTP (the iPXE binary); empty when
	// DHCP named none.
	Firmware string
	// FirmwareSize is the size of that file.
	FirmwareSize int
	// ScriptURL is where iPXE fetched its script.
	ScriptURL string
	// Kernel and Initramfs are the URLs the script boots; empty when it exits to the disk.
	Kernel, Initramfs string
	// KernelArgs are the kernel command line the script gives.
	KernelArgs []string
	// ConfigURL is the talos.config= argument, if any.
	ConfigURL string
	// Wipe is true when the script asks Talos to wipe the system disk.
	Wipe bool
}

// Exit reports whether the script told iPXE to boot from disk instead.
func (b *NetBoot) Exit() bool { return b.Kernel == "" }

// Firmware kinds NetworkBoot can play.
const (
	FirmwareUEFI = "UEFI"
	FirmwareBIOS = "BIOS"
)

// dhcpTimeout bounds each DHCP exchange of a boot; firmware retries a few times.
const dhcpTimeout = 3 * time.Second

// NetworkBoot does on the network interface iface, whose hardware address is the host's,
// what a host's PXE firmware and iPXE do: DHCP as a PXE client of the given firmware (UEFI or
// BIOS), the boot file over TFTP from the server DHCP names, DHCP again as iPXE, the script
// from the URL DHCP gives iPXE, then the kernel and initramfs the script names. configure puts
// the leased address on the interface, as iPXE does before it fetches the script.
func NetworkBoot(ctx context.Context, iface, firmware string, configure func(net.IPNet) error) (*NetBoot, error) {
	arch := iana.EFI_X86_64
	if firmware == FirmwareBIOS {
		arch = iana.INTEL_X86PC
	}
	vendorClass := fmt.Sprintf("PXEClient:Arch:%05d:UNDI:003016", uint16(arch))
	firmwareLease, err := pxeDHCP(ctx, iface,
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(vendorClass)),
		dhcpv4.WithOption(dhcpv4.OptClientArch(arch)))
	if err != nil {
		return nil, fmt.Errorf("PXE firmware: %w", err)
	}
	boot := &NetBoot{}
	if file := firmwareLease.bootFile; file != "" {
		size, err := tftpGet(ctx, firmwareLease.server, file)
		if err != nil {
			return nil, fmt.Errorf("PXE firmware: TFTP %s from %s: %w", file, firmwareLease.server, err)
		}
		boot.Firmware, boot.FirmwareSize = file, size
	}
	// iPXE asks again, with its user class, and gets the script URL.
	ipxeLease, err := pxeDHCP(ctx, iface,
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(vendorClass)),
		dhcpv4.WithOption(dhcpv4.OptClientArch(arch)),
		dhcpv4.WithOption(dhcpv4.OptUserClass("iPXE")))
	if err != nil {
		return nil, fmt.Errorf("iPXE: %w", err)
	}
	boot.Address = ipxeLease.address
	if err := configure(boot.Address); err != nil {
		return nil, fmt.Errorf("iPXE: %w", err)
	}
	boot.ScriptURL = ipxeLease.bootFile
	if !strings.HasPrefix(boot.ScriptURL, "http://") && !strings.HasPrefix(boot.ScriptURL, "https://") {
		return nil, fmt.Errorf("iPXE: DHCP gave boot file %q, not a script URL", boot.ScriptURL)
	}
	client := httpClientFrom(boot.Address.IP)
	script, err := httpGet(ctx, client, boot.ScriptURL)
	if err != nil {
		return nil, fmt.Errorf("iPXE: %w", err)
	}
	if err := boot.parseScript(string(script)); err != nil {
		return nil, fmt.Errorf("iPXE script from %s: %w", boot.ScriptURL, err)
	}
	for _, asset := range []string{boot.Kernel, boot.Initramfs} {
		if asset == "" {
			continue
		}
		if _, err := httpGet(ctx, client, asset); err != nil {
			return nil, fmt.Errorf("iPXE: %w", err)
		}
	}
	return boot, nil
}

// DHCPAddress does what Talos does on a host that booted from disk: DHCP on iface for an
// address.
func DHCPAddress(ctx context.Context, iface string) (net.IPNet, error) {
	lease, err := dhcpLease(ctx, iface)
	if err != nil {
		return net.IPNet{}, err
	}
	address := net.IPNet{IP: lease.ACK.YourIPAddr.To4(), Mask: lease.ACK.SubnetMask()}
	if address.Mask == nil {
		address.Mask = net.CIDRMask(24, 32)
	}
	return address, nil
}

// parseScript reads the kernel, initrd and exit commands of an iPXE script.
func (b *NetBoot) parseScript(script string) error {
	scanner := bufio.NewScanner(strings.NewReader(script))
	first := true
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if first {
			if line != "#!ipxe" {
				return errors.New("does not start with #!ipxe")
			}
			first = false
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "kernel":
			if len(fields) < 2 {
				return errors.New("kernel without a URL")
			}
			b.Kernel, b.KernelArgs = fields[1], fields[2:]
		case "initrd":
			b.Initramfs = fields[len(fields)-1]
		case "exit":
			return nil
		case "boot":
			if b.Kernel == "" || b.Initramfs == "" {
				return errors.New("boot without kernel and initrd")
			}
			for _, arg := range b.KernelArgs {
				if v, ok := strings.CutPrefix(arg, "talos.config="); ok {
					b.ConfigURL = v
				}
				if arg == "talos.experimental.wipe=system" {
					b.Wipe = true
				}
			}
			return nil
		}
	}
	return errors.New("ends without boot or exit")
}

// pxeLease is what a PXE client's DHCP gave it.
type pxeLease struct {
	// address is the leased address and its network.
	address net.IPNet
	// bootFile is the file to load next; server is its TFTP server.
	bootFile string
	server   net.IP
}

// pxeDHCP does DHCP as PXE firmware and iPXE do on iface. Of the offers to its DISCOVER it
// takes an address offer and the boot file either from that offer (one server does both, as
// Talon in full mode) or from a ProxyDHCP offer (class PXEClient, no address, a boot file) of
// another server, which it boots without asking the proxy again on port 4011, as iPXE and
// OVMF do when the offer names the file. It REQUESTs the address from the server that offered
// it, broadcast as a client without an address does.
func pxeDHCP(ctx context.Context, iface string, modifiers ...dhcpv4.Modifier) (*pxeLease, error) {
	client, err := nclient4.New(iface, nclient4.WithTimeout(dhcpTimeout), nclient4.WithRetry(3))
	if err != nil {
		return nil, fmt.Errorf("DHCP on %s: %w", iface, err)
	}
	defer func() { _ = client.Close() }()
	discover, err := dhcpv4.NewDiscovery(client.InterfaceAddr(), modifiers...)
	if err != nil {
		return nil, fmt.Errorf("DHCP on %s: %w", iface, err)
	}
	var addressOffer, proxyOffer *dhcpv4.DHCPv4
	_, err = client.SendAndRead(ctx, client.RemoteAddr(), discover, func(m *dhcpv4.DHCPv4) bool {
		if m.MessageType() != dhcpv4.MessageTypeOffer {
			return false
		}
		switch leases := m.YourIPAddr != nil && !m.YourIPAddr.IsUnspecified(); {
		case leases && addressOffer == nil:
			addressOffer = m
		case !leases && proxyOffer == nil && strings.HasPrefix(m.ClassIdentifier(), "PXEClient") && m.BootFileName != "":
			proxyOffer = m
		}
		return addressOffer != nil && (addressOffer.BootFileName != "" || proxyOffer != nil)
	})
	if err != nil {
		return nil, fmt.Errorf("DHCP on %s: no address offer with a boot file or a ProxyDHCP offer: %w", iface, err)
	}
	lease, err := client.RequestFromOffer(ctx, addressOffer, modifiers...)
	if err != nil {
		return nil, fmt.Errorf("DHCP on %s: %w", iface, err)
	}
	result := &pxeLease{address: net.IPNet{IP: lease.ACK.YourIPAddr.To4(), Mask: lease.ACK.SubnetMask()}}
	if result.address.Mask == nil {
		result.address.Mask = net.CIDRMask(24, 32)
	}
	boot := lease.ACK
	if addressOffer.BootFileName == "" {
		boot = proxyOffer
	}
	result.bootFile, result.server = boot.BootFileName, boot.ServerIPAddr
	if name := boot.TFTPServerName(); name != "" {
		result.server = net.ParseIP(name)
	}
	return result, nil
}

// dhcpLease runs DISCOVER, OFFER, REQUEST, ACK on iface from its hardware address.
func dhcpLease(ctx context.Context, iface string, modifiers ...dhcpv4.Modifier) (*nclient4.Lease, error) {
	client, err := nclient4.New(iface, nclient4.WithTimeout(dhcpTimeout), nclient4.WithRetry(3))
	if err != nil {
		return nil, fmt.Errorf("DHCP on %s: %w", iface, err)
	}
	defer func() { _ = client.Close() }()
	lease, err := client.Request(ctx, modifiers...)
	if err != nil {
		return nil, fmt.Errorf("DHCP on %s: %w", iface, err)
	}
	if lease.ACK.YourIPAddr == nil || lease.ACK.YourIPAddr.IsUnspecified() {
		return nil, fmt.Errorf("DHCP on %s: the ACK leases no address", iface)
	}
	return lease, nil
}

// tftpGet reads file from the TFTP server at server and returns its size.
func tftpGet(ctx context.Context, server net.IP, file string) (int, error) {
	c, err := tftp.NewClient(net.JoinHostPort(server.String(), "69"))
	if err != nil {
		return 0, err
	}
	c.SetTimeout(2 * time.Second)
	c.SetRetries(3)
	wt, err := c.Receive(file, "octet")
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := wt.WriteTo(io.Discard)
	return int(n), err
}

// httpClientFrom is an HTTP client whose connections come from address, as the host's do.
func httpClientFrom(address net.IP) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: address}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
}

// httpGet downloads target.
func httpGet(ctx context.Context, client *http.Client, target string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", target, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 512<<20))
}
