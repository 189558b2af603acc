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
	"os"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	. "github.com/onsi/gomega"
)

// TestDHCPServeOverUDP runs the socket wiring on loopback: a discover from a client socket
// gets the offer back on that socket.
func TestDHCPServeOverUDP(t *testing.T) {
	g := NewWithT(t)
	d, err := NewDHCPResponder(dhcpHosts(), DHCPOptions{Mode: DHCPModeProxy, ServerIP: serverIP, BaseURL: testBaseURL})
	g.Expect(err).NotTo(HaveOccurred())
	serverConn, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp4", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.ServeDHCP(ctx, serverConn) }()
	defer func() {
		cancel()
		g.Eventually(done, 5*time.Second).Should(Receive(BeNil()))
	}()

	client, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp4", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = client.Close() }()
	for _, mac := range []net.HardwareAddr{macNone, macA} { // the unknown host first: no answer
		_, err = client.WriteTo(discover(g, mac, pxeClient(iana.EFI_X86_64)).ToBytes(), serverConn.LocalAddr())
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = client.WriteTo([]byte("not DHCP"), serverConn.LocalAddr())
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(client.SetReadDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
	buf := make([]byte, 1500)
	n, _, err := client.ReadFrom(buf)
	g.Expect(err).NotTo(HaveOccurred())
	reply, err := dhcpv4.FromBytes(buf[:n])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.ClientHWAddr).To(Equal(macA))
	g.Expect(reply.MessageType()).To(Equal(dhcpv4.MessageTypeOffer))
	g.Expect(reply.BootFileName).To(Equal(BootFileUEFIAMD64))

	g.Expect(client.SetReadDeadline(time.Now().Add(200 * time.Millisecond))).To(Succeed())
	_, _, err = client.ReadFrom(buf)
	g.Expect(os.IsTimeout(err)).To(BeTrue(), "exactly one reply, got %v", err)
}
