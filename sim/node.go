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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cosiv1alpha1 "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state"
	cosiserver "github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"github.com/go-logr/logr"
	"github.com/google/uuid"
	clusterapi "github.com/siderolabs/talos/pkg/machinery/api/cluster"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/api/security"
	"github.com/siderolabs/talos/pkg/machinery/api/storage"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/kubernetes"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// DefaultTalosVersion is the Talos version a simulated node reports.
const DefaultTalosVersion = "v1.14.1"

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
	// StateDir holds the node's persistent state (its etcd data, certificates): its system
	// disk, sda. Reset wipes it.
	StateDir string
	// DisksDir holds the node's data disks, a subdirectory each, named as the disk (sdb,
	// nvme0n1, ...); a disk holds data while its directory holds files. Wipes of the system
	// disk leave them; a reset that names them and BlockDeviceWipe empty them.
	DisksDir string
	// Mode is the runtime the node validates configs for: container (default) or metal.
	Mode configgen.Mode
	// TalosVersion is the Talos version the node reports until an Upgrade; DefaultTalosVersion
	// when empty.
	TalosVersion string
	// BinDir holds the kube-apiserver and kube-controller-manager binaries control-plane
	// nodes run.
	BinDir string
	// ConfigURL is the talos.config= kernel argument: the node fetches its config from it
	// when it has none, with retries; ${uuid}, ${mac}, ${hostname} and ${serial} are replaced.
	ConfigURL string
	// UUID and MAC identify the node's hardware for ConfigURL; made up and kept in the
	// state directory when empty.
	UUID, MAC string
	// BootDelay is how long the node takes to boot before it answers (a slow boot).
	BootDelay time.Duration
	// RebootDelay is how long a reboot keeps the node down; one second when zero.
	RebootDelay time.Duration
	// UpgradeDelay is how long an upgrade takes before the node reboots into the new version;
	// two seconds when zero.
	UpgradeDelay time.Duration
	// Hostname is the hostname the platform gives the node (a container's hostname), used
	// when the config sets none; talos-<address, dashed> when empty.
	Hostname string
	// Domainname is the domain the platform gives the node (as a site's DHCP server does),
	// used when the configured hostname has none. With machine.kubelet.registerWithFQDN the
	// Node is named hostname.domainname while the etcd member keeps the short hostname, as
	// on Talos.
	Domainname string
	// SharedNetworkNamespace says the node shares its network namespace with other nodes
	// whose addresses are local there (simulated bare-metal hosts on one bridge), so a
	// connection to another node comes from that node's address, not this one's.
	SharedNetworkNamespace bool
	// Link is the network interface that holds Address, when the node manages it as Talos
	// manages its links (a simulated bare-metal host): static addresses in the config replace
	// Address, and a control-plane node holds the config's Layer 2 VIP on it while elected.
	Link string
	// Light, when set, makes the node a light node (the simulator's scale mode): its etcd
	// member and its cluster's Kubernetes API are held in memory in Light, shared by every
	// light node of the process, instead of running the etcd server library,
	// kube-apiserver and kube-controller-manager. See Light for what it cannot do.
	Light *Light
	// OnShutdown, when set, is called after the node powered itself off (Shutdown, or Reset
	// without reboot), as a host's BMC sees its power go off.
	OnShutdown func()
	// Log receives the node's log lines.
	Log logr.Logger
}

