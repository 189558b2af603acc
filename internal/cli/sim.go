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

package cli

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/sim"
)

type simOptions struct {
	address        string
	stateDir       string
	mode           string
	binDir         string
	cmdline        string
	configURL      string
	uuid, mac      string
	bootDelay      time.Duration
	rebootDelay    time.Duration
	upgradeDelay   time.Duration
	talosVersion   string
	controlAddress string
	verbose        int
}

func newSimCommand() *cobra.Command {
	o := &simOptions{}
	cmd := &cobra.Command{
		Use:   "sim --address IP",
		Short: "Run one simulated Talos node (a stand-in where the Talos image cannot run)",
		Long: `sim runs one simulated Talos node until it is interrupted. It serves the Talos machine API on
<address>:50000 with the Talos project's own API definitions and config validation, runs a
real etcd member and kube-apiserver when it is a control-plane node, and registers its Node.
It is not Talos: there is no kernel, disk, container runtime or workload. See docs/sim.md.

Like the Talos container image, it boots with the machine config in the USERDATA
environment variable (base64); like a Talos machine booted over the network, it fetches its
config from the talos.config= URL of its kernel arguments (--cmdline, or --config-url); or
it waits in maintenance mode for 'talosctl apply-config'.

With --control-address it also serves faults for tests: POST /power-off, /power-on,
/crash-etcd, /partition or /heal.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd)
		},
	}
	cmd.Flags().StringVar(&o.address, "address", "", "IP address the node serves on (default: the first non-loopback IPv4 address of the host)")
	cmd.Flags().StringVar(&o.stateDir, "state-dir", "/var/lib/talon-sim", "directory of the node's persistent state")
	cmd.Flags().StringVar(&o.mode, "mode", envOr("PLATFORM", "container"), "runtime mode configs are validated for: container or metal (default: $PLATFORM)")
	cmd.Flags().StringVar(&o.binDir, "bin-dir", defaultBinDir(), "directory holding kube-apiserver")
	cmd.Flags().StringVar(&o.cmdline, "cmdline", "", "kernel arguments of the node; talos.config= and talos.platform= are read from them")
	cmd.Flags().StringVar(&o.configURL, "config-url", "", "URL to fetch the config from, like talos.config= (${uuid}, ${mac}, ${serial}, ${hostname} are replaced)")
	cmd.Flags().StringVar(&o.uuid, "uuid", "", "hardware UUID of the node (default: derived from its address)")
	cmd.Flags().StringVar(&o.mac, "mac", "", "MAC address of the node (default: derived from its address)")
	cmd.Flags().DurationVar(&o.bootDelay, "boot-delay", 0, "how long the node takes to boot before it answers")
	cmd.Flags().DurationVar(&o.rebootDelay, "reboot-delay", time.Second, "how long a reboot keeps the node down")
	cmd.Flags().StringVar(&o.talosVersion, "talos-version", envOr("TALON_SIM_TALOS_VERSION", sim.DefaultTalosVersion),
		"Talos version the node runs until an upgrade, as a Talos image's version is baked into it (default: $TALON_SIM_TALOS_VERSION)")
	cmd.Flags().DurationVar(&o.upgradeDelay, "upgrade-delay", 2*time.Second, "how long an upgrade takes before the node reboots")
	cmd.Flags().StringVar(&o.controlAddress, "control-address", "", "host:port to serve the faults endpoint on (off when empty)")
	cmd.Flags().IntVarP(&o.verbose, "verbose", "v", 0, "log verbosity")
	return cmd
}

func (o *simOptions) run(cmd *cobra.Command) error {
	args := kernelArgs(o.cmdline)
	if platform, ok := args["talos.platform"]; ok && !cmd.Flags().Changed("mode") {
		o.mode = platform
	}
	if o.configURL == "" {
		o.configURL = args["talos.config"]
	}
	mode, err := configgen.ParseMode(o.mode)
	if err != nil {
		return err
	}
	if o.address == "" {
		if o.address, err = hostAddress(); err != nil {
			return err
		}
	}
	var userData []byte
	if encoded := os.Getenv("USERDATA"); encoded != "" {
		if userData, err = base64.StdEncoding.DecodeString(encoded); err != nil {
			return fmt.Errorf("USERDATA is not base64: %w", err)
		}
	}
	// Like Talos in a container, the node is named after the container's hostname unless
	// its config names it.
	var hostname string
	if mode == configgen.ModeContainer {
		hostname, _ = os.Hostname()
	}
	out := cmd.ErrOrStderr()
	log := funcr.New(func(prefix, args string) { _, _ = fmt.Fprintln(out, prefix, args) }, funcr.Options{Verbosity: o.verbose})
	node, err := sim.NewNode(sim.Options{
		Address: o.address, StateDir: o.stateDir, Mode: mode, BinDir: o.binDir, ConfigURL: o.configURL,
		UUID: o.uuid, MAC: o.mac, BootDelay: o.bootDelay, RebootDelay: o.rebootDelay, UpgradeDelay: o.upgradeDelay, Hostname: hostname, Log: log,
		TalosVersion: o.talosVersion,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := node.Start(ctx, userData); err != nil {
		return err
	}
	if o.controlAddress != "" {
		server := &http.Server{Addr: o.controlAddress, Handler: node.FaultHandler(ctx), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(err, "Faults endpoint stopped")
			}
		}()
		defer func() { _ = server.Close() }()
	}
	<-ctx.Done()
	node.Stop()
	return nil
}

// kernelArgs splits kernel arguments into key=value pairs.
func kernelArgs(cmdline string) map[string]string {
	args := map[string]string{}
	for _, field := range strings.Fields(cmdline) {
		key, value, _ := strings.Cut(field, "=")
		args[key] = value
	}
	return args
}

// hostAddress is the first non-loopback IPv4 address of the host: in a container, the
// container's address.
func hostAddress() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, addr := range addrs {
		if ipNet, ok := addr.(*net.IPNet); ok && !ipNet.IP.IsLoopback() && ipNet.IP.To4() != nil {
			return ipNet.IP.String(), nil
		}
	}
	return "", errors.New("no non-loopback IPv4 address found: pass --address")
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// defaultBinDir is the directory of the talon binary: the simulator image puts
// kube-apiserver next to it.
func defaultBinDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "."
	}
	return filepath.Dir(exe)
}
