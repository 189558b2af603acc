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
	"context"
	"crypto/tls"
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// DefaultTalosVersion is the Talos version a simulated node reports.
const DefaultTalosVersion = "v1.13.3"

// Ports a node listens on, on its own address, as a Talos node does.
const (
	APIPort      = 50000
	EtcdPort     = 2379
	EtcdPeerPort = 2380
)

// Options describe one simulated node.
type Options struct {
	// Address is the node's IP address; every port the node serves is bound to it. On
	// loopback (127.x.y.z) many nodes share one host without root.
	Address string
	// StateDir holds the node's persistent state (its etcd data, certificates). Reset wipes it.
	StateDir string
	// Mode is the runtime the node validates configs for: container (default) or metal.
	Mode configgen.Mode
	// TalosVersion is the Talos version the node reports; DefaultTalosVersion when empty.
	TalosVersion string
	// BinDir holds the kube-apiserver binary control-plane nodes run.
	BinDir string
	// Log receives the node's log lines.
	Log logr.Logger
}

// Node is one simulated Talos node.
type Node struct {
	opts Options
	ip   net.IP

	mu sync.Mutex
	// cfg is the active machine config; nil while the node is in maintenance mode.
	cfg     talosconfig.Provider
	cfgData []byte
	// staged is a config applied in staged mode, activated at the next reboot.
	staged []byte
	// serverCert is served once the node is configured; maintenanceCert before.
	serverCert      *tls.Certificate
	maintenanceCert tls.Certificate
	clientCAs       *stdx509.CertPool
	etcd            *etcdMember
	bootstrapping   bool
	apiServer       *apiServer
	// servicesCtx lives as long as the current config's services (joining, the kubelet);
	// stopServices ends it.
	servicesCtx  context.Context //nolint:containedctx // lives exactly as long as the services it starts
	stopServices context.CancelFunc

	server   *grpc.Server
	listener net.Listener
	serveErr chan error
}

// NewNode prepares a node in maintenance mode; Start makes it answer.
func NewNode(opts Options) (*Node, error) {
	ip := net.ParseIP(opts.Address)
	if ip == nil {
		return nil, fmt.Errorf("node address %q is not an IP address", opts.Address)
	}
	if opts.StateDir == "" {
		return nil, errors.New("a node needs a state directory")
	}
	if opts.Mode == "" {
		opts.Mode = configgen.ModeContainer
	}
	if opts.TalosVersion == "" {
		opts.TalosVersion = DefaultTalosVersion
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	opts.Log = opts.Log.WithValues("node", opts.Address)
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, err
	}
	pem, err := selfSigned(ip)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(pem.Crt, pem.Key)
	if err != nil {
		return nil, err
	}
	return &Node{opts: opts, ip: ip, maintenanceCert: cert}, nil
}

// Address returns the node's IP address.
func (n *Node) Address() string { return n.opts.Address }

// Endpoint returns the address of the node's Talos API.
func (n *Node) Endpoint() string {
	return net.JoinHostPort(n.opts.Address, strconv.Itoa(APIPort))
}

// Start serves the Talos API until Stop. userData, when not empty, is the machine config
// the node boots with (like the USERDATA of a Talos container); without it the node boots
// with the config it had before it stopped, or waits in maintenance mode for
// ApplyConfiguration.
func (n *Node) Start(ctx context.Context, userData []byte) error {
	// Like a node's STATE partition, the last applied config survives a restart.
	if len(userData) == 0 {
		if saved, err := os.ReadFile(n.stateDir("config.yaml")); err == nil {
			userData = saved
		}
	}
	if len(userData) > 0 {
		if err := n.applyConfig(ctx, userData); err != nil {
			return fmt.Errorf("the boot config is refused: %w", err)
		}
	}
	listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", n.Endpoint())
	if err != nil {
		n.stopAll()
		return fmt.Errorf("failed to listen on %s: %w", n.Endpoint(), err)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: n.tlsConfigForClient}
	n.server = grpc.NewServer(
		grpc.Creds(credentials.NewTLS(tlsConfig)),
		grpc.UnaryInterceptor(n.authorizeUnary),
		grpc.StreamInterceptor(n.authorizeStream),
	)
	machine.RegisterMachineServiceServer(n.server, &machineService{node: n})
	n.listener = listener
	n.serveErr = make(chan error, 1)
	go func() { n.serveErr <- n.server.Serve(listener) }()
	n.opts.Log.Info("Talos API listening", "endpoint", n.Endpoint(), "configured", n.configured())
	return nil
}

// Stop stops the API and every service of the node; its state stays on disk. Stopping a
// stopped node does nothing.
func (n *Node) Stop() {
	if n.server != nil {
		n.server.Stop()
		if err := <-n.serveErr; err != nil {
			n.opts.Log.Info("Talos API stopped", "reason", err.Error())
		}
		n.server = nil
	}
	n.stopAll()
}

// stopAll stops the node's services: background work, kube-apiserver, etcd.
func (n *Node) stopAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopServices != nil {
		n.stopServices()
		n.stopServices = nil
	}
	n.apiServer.stop()
	n.apiServer = nil
	if n.etcd != nil {
		n.etcd.stop()
		n.etcd = nil
	}
}

func (n *Node) configured() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg != nil
}

// hostname is the node's hostname: from its config, else derived from its address.
func (n *Node) hostname() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hostnameLocked()
}

func (n *Node) hostnameLocked() string {
	if n.cfg != nil {
		if h := n.cfg.NetworkHostnameConfig(); h != nil && h.Hostname() != "" {
			return h.Hostname()
		}
	}
	return "talos-" + n.ip.String()
}

func (n *Node) stateDir(parts ...string) string {
	return filepath.Join(append([]string{n.opts.StateDir}, parts...)...)
}

// tlsConfigForClient serves the maintenance certificate without client authentication
// until the node is configured, then a certificate from the config's OS CA with client
// certificates verified against it, as Talos' apid does.
func (n *Node) tlsConfigForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.serverCert == nil {
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{n.maintenanceCert}}, nil
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*n.serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    n.clientCAs,
	}, nil
}
