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
	"net/netip"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/constants"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/talon-capi/talon/infrastructure/docker/lb"
)

// vipCampaignRetry is how long a node waits before campaigning for the VIP again, as
// Talos' VIP operator does.
const vipCampaignRetry = time.Second

// vipPorts are the ports a node that holds the VIP answers on it. Talos' services listen on
// every address of the node; the simulated node's listen on its own address only (the hosts
// share a network namespace), so the holder forwards these from the VIP.
var vipPorts = []int{APIServerPort, APIPort, TrustdPort}

// vipElectionKey is the etcd election Talos' VIP operator holds for vip.
func vipElectionKey(vip netip.Addr) string {
	return fmt.Sprintf("%s:vip:election:%s", constants.EtcdRootTalosKey, vip)
}

// sharedVIP is the Layer 2 VIP as one control-plane node sees it.
type sharedVIP struct {
	addr netip.Addr
	link string
	// resign ends the node's term when it shuts down or reboots (not on a power cut); nil
	// while it does not hold the VIP.
	mu     sync.Mutex
	resign func()
	// leaving is set once the node shuts down or reboots: it campaigns no more.
	leaving atomic.Bool
}

// runVIP is Talos' VIP operator on a control-plane node whose config shares vip on its
// link, until ctx ends or the node shuts down: once the node's etcd member and kubelet run
// (not waiting for kube-apiserver, which may not be up yet at the cluster's bootstrap), it
// campaigns in an etcd election for the VIP under Talos' key, with the hostname as its value
// and the default session (a 60 s lease). Elected, it puts the VIP on the link and holds it
// until another node leads, its etcd member or kube-apiserver stops, or it shuts down
// (resigning). A node powered off without a shutdown does not resign: the others take over
// when its lease expires.
func (n *Node) runVIP(ctx context.Context, vip netip.Addr) {
	v := &sharedVIP{addr: vip, link: n.opts.Link}
	n.mu.Lock()
	n.vip = v
	n.mu.Unlock()
	for ctx.Err() == nil && !v.leaving.Load() {
		if err := n.campaign(ctx, v); err != nil && ctx.Err() == nil {
			n.opts.Log.V(1).Info("VIP campaign ended", "vip", vip.String(), "reason", err.Error())
		}
		select {
		case <-ctx.Done():
		case <-time.After(vipCampaignRetry):
		}
	}
}

// vipPreconditions returns the node's etcd member once it and the kubelet run, nil while
// they do not, and whether kube-apiserver runs.
func (n *Node) vipPreconditions() (*etcdMember, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.etcd == nil || n.kubelet == nil {
		return nil, false
	}
	return n.etcd, n.apiServer != nil
}

