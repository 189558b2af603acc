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
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/sim"
)

type simOptions struct {
	address  string
	stateDir string
	mode     string
	binDir   string
	verbose  int
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
environment variable (base64), or waits in maintenance mode for 'talosctl apply-config'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd)
		},
	}
	cmd.Flags().StringVar(&o.address, "address", "", "IP address the node serves on (required)")
	cmd.Flags().StringVar(&o.stateDir, "state-dir", "/var/lib/talon-sim", "directory of the node's persistent state")
	cmd.Flags().StringVar(&o.mode, "mode", envOr("PLATFORM", "container"), "runtime mode configs are validated for: container or metal (default: $PLATFORM)")
	cmd.Flags().StringVar(&o.binDir, "bin-dir", defaultBinDir(), "directory holding kube-apiserver")
	cmd.Flags().IntVarP(&o.verbose, "verbose", "v", 0, "log verbosity")
	_ = cmd.MarkFlagRequired("address")
	return cmd
}

func (o *simOptions) run(cmd *cobra.Command) error {
	mode, err := configgen.ParseMode(o.mode)
	if err != nil {
		return err
	}
	var userData []byte
	if encoded := os.Getenv("USERDATA"); encoded != "" {
		if userData, err = base64.StdEncoding.DecodeString(encoded); err != nil {
			return fmt.Errorf("USERDATA is not base64: %w", err)
		}
	}
	out := cmd.ErrOrStderr()
	log := funcr.New(func(prefix, args string) { _, _ = fmt.Fprintln(out, prefix, args) }, funcr.Options{Verbosity: o.verbose})
	node, err := sim.NewNode(sim.Options{Address: o.address, StateDir: o.stateDir, Mode: mode, BinDir: o.binDir, Log: log})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := node.Start(ctx, userData); err != nil {
		return err
	}
	<-ctx.Done()
	node.Stop()
	return nil
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
