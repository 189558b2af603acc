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

package metal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/talon-capi/talon/infrastructure/metal/bootservice"
)

// BootServiceOptions configure the boot service a manager runs.
type BootServiceOptions struct {
	// Interface is the provisioning network's interface: DHCP listens there. Empty listens
	// on every interface.
	Interface string
	// ServerIP is this machine's address on the provisioning network (TFTP and DHCP server
	// identifier). Required.
	ServerIP net.IP
	// HTTPAddress is where the HTTP server listens, e.g. ":8081".
	HTTPAddress string
	// BaseURL is how hosts reach the HTTP server; http://<ServerIP><HTTPAddress's port>
	// when empty.
	BaseURL string
	// DHCPMode is bootservice.DHCPModeProxy or DHCPModeFull.
	DHCPMode bootservice.DHCPMode
	// Pool is the full-mode address pool.
	Pool *bootservice.AddressPool
	// PreferSNP hands x86-64 UEFI clients snponly.efi.
	PreferSNP bool
	// TFTPDir holds the iPXE binaries.
	TFTPDir string
	// TFTPAddress is where TFTP listens; <ServerIP>:69 when empty.
	TFTPAddress string
	// DHCPConn, when set, is the socket DHCP answers on instead of port 67 of Interface.
	DHCPConn net.PacketConn
	// TokenTTL is how long a config URL stays valid; bootservice.DefaultTokenTTL when zero.
	TokenTTL time.Duration
}

// BootService is the DHCP, TFTP and HTTP boot service of the infrastructure manager, serving
// the MetalHosts of its Inventory. It runs only on the leader.
type BootService struct {
	Options   BootServiceOptions
	Inventory *Inventory
	// AssetDir is the AssetCache's directory, served under /assets/.
	AssetDir string
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one boot service answers.
func (s *BootService) NeedLeaderElection() bool { return true }

// Start serves until ctx ends.
func (s *BootService) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("bootservice")
	ctx = logr.NewContext(ctx, log)
	o := s.Options
	serverIP := o.ServerIP.To4()
	if serverIP == nil {
		return fmt.Errorf("boot service: server IP %q is not an IPv4 address", o.ServerIP)
	}
	listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.HTTPAddress)
	if err != nil {
		return fmt.Errorf("boot service: %w", err)
	}
	baseURL := o.BaseURL
	if baseURL == "" {
		_, port, _ := net.SplitHostPort(listener.Addr().String())
		baseURL = "http://" + net.JoinHostPort(serverIP.String(), port)
	}
	dhcp, err := bootservice.NewDHCPResponder(s.Inventory, bootservice.DHCPOptions{
		Mode: o.DHCPMode, ServerIP: serverIP, BaseURL: baseURL, Pool: o.Pool, PreferSNP: o.PreferSNP, Subnet: subnetOf(serverIP),
		Register: func(ctx context.Context, mac net.HardwareAddr) {
			go s.Inventory.Register(context.WithoutCancel(ctx), mac)
		},
	})
	if err != nil {
		_ = listener.Close()
		return fmt.Errorf("boot service: %w", err)
	}
	handler, err := bootservice.NewHTTPHandler(s.Inventory, s.Inventory, bootservice.NewTokens(bootservice.TokensOptions{TTL: o.TokenTTL}), bootservice.HTTPOptions{
		BaseURL: baseURL, AssetDir: s.AssetDir, Refusals: s.Inventory.Refused, Served: s.Inventory.Served, Addresses: dhcp,
	})
	if err != nil {
		_ = listener.Close()
		return fmt.Errorf("boot service: %w", err)
	}
	tftp, err := bootservice.NewTFTPServer(bootservice.TFTPOptions{Dir: o.TFTPDir, Log: log})
	if err != nil {
		_ = listener.Close()
		return fmt.Errorf("boot service: %w", err)
	}
	tftpAddress := o.TFTPAddress
	if tftpAddress == "" {
		tftpAddress = net.JoinHostPort(serverIP.String(), "69")
	}
	tftpConn, err := (&net.ListenConfig{}).ListenPacket(ctx, "udp4", tftpAddress)
	if err != nil {
		_ = listener.Close()
		return fmt.Errorf("boot service: TFTP: %w", err)
	}
	dhcpConn := o.DHCPConn
	if dhcpConn == nil {
		if dhcpConn, err = bootservice.ListenDHCP(o.Interface); err != nil {
			_ = listener.Close()
			_ = tftpConn.Close()
			return fmt.Errorf("boot service: %w", err)
		}
	}
	// A proxy is asked again on port 4011 by PXE clients that got its offer.
	var pxeConn net.PacketConn
	if o.DHCPMode == bootservice.DHCPModeProxy {
		if pxeConn, err = bootservice.ListenPXE(serverIP); err != nil {
			_ = listener.Close()
			_ = tftpConn.Close()
			_ = dhcpConn.Close()
			return fmt.Errorf("boot service: %w", err)
		}
	}

	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errs := make(chan error, 4)
	go func() { errs <- ignoreClosed(server.Serve(listener)) }()
	go func() { errs <- tftp.Serve(tftpConn) }()
	go func() { errs <- dhcp.ServeDHCP(ctx, dhcpConn) }()
	if pxeConn != nil {
		go func() { errs <- dhcp.ServeDHCP(ctx, pxeConn) }()
	}
	log.Info("Boot service started", "http", listener.Addr().String(), "baseURL", baseURL, "tftp", tftpAddress, "dhcpMode", string(o.DHCPMode))

	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = server.Shutdown(shutdownCtx)
	tftp.Shutdown()
	_ = dhcpConn.Close()
	if pxeConn != nil {
		_ = pxeConn.Close()
	}
	return first
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// subnetOf is the network of the interface that has ip, or nil when none has it.
func subnetOf(ip net.IP) *net.IPNet {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return &net.IPNet{IP: n.IP.Mask(n.Mask), Mask: n.Mask}
		}
	}
	return nil
}
