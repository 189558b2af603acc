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

package bootservice_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talon-capi/talon/infrastructure/metal/bootservice"
)

// BenchmarkBoot measures what the boot service does for one host's network boot: the two
// DHCP answers (PXE firmware, then iPXE) in full mode, the iPXE script with a fresh one-time
// token, and the config fetch that spends it. It reports boots/s, the rate one service
// provisions hosts at when their firmware is not the bottleneck.
func BenchmarkBoot(b *testing.B) {
	const hosts = 256
	inventory := bootservice.NewStaticHosts()
	macs := make([]net.HardwareAddr, hosts)
	for i := range macs {
		macs[i] = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, byte(i >> 8), byte(i)}
		inventory.Set(macs[i], bootservice.Host{
			Name:   types.NamespacedName{Namespace: "metal", Name: fmt.Sprintf("host-%d", i)},
			Action: bootservice.BootActionInstall, Kernel: "vmlinuz-amd64", Initramfs: "initramfs-amd64.xz",
		})
	}
	config := staticConfigs(strings.Repeat("# a machine config of a realistic size\n", 600))
	const base = "http://10.0.0.1:8081"
	dhcp, err := bootservice.NewDHCPResponder(inventory, bootservice.DHCPOptions{
		Mode: bootservice.DHCPModeFull, ServerIP: net.IPv4(10, 0, 0, 1), BaseURL: base,
		Pool: &bootservice.AddressPool{Start: net.IPv4(10, 0, 0, 10), End: net.IPv4(10, 0, 3, 255), Netmask: net.CIDRMask(22, 32)},
	})
	if err != nil {
		b.Fatal(err)
	}
	handler, err := bootservice.NewHTTPHandler(inventory, config, bootservice.NewTokens(bootservice.TokensOptions{}),
		bootservice.HTTPOptions{BaseURL: base, Addresses: dhcp})
	if err != nil {
		b.Fatal(err)
	}
	get := func(target string, ip net.IP) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, target, http.NoBody)
		req.RemoteAddr = net.JoinHostPort(ip.String(), "40000")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		mac := macs[i%hosts]
		i++
		var ip net.IP
		for _, ipxe := range []bool{false, true} {
			mods := []dhcpv4.Modifier{
				dhcpv4.WithHwAddr(mac), dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003016")),
				dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
			}
			if ipxe {
				mods = append(mods, dhcpv4.WithOption(dhcpv4.OptUserClass("iPXE")))
			}
			discover, err := dhcpv4.NewDiscovery(mac, mods...)
			if err != nil {
				b.Fatal(err)
			}
			offer, err := dhcp.Respond(ctx, discover)
			if err != nil || offer == nil {
				b.Fatalf("no offer: %v", err)
			}
			request, err := dhcpv4.NewRequestFromOffer(offer, mods...)
			if err != nil {
				b.Fatal(err)
			}
			ack, err := dhcp.Respond(ctx, request)
			if err != nil || ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
				b.Fatalf("no ACK: %v", err)
			}
			ip = ack.YourIPAddr
		}
		script := get("/ipxe?mac="+url.QueryEscape(mac.String()), ip)
		if script.Code != http.StatusOK {
			b.Fatalf("script: %d", script.Code)
		}
		at := strings.Index(script.Body.String(), "talos.config=")
		configURL := strings.Fields(script.Body.String()[at+len("talos.config="):])[0]
		u, err := url.Parse(configURL)
		if err != nil {
			b.Fatal(err)
		}
		if rec := get(u.RequestURI(), ip); rec.Code != http.StatusOK {
			b.Fatalf("config: %d", rec.Code)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "boots/s")
}
