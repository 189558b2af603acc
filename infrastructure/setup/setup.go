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

package setup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/docker"
	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/infrastructure/metal"
	"github.com/talon-capi/talon/infrastructure/metal/bootservice"
	"github.com/talon-capi/talon/infrastructure/webhooks"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/internal/version"
)

// Runtimes the Docker provider's nodes can run on.
const (
	// RuntimeDocker runs nodes as containers of the Talos image through the Docker Engine API.
	RuntimeDocker = "docker"
	// RuntimeSim runs simulated Talos nodes in the manager's own process.
	RuntimeSim = "sim"
	// RuntimeSimLight runs light simulated nodes (the simulator's scale mode: etcd and the
	// workload cluster's API held in memory) in the manager's own process.
	RuntimeSimLight = "sim-light"
)

// Settings are the infrastructure provider's own flags.
type Settings struct {
	// Runtime is RuntimeDocker, RuntimeSim or RuntimeSimLight.
	Runtime string
	// LoadBalancerImage runs `talon lb` for clusters that name no image.
	LoadBalancerImage string
	// SimBinDir holds kube-apiserver and kube-controller-manager for simulated control planes.
	SimBinDir string
	// SimStateDir holds the simulated nodes' state.
	SimStateDir string
	// UnprivilegedNodes runs Docker nodes without privileged mode: Talos needs it, the
	// simulator image does not, and some hosts (rootless or nested Docker) cannot grant it.
	UnprivilegedNodes bool
	// Metal configures the bare-metal provider and its boot service.
	Metal metal.Settings

	// The boot service flags in their text form, parsed by Validate.
	serverIP, dhcpMode, poolStart, poolEnd, poolNetmask, poolRouter string
}

// imageOfThisBuild is the image this binary is built into, when the build says so
// (`make docker-build` sets it with -ldflags -X); the manager's image runs the Docker
// clusters' load balancers.
var imageOfThisBuild string

// NewSettings returns the defaults: Docker, and the manager's own image as load balancer.
func NewSettings() *Settings {
	lbImage := imageOfThisBuild
	if lbImage == "" {
		tag := version.Get().GitVersion
		if tag == "" {
			tag = "dev"
		}
		lbImage = "ghcr.io/talon-capi/talon-infrastructure-manager:" + tag
	}
	return &Settings{
		Runtime:           RuntimeDocker,
		LoadBalancerImage: lbImage,
		SimStateDir:       filepath.Join(os.TempDir(), "talon-sim"),
		Metal: metal.Settings{
			AssetDir:    "/var/lib/talon/boot-assets",
			BootTimeout: metal.DefaultBootTimeout,
			Service:     metal.BootServiceOptions{HTTPAddress: ":8081", TFTPDir: bootservice.DefaultTFTPDir},
		},
		dhcpMode: "proxy",
	}
}

