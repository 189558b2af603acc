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
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// answerGrace lets the answer to a Reboot, Shutdown or Upgrade reach the caller before the
// node goes down, as Talos answers before it acts.
const answerGrace = 200 * time.Millisecond

// later runs fn after delay in the background, unless the node is powered off meanwhile
// (or its power context ends): an answered Reboot, Shutdown or Upgrade never powers on a node
// someone else stopped.
func (n *Node) later(delay time.Duration, fn func(ctx context.Context)) {
	ctx, stops := n.powerState()
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		if !n.poweredOffSince(stops) {
			fn(ctx)
		}
	}()
}

// powerState is the context the node was powered on with and how often it was powered off.
func (n *Node) powerState() (context.Context, int) {
	n.mu.Lock()
	ctx := n.powerCtx
	n.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	n.power.Lock()
	defer n.power.Unlock()
	return ctx, n.stops
}

// poweredOffSince reports whether the node was powered off since powerState counted stops.
func (n *Node) poweredOffSince(stops int) bool {
	n.power.Lock()
	defer n.power.Unlock()
	return n.stops != stops
}

// rebootLater reboots the node once the current call has been answered; actorID is the
// request's, which the reboot's events carry.
func (n *Node) rebootLater(reason, actorID string) {
	n.later(answerGrace, func(context.Context) { n.reboot(reason, actorID) })
}

// reboot stops the node gracefully and boots it again after the reboot delay. As machined's
// reboot sequence, it publishes the sequence, the rebooting stage and the task that stops
// every service, for actorID.
func (n *Node) reboot(reason, actorID string) {
	n.opts.Log.Info("Rebooting", "reason", reason)
	n.sequence("reboot", actorID)
	n.setStage(runtime.MachineStageRebooting)
	ctx, _ := n.powerState()
	n.stopAllServices(ctx, actorID)
	n.Stop()
	n.bootAgain("a reboot")
}

// bootAgain boots the stopped node after the reboot delay; after names what stopped it.
func (n *Node) bootAgain(after string) {
	n.later(n.opts.RebootDelay, func(ctx context.Context) {
		if err := n.Start(ctx, nil); err != nil && ctx.Err() == nil {
			n.opts.Log.Error(err, "Failed to boot after "+after)
		}
	})
}

// stopAllServices is machined's stopAllServices task, as far as the outside sees it: its
// start, the kubelet reporting the Node NotReady, its end. The node's API stays up a moment
// longer, so that whoever watches the events sees the task end.
func (n *Node) stopAllServices(ctx context.Context, actorID string) {
	n.stopAllServicesEvents(actorID, machine.TaskEvent_START)
	n.resignVIP()
	n.reportShutdown(ctx)
	n.stopAllServicesEvents(actorID, machine.TaskEvent_STOP)
	time.Sleep(answerGrace)
}

// shutdownLater powers the node off gracefully once the current call has been answered.
func (n *Node) shutdownLater(actorID string) {
	n.later(answerGrace, func(ctx context.Context) {
		n.opts.Log.Info("Shutting down")
		n.sequence("shutdown", actorID)
		n.setStage(runtime.MachineStageShuttingDown)
		n.stopAllServices(ctx, actorID)
		n.powerOffGracefully()
	})
}

// powerOffGracefully powers the node off after its services stopped, and tells whoever
// watches its power (a BMC).
func (n *Node) powerOffGracefully() {
	n.Stop()
	n.poweredOff()
}

// poweredOff tells whoever watches the node's power (a BMC) that it went off by itself.
func (n *Node) poweredOff() {
	if n.opts.OnShutdown != nil {
		n.opts.OnShutdown()
	}
}

// upgradeLater installs version and reboots into it after the upgrade delay.
func (n *Node) upgradeLater(version, actorID string) {
	n.later(n.opts.UpgradeDelay, func(context.Context) {
		if err := n.install(version); err != nil {
			n.opts.Log.Error(err, "Upgrade failed")
			return
		}
		n.reboot("upgrade to "+version, actorID)
	})
}

// install writes version as the Talos version the node boots next.
func (n *Node) install(version string) error {
	if n.failInstalls.Load() {
		return errors.New("failed to write the boot partition of /dev/sda: input/output error")
	}
	// The simulator boots no Talos newer than the minor of DefaultTalosVersion.
	contract, err := talosconfig.ParseContractFromVersion(version)
	if err != nil {
		return fmt.Errorf("installer version %q: %w", version, err)
	}
	if newest, _ := talosconfig.ParseContractFromVersion(DefaultTalosVersion); contract.Greater(newest) {
		return fmt.Errorf("the simulator cannot boot Talos %s: the newest version it runs is %s", version, DefaultTalosVersion)
	}
	return os.WriteFile(n.stateDir("talos-version"), []byte(version+"\n"), 0o600)
}

