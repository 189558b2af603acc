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
	"path/filepath"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// FuzzDHCP feeds raw bytes through the path a packet from the network takes: parse, then
// decide, in both modes. Nothing may panic, and whatever is answered must serialise.
func FuzzDHCP(f *testing.F) {
	seed := func(mac []byte, mods ...dhcpv4.Modifier) {
		m, err := dhcpv4.NewDiscovery(mac, mods...)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(m.ToBytes())
	}
	seed(macA, pxeClient(iana.EFI_X86_64))
	seed(macA, ipxeClient(iana.INTEL_X86PC))
	seed(macBIOS, pxeClientNoArch)
	seed(macFixed, plainClient)
	seed(macNone, pxeClient(iana.EFI_ARM64))
	seed(macA, pxeClient(iana.EFI_X86_64), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(serverIP)), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 0, 0, 100))))
	f.Add([]byte{})
	f.Add([]byte{1, 1, 6, 0})
	// A short client architecture option and a user class with a bad RFC 3004 length.
	short, err := dhcpv4.NewDiscovery(macA, dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{7}),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte{200, 'i'}), pxeClientNoArch)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(short.ToBytes())

	modes := []DHCPMode{DHCPModeProxy, DHCPModeFull}
	responders := make([]*DHCPResponder, 0, len(modes))
	for _, mode := range modes {
		d, err := NewDHCPResponder(dhcpHosts(), DHCPOptions{
			Mode: mode, ServerIP: serverIP, BaseURL: testBaseURL, Pool: testPool(),
			Register: func(context.Context, net.HardwareAddr) {},
		})
		if err != nil {
			f.Fatal(err)
		}
		responders = append(responders, d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := dhcpv4.FromBytes(data)
		if err != nil {
			return
		}
		for _, d := range responders {
			reply, err := d.Respond(context.Background(), req)
			if err != nil {
				t.Fatalf("Respond: %v", err)
			}
			if reply != nil {
				if _, err := dhcpv4.FromBytes(reply.ToBytes()); err != nil {
					t.Fatalf("reply does not parse: %v", err)
				}
			}
		}
	})
}

// FuzzTFTPRequest sends raw bytes to a running TFTP server's socket, then checks that the
// server still serves, and that the name mapping never leaves the directory.
func FuzzTFTPRequest(f *testing.F) {
	rrq := func(name, mode string, opts ...string) []byte {
		b := append([]byte{0, 1}, name...)
		b = append(append(b, 0), mode...)
		b = append(b, 0)
		for _, o := range opts {
			b = append(append(b, o...), 0)
		}
		return b
	}
	f.Add(rrq("ipxe.efi", "octet"))
	f.Add(rrq("../secret", "octet"))
	f.Add(rrq("ipxe.efi", "netascii", "blksize", "1468", "tsize", "0"))
	f.Add(rrq("ipxe.efi", "octet", "blksize", "-1"))
	f.Add(append([]byte{0, 2}, rrq("ipxe.efi", "octet")[2:]...)) // a write request
	f.Add([]byte{0, 1})
	f.Add([]byte{0, 5, 0, 1, 'x', 0}) // an error packet
	f.Add([]byte{})

	// Transfers the fuzzer starts are never acknowledged: let them time out quickly.
	addr := startTFTP(f, 20*time.Millisecond, 1)
	conn, err := (&net.Dialer{}).DialContext(context.Background(), "udp4", addr)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = conn.Close() })
	// Once everything was sent, the server still serves a real client.
	f.Cleanup(func() {
		wt, err := tftpClient(f, addr).Receive("undionly.kpxe", "octet")
		if err != nil {
			f.Errorf("TFTP server stopped serving: %v", err)
			return
		}
		if n, err := wt.WriteTo(discard{}); err != nil || n != 512 {
			f.Errorf("TFTP server stopped serving: read %d bytes, %v", n, err)
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		if name, ok := tftpFileName(string(data)); ok {
			if filepath.Clean(name) != name || !filepath.IsLocal(name) || filepath.Base(name) != name {
				t.Fatalf("name %q maps to %q outside the directory", data, name)
			}
		}
		if _, err := conn.Write(data); err != nil {
			t.Fatalf("write: %v", err)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