// AddFlags registers the settings on fs.
func (s *Settings) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.Runtime, "runtime", s.Runtime,
		"Where TalosDockerMachines run: docker (containers of the Talos image, through the Docker Engine API of $DOCKER_HOST), sim (simulated Talos nodes inside this manager, for tests and machines without Docker) or sim-light (the simulator's scale mode: nodes of about a megabyte whose etcd and Kubernetes API are held in memory, for scale tests).")
	fs.StringVar(&s.LoadBalancerImage, "load-balancer-image", s.LoadBalancerImage,
		"Image of the control-plane load balancer container (it runs 'talon lb') for TalosDockerClusters that name none.")
	fs.StringVar(&s.SimBinDir, "sim-bin-dir", s.SimBinDir,
		"With --runtime sim: directory holding the kube-apiserver and kube-controller-manager binaries simulated control planes run.")
	fs.StringVar(&s.SimStateDir, "sim-state-dir", s.SimStateDir,
		"With --runtime sim or sim-light: directory holding the simulated nodes' state.")
	fs.BoolVar(&s.UnprivilegedNodes, "docker-unprivileged-nodes", s.UnprivilegedNodes,
		"With --runtime docker: run node containers without privileged mode. Talos needs privileged mode; only the simulator image runs without it, on hosts that cannot grant it.")

	m := &s.Metal
	fs.StringVar(&m.AssetDir, "boot-asset-dir", m.AssetDir, "Directory caching the verified Talos kernels and initramfs the boot service serves.")
	fs.DurationVar(&m.BootTimeout, "metal-boot-timeout", m.BootTimeout, "How long a MetalHost may take from its power cycle to its network boot before it is power-cycled again.")
	fs.BoolVar(&m.BootService, "boot-service", m.BootService, "Run the DHCP, TFTP and HTTP boot service for MetalHosts (needs host networking and CAP_NET_BIND_SERVICE, CAP_NET_RAW).")
	fs.StringVar(&m.Service.Interface, "boot-interface", m.Service.Interface, "With --boot-service: the provisioning network's interface DHCP listens on; empty listens on every interface.")
	fs.StringVar(&s.serverIP, "boot-server-ip", s.serverIP, "With --boot-service: this machine's IPv4 address on the provisioning network (TFTP server, DHCP server identifier, HTTP base URL).")
	fs.StringVar(&m.Service.HTTPAddress, "boot-http-address", m.Service.HTTPAddress, "With --boot-service: where the HTTP server (iPXE scripts, configs, assets) listens; a port alone (:8081) listens on --boot-server-ip only, 0.0.0.0:<port> on every interface.")
	fs.StringVar(&m.Service.BaseURL, "boot-base-url", m.Service.BaseURL, "With --boot-service: how hosts reach the HTTP server; http://<boot-server-ip>:<port> when empty.")
	fs.StringVar(&s.dhcpMode, "dhcp-mode", s.dhcpMode, "With --boot-service: proxy (answer PXE clients only; the site's DHCP server leases addresses) or full (also lease addresses to known hosts, for isolated networks).")
	fs.StringVar(&s.poolStart, "dhcp-pool-start", s.poolStart, "With --dhcp-mode full: the first address to lease (0.0.0.0 is none).")
	fs.StringVar(&s.poolEnd, "dhcp-pool-end", s.poolEnd, "With --dhcp-mode full: the last address to lease (0.0.0.0 is none).")
	fs.StringVar(&s.poolNetmask, "dhcp-netmask", "255.255.255.0", "With --dhcp-mode full: the subnet mask of the leases.")
	fs.StringVar(&s.poolRouter, "dhcp-router", s.poolRouter, "With --dhcp-mode full: the default gateway of the leases, if any (0.0.0.0 is none).")
	fs.StringVar(&m.Service.TFTPDir, "tftp-dir", m.Service.TFTPDir, "With --boot-service: directory of the iPXE binaries (regular files, not symlinks: copy Debian's /usr/lib/ipxe/ipxe.efi, a link into /boot).")
	fs.StringVar(&m.RegisterNamespace, "auto-register-namespace", m.RegisterNamespace, "With --boot-service: register PXE clients no MetalHost boots from as MetalHosts (state Registering) in this namespace; off when empty.")
}

// validateMetal parses and checks the boot service flags.
func (s *Settings) validateMetal() error {
	m := &s.Metal
	if !m.BootService {
		return nil
	}
	if m.Service.ServerIP = net.ParseIP(s.serverIP).To4(); m.Service.ServerIP == nil {
		return fmt.Errorf("--boot-service needs --boot-server-ip, this machine's IPv4 address on the provisioning network (got %q)", s.serverIP)
	}
	// A port alone listens on the provisioning network only, as TFTP does: a manager with host
	// networking would otherwise serve iPXE scripts and configs on every network of its node.
	if host, port, err := net.SplitHostPort(m.Service.HTTPAddress); err == nil && host == "" {
		m.Service.HTTPAddress = net.JoinHostPort(m.Service.ServerIP.String(), port)
	}
	switch s.dhcpMode {
	case "proxy":
		m.Service.DHCPMode = bootservice.DHCPModeProxy
	case "full":
		m.Service.DHCPMode = bootservice.DHCPModeFull
		// 0.0.0.0 is none: the install manifests' default, as clusterctl has no empty one.
		start, end, mask := specified(s.poolStart), specified(s.poolEnd), specified(s.poolNetmask)
		if start == nil || end == nil || mask == nil {
			return fmt.Errorf("--dhcp-mode full needs --dhcp-pool-start, --dhcp-pool-end and --dhcp-netmask as IPv4 addresses (got %q, %q, %q)", s.poolStart, s.poolEnd, s.poolNetmask)
		}
		m.Service.Pool = &bootservice.AddressPool{Start: start, End: end, Netmask: net.IPMask(mask), Router: specified(s.poolRouter)}
	default:
		return fmt.Errorf("--dhcp-mode must be proxy or full, not %q", s.dhcpMode)
	}
	return nil
}