// PowerOff cuts the node's power: nothing is shut down gracefully and the kubelet reports
// nothing (kube-controller-manager marks the Node NotReady once its Lease expires). Same as
// Stop.
func (n *Node) PowerOff() { n.Stop() }

// PowerOn boots a powered-off node from its state on disk.
func (n *Node) PowerOn(ctx context.Context) error { return n.Start(ctx, nil) }

// CrashEtcd kills the node's etcd member, as a crash-looping etcd: the rest of the node
// keeps running and the member stays down until the node reboots.
func (n *Node) CrashEtcd() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.etcd == nil {
		return errors.New("etcd is not running on this node")
	}
	n.etcd.stop()
	n.etcd = nil
	n.services.stopped("etcd", serviceFailed, "Task etcd exited with an error (the simulator's CrashEtcd fault)")
	n.opts.Log.Info("Fault: etcd crashed")
	return nil
}

// Partition cuts the node off: its Talos API and trustd accept connections but answer
// nothing, its kubelet stops reporting, its kube-apiserver and kube-controller-manager
// freeze, and its etcd member becomes unreachable to its peers (in one process it is
// stopped, and started again from its data when the node is healed).
func (n *Node) Partition() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.partitioned {
		return
	}
	n.partitioned, n.healed = true, make(chan struct{})
	n.apiServer.signal(syscall.SIGSTOP)
	n.controllerManager.signal(syscall.SIGSTOP)
	if n.etcd != nil {
		n.etcd.stop()
		n.etcd = nil
		go n.restartEtcdWhenHealed(n.servicesCtx, n.healed)
	}
	n.opts.Log.Info("Fault: partitioned")
}

// Heal ends a partition.
func (n *Node) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.partitioned {
		return
	}
	n.partitioned = false
	close(n.healed)
	n.apiServer.signal(syscall.SIGCONT)
	n.controllerManager.signal(syscall.SIGCONT)
	n.opts.Log.Info("Partition healed")
}

// restartEtcdWhenHealed starts the node's etcd member again from its data once the
// partition ends.
func (n *Node) restartEtcdWhenHealed(ctx context.Context, healed <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-healed:
	}
	n.mu.Lock()
	cfg := n.cfg
	n.mu.Unlock()
	if cfg == nil {
		return
	}
	if err := n.retry(ctx, "Waiting to restart etcd", func() error { return n.startOwnEtcd(ctx, cfg) }); err == nil {
		n.opts.Log.Info("etcd is back after the partition")
	}
}

// waitWhilePartitioned holds a call while the node is partitioned: it is not answered
// until the partition heals or the caller gives up.
func (n *Node) waitWhilePartitioned(ctx context.Context) error {
	n.mu.Lock()
	partitioned, healed := n.partitioned, n.healed
	n.mu.Unlock()
	if !partitioned {
		return nil
	}
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-healed:
		return nil
	}
}

func (n *Node) partitionUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := n.waitWhilePartitioned(ctx); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// FailInstalls makes the node's installer fail (or work again), as on a system disk that
// returns I/O errors: an upgrade exits with an error and the node keeps its version.
func (n *Node) FailInstalls(fail bool) {
	n.failInstalls.Store(fail)
	n.opts.Log.Info("Fault: installs fail", "fail", fail)
}

// FaultHandler serves the node's faults over HTTP, for nodes in their own process or
// container: POST /power-off, /power-on, /crash-etcd, /partition, /heal, /fail-installs or
// /fix-installs.
func (n *Node) FaultHandler(ctx context.Context) http.Handler {
	faults := map[string]func() error{
		"/power-off":     func() error { n.PowerOff(); return nil },
		"/power-on":      func() error { return n.PowerOn(ctx) },
		"/crash-etcd":    n.CrashEtcd,
		"/partition":     func() error { n.Partition(); return nil },
		"/heal":          func() error { n.Heal(); return nil },
		"/fail-installs": func() error { n.FailInstalls(true); return nil },
		"/fix-installs":  func() error { n.FailInstalls(false); return nil },
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fault, ok := faults[r.URL.Path]
		if !ok || r.Method != http.MethodPost {
			http.Error(w, "POST one of /power-off, /power-on, /crash-etcd, /partition, /heal, /fail-installs, /fix-installs", http.StatusNotFound)
			return
		}
		if err := fault(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
}
