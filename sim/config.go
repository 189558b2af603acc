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

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	machinetype "github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// errInvalidConfig wraps machinery's reason for refusing a config.
var errInvalidConfig = errors.New("invalid machine config")

// validate checks a config the way the node's Talos version loads it: a document kind that
// version has not registered fails the load, with Talos' words; then machinery validates the
// config for the node's mode.
func (n *Node) validate(data []byte) error {
	contract, err := talosconfig.ParseContractFromVersion(n.talosVersion())
	if err != nil {
		return err
	}
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return err
	}
	if unknown := configgen.UnknownDocument(cfg, contract); unknown != nil {
		return unknown
	}
	_, err = configgen.Validate(data, n.opts.Mode, contract)
	return err
}

// applyConfig loads and validates data with machinery, as a Talos node does, and makes it the
// node's config. A refused config leaves the node as it was.
func (n *Node) applyConfig(ctx context.Context, data []byte) error {
	if err := n.validate(data); err != nil {
		return fmt.Errorf("%w: %w", errInvalidConfig, err)
	}
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return fmt.Errorf("%w: %w", errInvalidConfig, err)
	}

	clientCAs := stdx509.NewCertPool()
	ca := cfg.Machine().Security().IssuingCA()
	if ca == nil || !clientCAs.AppendCertsFromPEM(ca.Crt) {
		return fmt.Errorf("%w: machine.ca has no certificate", errInvalidConfig)
	}
	moved, err := n.configureLink(ctx, cfg)
	if err != nil {
		return fmt.Errorf("failed to configure the network: %w", err)
	}
	if moved {
		// The Talos API follows the node to its static address, once this call is answered.
		n.later(answerGrace, func(context.Context) { n.rebind() })
	}
	for _, accepted := range cfg.Machine().Security().AcceptedCAs() {
		clientCAs.AppendCertsFromPEM(accepted.Crt)
	}
	var serverCert *tls.Certificate
	if len(ca.Key) > 0 {
		hostname := "talos"
		if h := cfg.NetworkHostnameConfig(); h != nil && h.Hostname() != "" {
			hostname = h.Hostname()
		}
		pem, err := issue(ca, hostname, []net.IP{n.ip}, append([]string{hostname}, cfg.Machine().Security().CertSANs()...),
			[]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth})
		if err != nil {
			return err
		}
		cert, err := tls.X509KeyPair(pem.Crt, pem.Key)
		if err != nil {
			return err
		}
		serverCert = &cert
	}
	//nolint:gosec // the path is the node's own state directory, from its options.
	if err := os.WriteFile(n.stateDir("config.yaml"), data, 0o600); err != nil {
		return fmt.Errorf("failed to persist the config: %w", err)
	}

	n.mu.Lock()
	first, old := n.cfg == nil, n.cfg
	n.cfg, n.cfgData, n.clientCAs = cfg, data, clientCAs
	if serverCert != nil || first {
		// A worker keeps the certificate trustd issued it.
		n.serverCert = serverCert
	}
	n.opts.Log.Info("Machine config applied", "type", cfg.Machine().Type().String(), "hostname", n.hostnameLocked())
	n.mu.Unlock()
	n.publishConfig(cfg)
	if first {
		n.mu.Lock()
		n.booting = true
		n.mu.Unlock()
		n.publishInstalled()
		n.setStage(runtime.MachineStageBooting)
		n.startServices(cfg)
	} else {
		n.restartKubernetesIfChanged(old, cfg)
		n.restartKubeletIfChanged(old, cfg)
	}
	n.notifyConfigChanged()
	return nil
}

// notifyConfigChanged wakes the kubelet stand-in to report the node as it is now.
func (n *Node) notifyConfigChanged() {
	select {
	case n.configChanged <- struct{}{}:
	default:
	}
}

// startServices starts what a node runs once it has a config. A control-plane node with
// etcd data restarts its member; one without joins the cluster's etcd once another node has
// bootstrapped it (or waits for Bootstrap on itself).
func (n *Node) startServices(cfg talosconfig.Provider) {
	ctx, cancel := context.WithCancel(context.Background())
	n.mu.Lock()
	n.servicesCtx, n.stopServices = ctx, cancel
	n.mu.Unlock()
	// The services a configured Talos node runs (but udevd, syslogd, auditd and the
	// dashboard, which the simulator has no counterpart for); the kubelet and etcd start
	// when they can.
	running := []string{"apid", "containerd", "cri", "machined"}
	if cfg.Machine().Type() == machinetype.TypeControlPlane {
		running = append(running, "trustd")
		n.services.event("etcd", serviceWaiting, "Waiting for etcd spec")
	}
	for _, id := range running {
		n.services.running(id)
	}
	n.services.event("kubelet", serviceWaiting, "Waiting for the kubelet's certificates and its node's registration")
	if cfg.Machine().Type() != machinetype.TypeControlPlane {
		go n.runWorker(ctx, cfg)
		return
	}
	if s, err := n.linkSettings(cfg); err == nil && s.vip.IsValid() {
		go n.runVIP(ctx, s.vip)
	}
	if dirHasData(n.stateDir("etcd")) {
		go n.restartControlPlane(ctx, cfg)
		return
	}
	go n.joinControlPlane(ctx, cfg)
}
