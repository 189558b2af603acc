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
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talon-capi/talon/infrastructure/metal/bootservice"
)

// staticConfigs hands every host the same config.
type staticConfigs []byte

func (c staticConfigs) BootstrapData(context.Context, types.NamespacedName) ([]byte, error) {
	return c, nil
}

// Example follows one host through the chain: DHCP names iPXE, then the script URL; the
// script carries a one-time config URL; the config is served once.
func Example() {
	mac, _ := bootservice.ParseMAC("52:54:00:00:00:01")
	hosts := bootservice.NewStaticHosts()
	hosts.Set(mac, bootservice.Host{
		Name:   types.NamespacedName{Namespace: "metal", Name: "node-1"},
		Action: bootservice.BootActionInstall, Kernel: "vmlinuz-amd64", Initramfs: "initramfs-amd64.xz",
	})

	// HTTP: scripts, assets and configs. Hosts reach it on the address of the test server.
	var handler http.Handler
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	defer server.Close()

	// DHCP, proxy mode: the firmware is told to load iPXE, iPXE is told to load the script.
	dhcp, err := bootservice.NewDHCPResponder(hosts, bootservice.DHCPOptions{
		Mode: bootservice.DHCPModeProxy, ServerIP: net.IPv4(127, 0, 0, 1), BaseURL: server.URL,
	})
	if err != nil {
		panic(err)
	}
	pxe := []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
	}
	for _, userClass := range []string{"", "iPXE"} {
		req, _ := dhcpv4.NewDiscovery(mac, pxe...)
		if userClass != "" {
			req.UpdateOption(dhcpv4.OptUserClass(userClass))
		}
		reply, _ := dhcp.Respond(context.Background(), req)
		fmt.Println("boot file:", regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(reply.BootFileName, "SERVER"))
	}
	// iPXE takes its address from the site's DHCP server, broadcasting its REQUEST: the proxy
	// notes the address, the only one the host's install script will go to.
	request, _ := dhcpv4.NewDiscovery(mac, append(pxe,
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(127, 0, 0, 53))),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(127, 0, 0, 1))))...)
	fromNoAddress := &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
	if reply, _ := dhcp.RespondFrom(context.Background(), request, fromNoAddress); reply == nil {
		fmt.Println("address noted:", dhcp.AddressOf(mac))
	}

	handler, err = bootservice.NewHTTPHandler(hosts, staticConfigs("machine: {}\n"), bootservice.NewTokens(bootservice.TokensOptions{}),
		bootservice.HTTPOptions{BaseURL: server.URL, Addresses: dhcp, Refusals: func(r bootservice.Refusal) {
			fmt.Printf("refused %s for %s: %v\n", r.Endpoint, r.Host, r.Reason)
		}})
	if err != nil {
		panic(err)
	}

	get := func(url string) (int, string) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, http.NoBody)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	_, script := get(bootservice.ScriptURL(mustParse(server.URL), mac))
	configURL := regexp.MustCompile(`talos\.config=(\S+)`).FindStringSubmatch(script)[1]
	for range 2 {
		code, body := get(configURL)
		fmt.Printf("config: %d %q\n", code, body)
	}
	// Output:
	// boot file: ipxe.efi
	// boot file: http://SERVER/ipxe?mac=52%3A54%3A00%3A00%3A00%3A01
	// address noted: 127.0.0.1
	// config: 200 "machine: {}\n"
	// refused config for metal/node-1: config token already used
	// config: 403 ""
}

func mustParse(raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return u
}
