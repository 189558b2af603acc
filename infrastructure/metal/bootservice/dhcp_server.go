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
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
)

// dhcpLookupTimeout bounds how long one DHCP request may wait for the host inventory; a
// client retries on its own.
const dhcpLookupTimeout = 5 * time.Second

// ListenDHCP opens the DHCP server socket on port 67 of the interface called iface, with
// broadcast enabled and bound to that interface (needs root or CAP_NET_BIND_SERVICE and
// CAP_NET_RAW). An empty iface listens on all interfaces.
func ListenDHCP(iface string) (net.PacketConn, error) {
	conn, err := server4.NewIPv4UDPConn(iface, &net.UDPAddr{IP: net.IPv4zero, Port: dhcpv4.ServerPort})
	if err != nil {
		return nil, fmt.Errorf("failed to listen for DHCP on interface %q: %w", iface, err)
	}
	return conn, nil
}

// PXEPort is the port of ProxyDHCP REQUESTs (PXE's boot server port): a PXE client that got
// a proxy offer asks the proxy again there, unicast from the address it leased.
const PXEPort = 4011

// ListenPXE opens the ProxyDHCP socket on port 4011 of serverIP. Serve it with ServeDHCP
// beside port 67 in proxy mode: clients that get no answer there fall back to the proxy offer,
// but only after a timeout.
func ListenPXE(serverIP net.IP) (net.PacketConn, error) {
	conn, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp4", net.JoinHostPort(serverIP.String(), strconv.Itoa(PXEPort)))
	if err != nil {
		return nil, fmt.Errorf("failed to listen for ProxyDHCP requests: %w", err)
	}
	return conn, nil
}

// ServeDHCP answers DHCP requests read from conn with d until ctx ends, then closes conn.
// Replies go back to where the request came from: the relay (giaddr), or the client's port,
// broadcast when the client has no address yet.
func (d *DHCPResponder) ServeDHCP(ctx context.Context, conn net.PacketConn) error {
	log := logr.FromContextOrDiscard(ctx)
	handler := func(conn net.PacketConn, peer net.Addr, req *dhcpv4.DHCPv4) {
		d.handle(ctx, conn, peer, req)
	}
	server, err := server4.NewServer("", nil, handler, server4.WithConn(conn))
	if err != nil {
		return fmt.Errorf("failed to start DHCP server: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = server.Close() })
	defer stop()
	log.Info("Serving DHCP", "address", conn.LocalAddr().String(), "mode", string(d.opts.Mode))
	err = server.Serve()
	if ctx.Err() != nil && errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (d *DHCPResponder) handle(ctx context.Context, conn net.PacketConn, peer net.Addr, req *dhcpv4.DHCPv4) {
	log := logr.FromContextOrDiscard(ctx)
	ctx, cancel := context.WithTimeout(ctx, dhcpLookupTimeout)
	defer cancel()
	from, _ := peer.(*net.UDPAddr)
	reply, err := d.RespondFrom(ctx, req, from)
	if err != nil {
		countRequest("dhcp", req.MessageType().String(), "failed")
		log.Error(err, "Failed to answer DHCP request", "mac", req.ClientHWAddr.String())
		return
	}
	if reply == nil {
		countRequest("dhcp", req.MessageType().String(), "ignored")
		return
	}
	to := peer
	if gw := req.GatewayIPAddr; gw != nil && !gw.IsUnspecified() {
		to = &net.UDPAddr{IP: gw, Port: dhcpv4.ServerPort}
	}
	if _, err := conn.WriteTo(reply.ToBytes(), to); err != nil {
		countRequest("dhcp", req.MessageType().String(), "failed")
		log.Error(err, "Failed to send DHCP reply", "mac", req.ClientHWAddr.String(), "to", to.String())
		return
	}
	countRequest("dhcp", req.MessageType().String(), "answered")
}
