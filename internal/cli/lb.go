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
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"

	"github.com/talon-capi/talon/infrastructure/docker/lb"
)

// backendsFilePollInterval is how often lb looks for changes of the backends file that came
// without a SIGHUP.
const backendsFilePollInterval = time.Second

type lbOptions struct {
	address      string
	ports        []int
	backendsFile string
	backends     []string
}

func newLBCommand() *cobra.Command {
	o := &lbOptions{}
	cmd := &cobra.Command{
		Use:   "lb",
		Short: "Run the control-plane endpoint of a cluster of Talos containers",
		Long: `lb is the endpoint container of the Docker infrastructure provider. It forwards TCP connections
on each --port to the same port of one of its backends, the control-plane nodes, round-robin
among the healthy ones: a backend is healthy on 6443 when its kube-apiserver answers /readyz,
on any other port when it accepts connections. With none healthy, all are tried.

The backends are the addresses in --backends-file, one per line (lines starting with # are
comments), or those of --backend while there is no file. The provider rewrites the file
through the Docker API and sends SIGHUP; lb also re-reads it when its modification time or
size changes. An invalid file is logged and the previous backends are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd)
		},
	}
	cmd.Flags().StringVar(&o.address, "address", "0.0.0.0", "IP address to listen on")
	cmd.Flags().IntSliceVar(&o.ports, "port", []int{6443, 50001}, "port to listen on and forward to (repeatable)")
	cmd.Flags().StringVar(&o.backendsFile, "backends-file", "/run/talon-lb/backends", "file of backend addresses, one per line")
	cmd.Flags().StringArrayVar(&o.backends, "backend", nil, "backend address while there is no backends file (repeatable)")
	return cmd
}

func (o *lbOptions) run(cmd *cobra.Command) error {
	initial := make([]netip.Addr, 0, len(o.backends))
	for _, backend := range o.backends {
		addr, err := netip.ParseAddr(backend)
		if err != nil {
			return fmt.Errorf("invalid --backend: %w", err)
		}
		initial = append(initial, addr)
	}
	out := cmd.ErrOrStderr()
	log := funcr.New(func(prefix, args string) { _, _ = fmt.Fprintln(out, prefix, args) }, funcr.Options{})

	// Signals are caught before anything is served: a SIGHUP must never end the process.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hangup := make(chan os.Signal, 1)
	signal.Notify(hangup, syscall.SIGHUP)
	defer signal.Stop(hangup)

	balancer := lb.New(o.ports...)
	backends := &backendsFile{path: o.backendsFile, fallback: initial, balancer: balancer, log: log}
	backends.reload()
	stopServing, err := balancer.Listen(logr.NewContext(ctx, log), o.address)
	if err != nil {
		return err
	}
	log.Info("Forwarding connections", "address", o.address, "ports", o.ports, "backendsFile", o.backendsFile)

	poll := time.NewTicker(backendsFilePollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("Stopping")
			stopServing()
			return nil
		case <-hangup:
			backends.reload()
		case <-poll.C:
			backends.reloadIfChanged()
		}
	}
}

// backendsFile keeps the backends of a Balancer those listed in a file.
type backendsFile struct {
	path string
	// fallback are the backends while there is no file.
	fallback []netip.Addr
	balancer *lb.Balancer
	log      logr.Logger
	// lastRead is the stamp of the file when it was last read.
	lastRead fileStamp
}

// fileStamp tells whether a file changed: writing it through the Docker API replaces it, with
// a new modification time or size.
type fileStamp struct {
	exists  bool
	modTime int64
	size    int64
}

func (f *backendsFile) stamp() fileStamp {
	info, err := os.Stat(f.path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{exists: true, modTime: info.ModTime().UnixNano(), size: info.Size()}
}

func (f *backendsFile) reloadIfChanged() {
	if f.stamp() != f.lastRead {
		f.reload()
	}
}

// reload sets the backends of the file, or keeps the current ones when it is invalid.
func (f *backendsFile) reload() {
	f.lastRead = f.stamp()
	current := f.balancer.Backends()
	backends, err := f.backends()
	if err != nil {
		f.log.Error(err, "Keeping the current backends", "backends", addrStrings(current))
		return
	}
	if slices.Equal(backends, current) {
		return
	}
	f.balancer.SetBackends(backends...)
	f.log.Info("Backends changed", "backends", addrStrings(backends), "previous", addrStrings(current))
}

func (f *backendsFile) backends() ([]netip.Addr, error) {
	file, err := os.Open(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return f.fallback, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read backends file: %w", err)
	}
	defer func() { _ = file.Close() }()
	backends, err := lb.ReadBackends(file)
	if err != nil {
		return nil, fmt.Errorf("invalid backends file %s: %w", f.path, err)
	}
	return backends, nil
}

func addrStrings(addrs []netip.Addr) []string {
	strs := make([]string, 0, len(addrs))
	for _, addr := range addrs {
		strs = append(strs, addr.String())
	}
	return strs
}
