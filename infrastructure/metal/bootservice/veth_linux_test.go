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
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/insomniacslk/dhcp/iana"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talon-capi/talon/test/require"
)

// netnsUnavailable says why this machine cannot make network namespaces and veth or tap
// devices for the tests, or nil.
func netnsUnavailable() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root to create network namespaces and network devices (ip netns)")
	}
	if setnsTrap == 0 {
		return fmt.Errorf("does not know the setns system call number on %s", runtime.GOARCH)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("needs the ip command (Debian package iproute2)")
	}
	return nil
}

// TestDHCPOverVeth runs a real DHCP exchange on the wire: the service listens on the host end
// of a veth pair, the client socket lives in a network namespace on the other end, with no
// address yet, and broadcasts as PXE firmware does.
func TestDHCPOverVeth(t *testing.T) {
	require.Layer(t, "netns", netnsUnavailable())
	g := NewWithT(t)
	ns := fmt.Sprintf("talon-bs-%d", os.Getpid())
	hostIf := fmt.Sprintf("tbs%d", os.Getpid()%1000000)
	clientMAC := net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	ipCmd(t, "netns", "add", ns)
	t.Cleanup(func() { ipCmd(t, "netns", "del", ns) })
	ipCmd(t, "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", ns)
	t.Cleanup(func() { ipCmd(t, "link", "del", hostIf) })
	ipCmd(t, "addr", "add", "10.213.0.1/24", "dev", hostIf)
	ipCmd(t, "link", "set", hostIf, "up")
	ipCmd(t, "-n", ns, "link", "set", "eth0", "address", clientMAC.String())
	ipCmd(t, "-n", ns, "link", "set", "eth0", "up")

	hosts := NewStaticHosts()
	hosts.Set(clientMAC, Host{Name: types.NamespacedName{Namespace: "metal", Name: "veth"}, Action: BootActionDisk})
	d, err := NewDHCPResponder(hosts, DHCPOptions{
		Mode: DHCPModeFull, ServerIP: net.IPv4(10, 213, 0, 1), BaseURL: "http://10.213.0.1:8081",
		Pool: &AddressPool{Start: net.IPv4(10, 213, 0, 100), End: net.IPv4(10, 213, 0, 110), Netmask: net.CIDRMask(24, 32)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	serverConn, err := ListenDHCP(hostIf)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.ServeDHCP(ctx, serverConn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("DHCP server: %v", err)
		}
	})

	var client *net.UDPConn
	g.Expect(inNetns(ns, func() error {
		var err error
		client, err = server4.NewIPv4UDPConn("eth0", &net.UDPAddr{Port: dhcpv4.ClientPort})
		return err
	})).To(Succeed())
	defer func() { _ = client.Close() }()

	exchange := func(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
		_, err := client.WriteTo(req.ToBytes(), &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ServerPort})
		g.Expect(err).NotTo(HaveOccurred())
		buf := make([]byte, 1500)
		for {
			g.Expect(client.SetReadDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
			n, _, err := client.ReadFrom(buf)
			g.Expect(err).NotTo(HaveOccurred(), "no DHCP reply on the wire")
			reply, err := dhcpv4.FromBytes(buf[:n])
			if err == nil && reply.OpCode == dhcpv4.OpcodeBootReply && reply.TransactionID == req.TransactionID {
				return reply
			}
		}
	}
	offer := exchange(discover(g, clientMAC, pxeClient(iana.EFI_X86_64)))
	g.Expect(offer.MessageType()).To(Equal(dhcpv4.MessageTypeOffer))
	g.Expect(offer.YourIPAddr.String()).To(Equal("10.213.0.100"))
	g.Expect(offer.BootFileName).To(Equal(BootFileUEFIAMD64))
	g.Expect(offer.ServerIPAddr.String()).To(Equal("10.213.0.1"))

	req, err := dhcpv4.NewRequestFromOffer(offer, pxeClient(iana.EFI_X86_64), dhcpv4.WithUserClass("iPXE", false))
	g.Expect(err).NotTo(HaveOccurred())
	ack := exchange(req)
	g.Expect(ack.MessageType()).To(Equal(dhcpv4.MessageTypeAck))
	g.Expect(ack.YourIPAddr.String()).To(Equal("10.213.0.100"))
	g.Expect(ack.BootFileName).To(Equal("http://10.213.0.1:8081/ipxe?mac=52%3A54%3A00%3A12%3A34%3A56"))
}

// inNetns runs fn on a thread switched into the network namespace ns; sockets fn opens stay
// in that namespace.
func inNetns(ns string, fn func() error) error {
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer func() { _ = self.Close() }()
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer func() { _ = target.Close() }()
	if err := setns(target); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	fnErr := fn()
	// A thread that cannot switch back stays locked, so the runtime retires it.
	if err := setns(self); err != nil {
		return fmt.Errorf("failed to return to the original network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// setnsTrap is the number of setns(2), which the frozen syscall package does not define.
var setnsTrap = map[string]uintptr{"amd64": 308, "arm64": 268}[runtime.GOARCH]

func setns(f *os.File) error {
	if _, _, errno := syscall.RawSyscall(setnsTrap, f.Fd(), syscall.CLONE_NEWNET, 0); errno != 0 {
		return fmt.Errorf("setns: %w", errno)
	}
	return nil
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(context.Background(), "ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// TestProxyDHCPOnPort4011 asks the proxy on the wire the way PXE firmware does when a proxy
// offer names no boot file: a REQUEST to port 4011 of the server, unicast from the address
// the client leased elsewhere. The proxy answers with the boot file and takes that address as
// the host's.
func TestProxyDHCPOnPort4011(t *testing.T) {
	require.Layer(t, "netns", netnsUnavailable())
	g := NewWithT(t)
	ns := fmt.Sprintf("talon-pxe-%d", os.Getpid())
	hostIf := fmt.Sprintf("tpx%d", os.Getpid()%1000000)
	clientMAC := net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x57}
	serverIP, clientIP := net.IPv4(10, 214, 0, 1).To4(), net.IPv4(10, 214, 0, 50).To4()
	ipCmd(t, "netns", "add", ns)
	t.Cleanup(func() { ipCmd(t, "netns", "del", ns) })
	ipCmd(t, "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", ns)
	t.Cleanup(func() { ipCmd(t, "link", "del", hostIf) })
	ipCmd(t, "addr", "add", serverIP.String()+"/24", "dev", hostIf)
	ipCmd(t, "link", "set", hostIf, "up")
	ipCmd(t, "-n", ns, "link", "set", "eth0", "address", clientMAC.String())
	ipCmd(t, "-n", ns, "addr", "add", clientIP.String()+"/24", "dev", "eth0")
	ipCmd(t, "-n", ns, "link", "set", "eth0", "up")

	hosts := NewStaticHosts()
	hosts.Set(clientMAC, Host{Name: types.NamespacedName{Namespace: "metal", Name: "veth"}, Action: BootActionDisk})
	d, err := NewDHCPResponder(hosts, DHCPOptions{Mode: DHCPModeProxy, ServerIP: serverIP, BaseURL: "http://10.214.0.1:8081"})
	g.Expect(err).NotTo(HaveOccurred())
	conn, err := ListenPXE(serverIP)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.ServeDHCP(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("DHCP server: %v", err)
		}
	})

	var client net.PacketConn
	g.Expect(inNetns(ns, func() error {
		var err error
		client, err = (&net.ListenConfig{}).ListenPacket(context.Background(), "udp4", net.JoinHostPort(clientIP.String(), "68"))
		return err
	})).To(Succeed())
	defer func() { _ = client.Close() }()
	req := request(g, clientMAC, pxeClient(iana.EFI_X86_64), withOption(dhcpv4.OptServerIdentifier(serverIP)))
	req.ClientIPAddr = clientIP
	_, err = client.WriteTo(req.ToBytes(), &net.UDPAddr{IP: serverIP, Port: PXEPort})
	g.Expect(err).NotTo(HaveOccurred())
	buf := make([]byte, 1500)
	g.Expect(client.SetReadDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
	n, _, err := client.ReadFrom(buf)
	g.Expect(err).NotTo(HaveOccurred(), "no ProxyDHCP reply on the wire")
	ack, err := dhcpv4.FromBytes(buf[:n])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ack.MessageType()).To(Equal(dhcpv4.MessageTypeAck))
	g.Expect(ack.TransactionID).To(Equal(req.TransactionID))
	g.Expect(ack.BootFileName).To(Equal(BootFileUEFIAMD64))
	g.Expect(ack.YourIPAddr.IsUnspecified()).To(BeTrue(), "a proxy leases no address")
	g.Expect(d.AddressOf(clientMAC).String()).To(Equal(clientIP.String()), "the address the client asked from is the host's")
}