func (n *Node) campaign(parent context.Context, v *sharedVIP) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var member *etcdMember
	for member, _ = n.vipPreconditions(); member == nil; member, _ = n.vipPreconditions() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retryInterval):
		}
	}
	hostname := n.hostname()
	session, err := concurrency.NewSession(member.client, concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("failed to create a concurrency session: %w", err)
	}
	defer func() {
		// Closing the session revokes its lease, as Talos does when a campaign ends; a node
		// powered off (its services' context ended) closes nothing, and keeps the VIP's
		// election until its lease expires.
		if parent.Err() == nil {
			_ = session.Close()
		}
	}()
	key := vipElectionKey(v.addr)
	election := concurrency.NewElection(session, key)
	if leader, err := election.Leader(ctx); err == nil && string(leader.Kvs[0].Value) == hostname {
		// Still the leader of an election before a restart: resign to force a new one.
		resumed := concurrency.ResumeElection(session, key, string(leader.Kvs[0].Key), leader.Kvs[0].CreateRevision)
		if err := resumed.Resign(ctx); err != nil {
			return fmt.Errorf("failed to resign from the previous election: %w", err)
		}
	} else if err != nil && !errors.Is(err, concurrency.ErrElectionNoLeader) {
		return fmt.Errorf("failed to read the current leader: %w", err)
	}
	won := make(chan error, 1)
	go func() { won <- election.Campaign(ctx, hostname) }()
	ticker := time.NewTicker(retryInterval)
	defer ticker.Stop()
	for waiting := true; waiting; {
		select {
		case err := <-won:
			if err != nil {
				return fmt.Errorf("failed to campaign: %w", err)
			}
			waiting = false
		case <-session.Done():
			return errors.New("the etcd session ended")
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if now, _ := n.vipPreconditions(); now != member || v.leaving.Load() {
				return errors.New("etcd or the kubelet stopped")
			}
		}
	}

	resigned := make(chan struct{})
	resign := sync.OnceFunc(func() {
		resignCtx, cancelResign := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelResign()
		_ = election.Resign(resignCtx)
		close(resigned)
	})
	holder, err := n.acquireVIP(v)
	if err != nil {
		resign()
		return err
	}
	n.opts.Log.Info("Enabled the shared IP", "link", v.link, "ip", v.addr.String())
	v.mu.Lock()
	v.resign = resign
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.resign = nil
		v.mu.Unlock()
		holder.release()
		n.opts.Log.Info("Removed the shared IP", "link", v.link, "ip", v.addr.String())
	}()
	_, apiServerWasUp := n.vipPreconditions()
	observe := election.Observe(ctx)
	for {
		select {
		case <-session.Done():
			return errors.New("the etcd session ended")
		case <-ctx.Done():
			return nil
		case <-resigned:
			return nil
		case resp, ok := <-observe:
			if !ok {
				return nil
			}
			if string(resp.Kvs[0].Value) != hostname {
				n.opts.Log.Info("Another node leads the VIP's election", "leader", string(resp.Kvs[0].Value))
				return nil
			}
		case <-ticker.C:
			// kube-apiserver stopping ends the term (Talos watches its static pod go away);
			// one that was not running when the node won does not.
			now, apiServer := n.vipPreconditions()
			stopped := apiServerWasUp && !apiServer
			apiServerWasUp = apiServer
			if now != member || stopped {
				// etcd or kube-apiserver stopped: give the VIP up, gracefully.
				resign()
				return nil
			}
		}
	}
}

// resignVIP gives the VIP up gracefully, as a node shutting down or rebooting does.
func (n *Node) resignVIP() {
	n.mu.Lock()
	v := n.vip
	n.mu.Unlock()
	if v == nil {
		return
	}
	v.leaving.Store(true)
	v.mu.Lock()
	resign := v.resign
	v.mu.Unlock()
	if resign != nil {
		resign()
	}
}

// vipHolder is a node holding the VIP: the address on its link, and a forwarder (Talon's
// load balancer with the node as its only backend) that stands in for its services
// listening on every address.
type vipHolder struct {
	n    *Node
	v    *sharedVIP
	stop func()
}

// acquireVIP puts the VIP on the node's link and answers on it.
func (n *Node) acquireVIP(v *sharedVIP) (*vipHolder, error) {
	h := &vipHolder{n: n, v: v, stop: func() {}}
	if err := h.ip("add"); err != nil {
		return nil, err
	}
	n.mu.Lock()
	self, _ := netip.AddrFromSlice(n.ip)
	n.mu.Unlock()
	forwarder := lb.New(vipPorts...)
	forwarder.SetBackends(self.Unmap())
	stop, err := forwarder.Listen(context.Background(), v.addr.String())
	if err != nil {
		h.release()
		return nil, fmt.Errorf("failed to answer on the VIP: %w", err)
	}
	h.stop = stop
	return h, nil
}

// release takes the VIP off the link: its listeners and the connections through it end, as
// they do when the address leaves the holder.
func (h *vipHolder) release() {
	h.stop()
	if err := h.ip("del"); err != nil {
		h.n.opts.Log.Info("Cannot remove the shared IP", "reason", err.Error())
	}
}

// ip adds or deletes the VIP on the holder's link, as a host address (/32 or /128) as Talos
// does.
func (h *vipHolder) ip(op string) error {
	args := []string{"address", op, netip.PrefixFrom(h.v.addr, h.v.addr.BitLen()).String(), "dev", h.v.link}
	//nolint:gosec // ip with the node's own link and the VIP of its config
	if out, err := exec.CommandContext(context.Background(), "ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %v: %w: %s", args, err, out)
	}
	return nil
}
