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
	"os"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// bootstrapEtcd starts a new etcd cluster with this node as its only member. It answers
// with Talos' codes (machined's Bootstrap): FailedPrecondition while bootstrapping is not
// possible yet, Unimplemented on a worker, AlreadyExists once etcd has data. With
// recover_etcd, as Talos, it answers once the etcd service started in bootstrap mode, and the
// service restores the uploaded snapshot before it runs the member (recoverEtcd): a missing or
// bad snapshot fails the service, not the call.
func (n *Node) bootstrapEtcd(ctx context.Context, req *machine.BootstrapRequest) error {
	if !n.configured() {
		return status.Error(codes.FailedPrecondition, "bootstrap is not available yet")
	}
	if !n.isControlPlane() {
		return status.Error(codes.Unimplemented, "bootstrap is only available on control plane nodes")
	}
	n.mu.Lock()
	if n.servicesCtx == nil || n.servicesCtx.Err() != nil {
		// Configured a moment ago: its services are about to start.
		n.mu.Unlock()
		return status.Error(codes.FailedPrecondition, "bootstrap is not available yet")
	}
	if n.etcd != nil || n.bootstrapping || dirHasData(n.stateDir("etcd")) {
		n.mu.Unlock()
		return status.Error(codes.AlreadyExists, "etcd data directory is not empty")
	}
	if req.GetRecoverEtcd() && n.opts.Light != nil {
		n.mu.Unlock()
		return status.Error(codes.Unimplemented, errNoMemoryData.Error())
	}
	// Start etcd without holding the lock, so the node keeps answering meanwhile.
	n.bootstrapping = true
	name, cfg, servicesCtx := n.hostnameLocked(), n.cfg, n.servicesCtx
	n.mu.Unlock()
	if req.GetRecoverEtcd() {
		// machined replaces the etcd service with one in bootstrap mode and answers once it
		// started; the new service's events start afresh.
		n.services.restart("etcd")
		go n.recoverEtcd(servicesCtx, cfg, name, req.GetRecoverSkipHashCheck())
		return nil
	}
	defer func() {
		n.mu.Lock()
		n.bootstrapping = false
		n.mu.Unlock()
	}()
	return n.startBootstrapMember(ctx, servicesCtx, cfg, name, false)
}

// etcdMember returns the running member, or the gRPC error Talos gives without one.
func (n *Node) etcdMember() (*etcdMember, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.etcd == nil {
		return nil, status.Error(codes.FailedPrecondition, "etcd is not running on this node")
	}
	return n.etcd, nil
}

// leaveRetry is how often leaveEtcd retries a removal etcd refuses for now (machined: 10 s).
const leaveRetry = time.Second

// leaveEtcd removes this member from its cluster, stops it and drops its data, as machined's
// LeaveCluster does: the removal goes through every member and is retried, for up to 5
// minutes, while etcd says the cluster is unhealthy (a member not connected for long enough,
// as right after a leadership change) or the server stopped (this member applying its own
// removal); a member already gone counts as removed. Errors are etcd's, wrapped as machined
// wraps them.
func (n *Node) leaveEtcd(ctx context.Context) error {
	m, err := n.etcdMember()
	if err != nil {
		return err
	}
	id := m.id()
	endpoints := m.client.Endpoints()
	if list, err := m.client.MemberList(ctx, clientv3.WithSerializable()); err == nil {
		for _, member := range list.Members {
			endpoints = append(endpoints, member.ClientURLs...)
		}
	}
	c, err := n.etcdClient(etcdTLSInfo(n.stateDir("etcd-pki")), endpoints...)
	if err != nil {
		return fmt.Errorf("failed to create etcd client: %w", err)
	}
	defer func() { _ = c.Close() }()
	m.leaving.Store(true)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		_, err := c.MemberRemove(ctx, id)
		if err == nil || errors.Is(err, rpctypes.ErrMemberNotFound) {
			break
		}
		if !errors.Is(err, rpctypes.ErrUnhealthy) && !errors.Is(err, rpctypes.ErrStopped) {
			m.leaving.Store(false)
			return fmt.Errorf("failed to leave cluster: %w", err)
		}
		select {
		case <-ctx.Done():
			m.leaving.Store(false)
			return fmt.Errorf("failed to leave cluster: %w", err)
		case <-time.After(leaveRetry):
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	m.stop()
	if n.etcd == m {
		n.etcd = nil
	}
	n.services.stopped("etcd", serviceFinished, "Service finished successfully")
	return os.RemoveAll(m.dir)
}

func dirHasData(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}

// watchRemoval records the member's service as running and stops the member once it is no
// longer in its cluster, as an etcd process exits when it learns it was removed. Nothing is
// wiped: a node that should serve again is reset or rejoins from scratch.
func (n *Node) watchRemoval(m *etcdMember) {
	n.services.running("etcd")
	go func() {
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-m.stopNotify():
				return
			case <-ticker.C:
			}
			if m.isMember() {
				continue
			}
			if m.leaving.Load() {
				return // leaveEtcd stops it
			}
			n.mu.Lock()
			if n.etcd == m {
				m.stop()
				n.etcd = nil
				n.services.stopped("etcd", serviceFailed, "etcd: the member has been permanently removed from the cluster")
				n.opts.Log.Info("etcd member was removed from the cluster; stopped it")
			}
			n.mu.Unlock()
			return
		}
	}()
}

// SplitEtcd turns the node's etcd member into a cluster of its own: its data is dropped
// and a new single-member cluster starts in its place, with the same name and peer URL —
// what a node whose etcd data was lost becomes when someone bootstraps it again. A fault
// for tests of split-brain detection: the other members still list the node's old member,
// which no longer answers them, and the node lists only its new one.
func (n *Node) SplitEtcd(ctx context.Context) error {
	n.mu.Lock()
	old, name := n.etcd, n.hostnameLocked()
	if old != nil && old.mem != nil {
		n.mu.Unlock()
		return errors.New("a light node cannot split its etcd member off: its cluster is held in memory by peer URL")
	}
	n.etcd = nil
	n.mu.Unlock()
	if old == nil {
		return errors.New("the node runs no etcd member")
	}
	old.stop()
	if err := os.RemoveAll(old.dir); err != nil {
		return err
	}
	member, err := n.startEtcd(ctx, old.dir, etcdTLSInfo(n.stateDir("etcd-pki")), name, name+"="+etcdPeer(n.ip), "new")
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.etcd = member
	n.mu.Unlock()
	n.watchRemoval(member)
	n.opts.Log.Info("Fault: etcd split off into a cluster of its own", "member", name)
	return nil
}

// Boots is how many times the node has booted (each with a new boot ID): tests count the
// reboots something caused.
func (n *Node) Boots() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.boots
}

// Bootstraps is how many times this node started a new etcd cluster through Bootstrap: a
// control plane bootstraps once in its life, so tests count this across their nodes.
func (n *Node) Bootstraps() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.bootstrapped
}