// Node is one simulated Talos node.
type Node struct {
	opts Options
	ip   net.IP

	mu sync.Mutex
	// version is the Talos version the node runs.
	version string
	// cfg is the active machine config; nil while the node is in maintenance mode.
	cfg     talosconfig.Provider
	cfgData []byte
	// serverCert is served once the node is configured; maintenanceCert before.
	serverCert      *tls.Certificate
	maintenanceCert tls.Certificate
	clientCAs       *stdx509.CertPool
	// peerCert is the os:impersonator certificate the node forwards calls with (apid.go),
	// issued by the OS CA whose certificate is peerCA.
	peerCert *tls.Certificate
	peerCA   string
	// services is what ServiceList reports.
	services serviceLog
	// res is the node's COSI resource state (resources.go); stage is the machine's stage in it.
	res   state.State
	stage runtime.MachineStage
	// lastStatus is the machine status last published, to publish changes only.
	lastStatus string
	// rollback puts the config back after apply-config --mode try.
	rollback *time.Timer
	// applyRebooted is set once a config apply started a reboot in this boot (Talos 1.13.3
	// and later 1.13 releases then refuse further applies).
	applyRebooted bool
	// logs are the services' logs (logs.go).
	logs logs
	// images are the images the node's containerd holds (upgrade.go).
	images imageStore
	// eventLog is the current boot's runtime events (events.go); bootID names the boot.
	eventLog *eventLog
	// booting is set while the boot sequence waits for the node's services (finishBoot).
	booting bool
	bootID  string
	// nodeIsReady: the kubelet stand-in last reported its Node Ready.
	nodeIsReady   bool
	etcd          *etcdMember
	bootstrapping bool
	// bootstrapped counts the successful Bootstrap calls this node answered.
	bootstrapped int
	// boots counts the node's boots (Boots).
	boots     int
	apiServer *component
	// vip is the Layer 2 VIP a control-plane node campaigns for (vip.go), nil without one.
	vip               *sharedVIP
	controllerManager *component
	// controlPlaneStart serializes starting the components, so that a restart for a new
	// config waits for a start under way.
	controlPlaneStart sync.Mutex
	// kubelet is the kubelet stand-in's client, once it runs.
	kubelet *kubernetes.Clientset
	// configChanged wakes the kubelet stand-in when the config changes.
	configChanged chan struct{}
	// healed is open while the node is partitioned, and closed when it is healed.
	healed chan struct{}
	// failInstalls makes the installer fail (FailInstalls).
	failInstalls atomic.Bool
	// partitioned: the node answers nothing and sends nothing.
	partitioned bool
	// powerCtx is the context of the Start that powered the node on; reboots live in it.
	powerCtx context.Context //nolint:containedctx // the node's power outlives each boot
	// servicesCtx lives as long as the current config's services (joining, the kubelet);
	// stopServices ends it.
	servicesCtx  context.Context //nolint:containedctx // lives exactly as long as the services it starts
	stopServices context.CancelFunc

	// power serializes powering on and off; stops counts the power-offs, so that a reboot
	// does not power on a node someone else powered off meanwhile.
	power   sync.Mutex
	stops   int
	servers []*grpc.Server
	// listening is set while the servers run (Serves reads it without the power lock).
	listening atomic.Bool
	// servedAddress is the address the servers listen on.
	servedAddress string
	serveErr      chan error
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
	if _, err := talosconfig.ParseContractFromVersion(opts.TalosVersion); err != nil {
		//nolint:staticcheck // ST1005: the message starts with a name, Talos.
		return nil, fmt.Errorf("Talos version %q is not a version like %s: %w", opts.TalosVersion, DefaultTalosVersion, err)
	}
	if opts.RebootDelay == 0 {
		opts.RebootDelay = time.Second
	}
	if opts.UpgradeDelay == 0 {
		opts.UpgradeDelay = 2 * time.Second
	}
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
	res, err := newResourceState(context.Background())
	if err != nil {
		return nil, fmt.Errorf("failed to set up the node's resources: %w", err)
	}
	n := &Node{opts: opts, ip: ip, maintenanceCert: cert, configChanged: make(chan struct{}, 1), res: res}
	// What the node logs is also machined's log (Logs, Dmesg).
	n.opts.Log = logr.New(newTeeSink(opts.Log.GetSink(), n.logs.of("machined"))).WithValues("node", opts.Address)
	n.services.notify = n.serviceChanged
	return n, nil
}

// Address returns the node's IP address.
func (n *Node) Address() string { return n.opts.Address }

// Endpoint returns the address of the node's Talos API.
func (n *Node) Endpoint() string {
	return net.JoinHostPort(n.opts.Address, strconv.Itoa(APIPort))
}