// specified is the IPv4 address text, or nil when it is none, 0.0.0.0 or not an IPv4 address.
func specified(text string) net.IP {
	ip := net.ParseIP(text).To4()
	if ip == nil || ip.IsUnspecified() {
		return nil
	}
	return ip
}

// Validate reports settings that cannot work.
func (s *Settings) Validate() error {
	if err := s.validateMetal(); err != nil {
		return err
	}
	switch s.Runtime {
	case RuntimeDocker:
		return nil
	case RuntimeSim:
		if s.SimBinDir == "" {
			return errors.New("--runtime sim needs --sim-bin-dir: the directory with kube-apiserver and kube-controller-manager")
		}
		return nil
	case RuntimeSimLight:
		return nil
	default:
		return fmt.Errorf("--runtime must be docker, sim or sim-light, not %q", s.Runtime)
	}
}

// Provider returns the infrastructure provider's part of a Talon manager.
func Provider() manager.Provider {
	s := NewSettings()
	return manager.Provider{
		Name:        "talon-infrastructure-manager",
		AddToScheme: []func(*runtime.Scheme) error{infrav1.AddToScheme},
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager, opts *manager.Options) error {
			rt, err := s.NewRuntime(ctx)
			if err != nil {
				return err
			}
			return Reconcilers(ctx, mgr, opts, s, rt)
		},
		SetupWebhooks: Webhooks,
		AddFlags:      s.AddFlags,
		Validate:      s.Validate,
	}
}

// NewRuntime connects to the runtime the settings name.
func (s *Settings) NewRuntime(ctx context.Context) (dockerruntime.Runtime, error) {
	switch s.Runtime {
	case RuntimeSim:
		return dockerruntime.NewSim(ctx, s.SimBinDir, s.SimStateDir, ctrl.Log.WithName("sim")), nil
	case RuntimeSimLight:
		return dockerruntime.NewLightSim(ctx, s.SimStateDir, ctrl.Log.WithName("sim"))
	}
	var opts []dockerruntime.DockerOption
	if s.UnprivilegedNodes {
		opts = append(opts, dockerruntime.WithUnprivilegedNodes())
	}
	rt, err := dockerruntime.NewDocker(opts...)
	if err != nil {
		return nil, fmt.Errorf("failed to connect to the Docker Engine: %w", err)
	}
	return rt, nil
}

// Reconcilers registers the TalosDockerCluster and TalosDockerMachine reconcilers on rt, and
// the bare-metal reconcilers (and boot service, when enabled), with a ClusterCache of their
// own to reach the workload clusters.
func Reconcilers(ctx context.Context, mgr ctrl.Manager, opts *manager.Options, s *Settings, rt dockerruntime.Runtime) error {
	options := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	cache, err := manager.NewClusterCache(ctx, mgr, "talon-infrastructure-manager", opts)
	if err != nil {
		return err
	}
	return errors.Join(
		metal.Setup(ctx, mgr, options, cache, s.Metal, opts.WatchFilter),
		(&docker.ClusterReconciler{
			Client: mgr.GetClient(), Runtime: rt, LoadBalancerImage: s.LoadBalancerImage, WatchFilterValue: opts.WatchFilter,
			Events: mgr.GetEventRecorder("talon-infrastructure-manager"),
		}).SetupWithManager(ctx, mgr, options),
		(&docker.MachineReconciler{
			Client: mgr.GetClient(), Runtime: rt, ClusterCache: cache, WatchFilterValue: opts.WatchFilter,
			Events: mgr.GetEventRecorder("talon-infrastructure-manager"),
		}).SetupWithManager(ctx, mgr, options),
	)
}

// Webhooks registers the validating webhooks of the Docker kinds.
func Webhooks(mgr ctrl.Manager) error {
	return errors.Join(
		(&webhooks.TalosDockerCluster{}).SetupWebhookWithManager(mgr),
		(&webhooks.TalosDockerClusterTemplate{}).SetupWebhookWithManager(mgr),
		(&webhooks.TalosDockerMachine{}).SetupWebhookWithManager(mgr),
		(&webhooks.TalosDockerMachineTemplate{}).SetupWebhookWithManager(mgr),
	)
}
