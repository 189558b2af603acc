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
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talon-capi/talon/infrastructure/metal/bootservice"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/test/metallab"
	"github.com/talon-capi/talon/test/require"
)

// TestConfigGoesOnlyToItsHost is the attack of docs/metal.md's threat model on the wire, in
// both DHCP modes: a host to be installed and a second client share the provisioning network
// (a bridge), with Talon's boot service and, in proxy mode, the site's DHCP server (dnsmasq)
// leasing addresses. The second client asks for the host's install script before and after the
// host's DHCP exchange, again and again, and presents the host's config URL: it gets 403 and
// no body every time, each refusal is reported, and the host still boots and gets its config.
func TestConfigGoesOnlyToItsHost(t *testing.T) {
	require.Layer(t, metallab.Layer, metallab.DHCPServerUnavailable())
	for _, mode := range []bootservice.DHCPMode{bootservice.DHCPModeProxy, bootservice.DHCPModeFull} {
		t.Run(string(mode), func(t *testing.T) { attackHostConfig(t, mode) })
	}
}

func attackHostConfig(t *testing.T, mode bootservice.DHCPMode) {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	l := metallab.New(t, "metal")
	if mode == bootservice.DHCPModeProxy {
		l.StartDHCPServer(100, 150)
	}
	hostNIC, hostMAC := l.AddNIC(1)
	otherNIC, _ := l.AddNIC(2)
	host := types.NamespacedName{Namespace: "metal", Name: "cp-1"}
	config := []byte("version: v1alpha1\n# the cluster's CA keys would be here\n")
	refusals := startBootService(t, l, mode, host, hostMAC, config)

	// The second client has an address of its own: a lease from the site's DHCP server, or
	// one it sets itself (Talon leases only to known hosts).
	var otherIP net.IP
	if mode == bootservice.DHCPModeProxy {
		lease, err := sim.DHCPAddress(ctx, otherNIC)
		g.Expect(err).NotTo(HaveOccurred())
		otherIP = lease.IP
		setAddress(t, otherNIC, lease.String())
	} else {
		otherIP = net.ParseIP(l.Prefix + "200").To4()
		setAddress(t, otherNIC, otherIP.String()+"/24")
	}
	other := clientFrom(otherIP)
	scriptURL := "http://" + net.JoinHostPort(l.ServerIP.String(), "8081") + "/ipxe?mac=" + hostMAC.String()

	// Before the host's DHCP exchange the service knows no address of it: nobody gets the script.
	expectRefused(g, other, scriptURL)
	g.Expect(refusals.last()).To(MatchError(bootservice.ErrAddressUnknown))

	// The host boots: PXE firmware and iPXE, DHCP from the site's server and the proxy, or
	// from Talon alone.
	boot, err := sim.NetworkBoot(ctx, hostNIC, sim.FirmwareUEFI, func(address net.IPNet) error {
		setAddress(t, hostNIC, address.String())
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(boot.Firmware).To(Equal(bootservice.BootFileUEFIAMD64))
	g.Expect(boot.ConfigURL).NotTo(BeEmpty(), "the host got no config URL")
	first, last := byte(10), byte(14) // Talon's pool
	if mode == bootservice.DHCPModeProxy {
		first, last = 100, 150 // the site's DHCP server's
	}
	g.Expect(boot.Address.IP.To4()[3]).To(And(BeNumerically(">=", first), BeNumerically("<=", last)), "leased %s", boot.Address.IP)

	// Now the host's address is known, and it is not the second client's; asking again and
	// again neither gets the script nor replaces the host's config URL.
	for range 20 {
		expectRefused(g, other, scriptURL)
	}
	g.Expect(refusals.last()).To(MatchError(bootservice.ErrWrongAddress))
	expectRefused(g, other, boot.ConfigURL)
	g.Expect(refusals.last()).To(MatchError(bootservice.ErrTokenWrongRequester))

	// The host still gets its config, once.
	status, body := get(g, clientFrom(boot.Address.IP), boot.ConfigURL)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(Equal(config))
	g.Expect(refusals.count(host)).To(Equal(22), "every refused request is reported on the host")
}

// startBootService serves DHCP, TFTP and HTTP on the lab's bridge for one host to install,
// and returns the refusals it reports.
func startBootService(t *testing.T, l *metallab.Lab, mode bootservice.DHCPMode, host types.NamespacedName, mac net.HardwareAddr, config []byte) *refusalLog {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	serve := func(fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil && ctx.Err() == nil {
				t.Errorf("boot service: %v", err)
			}
		}()
	}

	hosts := bootservice.NewStaticHosts()
	hosts.Set(mac, bootservice.Host{Name: host, Action: bootservice.BootActionInstall, Kernel: "vmlinuz-amd64", Initramfs: "initramfs-amd64.xz"})
	assets, tftpDir := t.TempDir(), t.TempDir()
	for dir, name := range map[string]string{assets: "vmlinuz-amd64", tftpDir: bootservice.BootFileUEFIAMD64} {
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte("stand-in "+name+"\n"), 0o600)).To(Succeed())
	}
	g.Expect(os.WriteFile(filepath.Join(assets, "initramfs-amd64.xz"), []byte("stand-in initramfs\n"), 0o600)).To(Succeed())

	baseURL := "http://" + net.JoinHostPort(l.ServerIP.String(), "8081")
	dhcp, err := bootservice.NewDHCPResponder(hosts, bootservice.DHCPOptions{
		Mode: mode, ServerIP: l.ServerIP, BaseURL: baseURL,
		Pool: &bootservice.AddressPool{Start: net.ParseIP(l.Prefix + "10"), End: net.ParseIP(l.Prefix + "14"), Netmask: net.CIDRMask(24, 32)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	refusals := &refusalLog{}
	handler, err := bootservice.NewHTTPHandler(hosts, staticConfig(config), bootservice.NewTokens(bootservice.TokensOptions{}),
		bootservice.HTTPOptions{BaseURL: baseURL, AssetDir: assets, Addresses: dhcp, Refusals: refusals.add})
	g.Expect(err).NotTo(HaveOccurred())
	listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", l.ServerIP.String()+":8081")
	g.Expect(err).NotTo(HaveOccurred())
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	context.AfterFunc(ctx, func() { _ = server.Close() })
	serve(func() error {
		if err := server.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})

	tftp, err := bootservice.NewTFTPServer(bootservice.TFTPOptions{Dir: tftpDir})
	g.Expect(err).NotTo(HaveOccurred())
	tftpConn, err := (&net.ListenConfig{}).ListenPacket(ctx, "udp4", l.ServerIP.String()+":69")
	g.Expect(err).NotTo(HaveOccurred())
	context.AfterFunc(ctx, tftp.Shutdown)
	serve(func() error { return tftp.Serve(tftpConn) })

	dhcpConn, err := bootservice.ListenDHCP(l.Bridge)
	g.Expect(err).NotTo(HaveOccurred())
	serve(func() error { return dhcp.ServeDHCP(ctx, dhcpConn) })
	if mode == bootservice.DHCPModeProxy {
		pxeConn, err := bootservice.ListenPXE(l.ServerIP)
		g.Expect(err).NotTo(HaveOccurred())
		serve(func() error { return dhcp.ServeDHCP(ctx, pxeConn) })
	}
	return refusals
}

type staticConfig []byte

func (c staticConfig) BootstrapData(context.Context, types.NamespacedName) ([]byte, error) {
	return c, nil
}

// refusalLog keeps the refusals the service reports.
type refusalLog struct {
	mu   sync.Mutex
	list []bootservice.Refusal
}

func (r *refusalLog) add(refusal bootservice.Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, refusal)
}

// last is the reason of the latest refusal.
func (r *refusalLog) last() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) == 0 {
		return nil
	}
	return r.list[len(r.list)-1].Reason
}

// count is how many refusals concern host.
func (r *refusalLog) count(host types.NamespacedName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, refusal := range r.list {
		if refusal.Host == host {
			n++
		}
	}
	return n
}

// expectRefused asks for target and expects 403 with nothing in the body.
func expectRefused(g Gomega, client *http.Client, target string) {
	status, body := get(g, client, target)
	g.ExpectWithOffset(1, status).To(Equal(http.StatusForbidden), "GET %s", target)
	g.ExpectWithOffset(1, body).To(BeEmpty(), "GET %s", target)
}

func get(g Gomega, client *http.Client, target string) (int, []byte) {
	resp, err := client.Get(target) //nolint:noctx // a test's client with a timeout
	g.ExpectWithOffset(2, err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.ExpectWithOffset(2, err).NotTo(HaveOccurred())
	return resp.StatusCode, body
}

// clientFrom is an HTTP client whose connections come from address.
func clientFrom(address net.IP) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: address}}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
}

// setAddress puts cidr on nic in place of the addresses it had.
func setAddress(t *testing.T, nic, cidr string) {
	t.Helper()
	metallab.IP(t, "address", "flush", "dev", nic)
	metallab.IP(t, "address", "add", cidr, "dev", nic)
}