// Start powers the node on: after the boot delay it serves the Talos API until Stop.
// userData, when not empty, is the machine config the node boots with (like the USERDATA of
// a Talos container); without it the node boots with the config it had before it stopped,
// fetches one from the ConfigURL, or waits in maintenance mode for ApplyConfiguration.
func (n *Node) Start(ctx context.Context, userData []byte) error {
	n.power.Lock()
	defer n.power.Unlock()
	if len(n.servers) > 0 {
		return errors.New("the node is already running")
	}
	n.mu.Lock()
	n.powerCtx = ctx
	n.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(n.opts.BootDelay):
	}
	// Like a node's STATE partition: the Talos version installed, a config staged for this
	// boot, and the last applied config survive a restart.
	n.mu.Lock()
	n.version = n.opts.TalosVersion
	if installed, err := os.ReadFile(n.stateDir("talos-version")); err == nil {
		n.version = strings.TrimSpace(string(installed))
	}
	n.bootID = uuid.NewString()
	n.boots++
	n.applyRebooted = false
	n.mu.Unlock()
	n.newBootEvents()
	n.sequence("boot", "")
	n.publishBoot()
	if err := os.Rename(n.stateDir("staged.yaml"), n.stateDir("config.yaml")); err == nil {
		n.opts.Log.Info("Activated the staged config")
	}
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
	if err := n.serve(ctx); err != nil {
		n.stopAll()
		return err
	}
	// A configured node stays Booting until its services run (finishBoot).
	if !n.configured() {
		n.setStage(runtime.MachineStageMaintenance)
	}
	if len(userData) == 0 && n.opts.ConfigURL != "" {
		go n.fetchConfig(ctx)
	}
	return nil
}

// serve starts the Talos API (apid) and, for workers to get their certificates, trustd.
func (n *Node) serve(ctx context.Context) error {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: n.tlsConfigForClient}
	apid := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(tlsConfig)),
		grpc.UnaryInterceptor(n.authorizeUnary),
		grpc.StreamInterceptor(n.authorizeStream),
	)
	machine.RegisterMachineServiceServer(apid, &machineService{node: n})
	machine.RegisterImageServiceServer(apid, &imageService{node: n})
	machine.RegisterLifecycleServiceServer(apid, &lifecycleService{node: n})
	storage.RegisterStorageServiceServer(apid, &storageService{node: n})
	clusterapi.RegisterClusterServiceServer(apid, &clusterService{node: n})
	cosiv1alpha1.RegisterStateServer(apid, cosiserver.NewState(state.WrapCore(state.Filter(n.res, n.accessPolicy()))))
	trustd := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: n.trustdCertificate})),
		grpc.UnaryInterceptor(n.partitionUnary),
	)
	security.RegisterSecurityServiceServer(trustd, &securityService{node: n})
	servers := map[int]*grpc.Server{APIPort: apid, TrustdPort: trustd}
	n.serveErr = make(chan error, len(servers))
	for port, server := range servers {
		address := net.JoinHostPort(n.opts.Address, strconv.Itoa(port))
		listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", address)
		if err != nil {
			n.stopServers()
			return fmt.Errorf("failed to listen on %s: %w", address, err)
		}
		n.servers = append(n.servers, server)
		go func() { n.serveErr <- server.Serve(listener) }()
	}
	n.servedAddress = n.opts.Address
	n.listening.Store(true)
	n.opts.Log.Info("Talos API listening", "endpoint", n.Endpoint(), "configured", n.configured())
	return nil
}

// rebind moves the Talos API to the node's address, which its config changed; a node
// stopped meanwhile stays stopped, and one that already serves there (it booted with the
// config) is left alone.
func (n *Node) rebind() {
	n.power.Lock()
	defer n.power.Unlock()
	if len(n.servers) == 0 || n.servedAddress == n.opts.Address {
		return
	}
	n.stopServers()
	if err := n.serve(context.Background()); err != nil {
		n.opts.Log.Error(err, "The Talos API cannot listen on the node's new address")
	}
}

func (n *Node) stopServers() {
	for _, server := range n.servers {
		server.Stop()
		if err := <-n.serveErr; err != nil {
			n.opts.Log.Info("Talos API stopped", "reason", err.Error())
		}
	}
	n.servers = nil
	n.listening.Store(false)
}

// Stop powers the node off at once: the API and every service stop, as with a pulled power
// cord (etcd is not shut down gracefully, the kubelet reports nothing); the state stays on
// disk. Stopping a stopped node does nothing. It returns once a start of the control plane
// under way has given up, so that nothing writes to the state directory afterwards.
func (n *Node) Stop() {
	n.power.Lock()
	defer n.power.Unlock()
	n.stops++
	n.stopServers()
	n.stopAll()
	n.Heal()
	n.waitForControlPlaneStart()
}

// waitForControlPlaneStart returns once no start of the control plane is under way.
func (n *Node) waitForControlPlaneStart() {
	n.controlPlaneStart.Lock()
	defer n.controlPlaneStart.Unlock()
}

// retry runs fn until it succeeds or ctx ends, logging why it waits.
func (n *Node) retry(ctx context.Context, waiting string, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.opts.Log.V(1).Info(waiting, "reason", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retryInterval):
		}
	}
}

// stopAll stops the node's services (background work, the Kubernetes components, etcd)
// and forgets what it learnt while it ran: the next boot starts from the state on disk.
func (n *Node) stopAll() {
	n.forgetResources()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopServices != nil {
		n.stopServices()
		n.stopServices = nil
	}
	n.stopComponentsLocked()
	if n.etcd != nil {
		n.etcd.stop()
		n.etcd = nil
	}
	n.cfg, n.cfgData, n.serverCert, n.clientCAs, n.kubelet, n.nodeIsReady = nil, nil, nil, nil, nil, false
	n.services.reset()
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
	host, _ := n.fqdnLocked()
	return host
}

// fqdn is the node's short hostname and its domain.
func (n *Node) fqdn() (host, domain string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fqdnLocked()
}

// fqdnLocked is the node's short hostname and its domain: a configured hostname with dots
// is split at the first one (Talos' hostname spec does the same), else the domain is the
// platform's.
func (n *Node) fqdnLocked() (host, domain string) {
	if n.cfg != nil {
		if h := n.cfg.NetworkHostnameConfig(); h != nil && h.Hostname() != "" {
			host, domain, _ = strings.Cut(h.Hostname(), ".")
		}
	}
	switch {
	case host != "":
	case n.opts.Hostname != "":
		host, domain, _ = strings.Cut(n.opts.Hostname, ".")
	default:
		host = "talos-" + strings.ReplaceAll(n.ip.String(), ".", "-")
	}
	if domain == "" {
		domain = n.opts.Domainname
	}
	return host, domain
}

// nodename is the name of the node's Kubernetes Node: its hostname, or its FQDN when the
// kubelet registers with it (machine.kubelet.registerWithFQDN), lower case.
func (n *Node) nodename() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	host, domain := n.fqdnLocked()
	if n.cfg != nil && registerWithFQDN(n.cfg) && domain != "" {
		host += "." + domain
	}
	return strings.ToLower(host)
}

func (n *Node) stateDir(parts ...string) string {
	return filepath.Join(append([]string{n.opts.StateDir}, parts...)...)
}

// tlsConfigForClient serves the maintenance certificate without client authentication
// until the node is configured, then a certificate from the config's OS CA with client
// certificates verified against it, as Talos' apid does. A configured worker has no
// certificate until trustd issued one, and refuses connections until then.
func (n *Node) tlsConfigForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg == nil {
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{n.maintenanceCert}}, nil
	}
	if n.serverCert == nil {
		return nil, errors.New("the Talos API has no certificate yet: waiting for trustd")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*n.serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    n.clientCAs,
	}, nil
}

// trustdCertificate is trustd's serving certificate: the node's own, from the OS CA.
func (n *Node) trustdCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg == nil || n.serverCert == nil || len(n.cfg.Machine().Security().IssuingCA().Key) == 0 {
		return nil, errors.New("trustd runs on configured control-plane nodes only")
	}
	return n.serverCert, nil
}

// talosVersion is the Talos version the node runs.
func (n *Node) talosVersion() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.version
}
