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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	machinetype "github.com/siderolabs/talos/pkg/machinery/config/machine"
	etcdversion "go.etcd.io/etcd/api/v3/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// machineService is the node's Talos machine API. Methods it does not implement answer
// Unimplemented, as a Talos node without the feature would.
type machineService struct {
	machine.UnimplementedMachineServiceServer
	node *Node
	// applying allows one config apply at a time from Talos 1.13.3, as machined's.
	applying sync.Mutex
}

// Version reports the simulated Talos version and platform.
func (s *machineService) Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error) {
	return &machine.VersionResponse{Messages: []*machine.Version{{
		Version: &machine.VersionInfo{
			Tag: s.node.talosVersion(), Sha: "talon-sim", GoVersion: runtime.Version(), Os: runtime.GOOS, Arch: runtime.GOARCH,
		},
		Platform: &machine.PlatformInfo{Name: string(s.node.opts.Mode), Mode: string(s.node.opts.Mode)},
	}}}, nil
}

// Bootstrap starts the first etcd member of the cluster on this control-plane node. It
// succeeds once per cluster: a node whose etcd already has data refuses, like Talos. With
// recover_etcd the member starts from the snapshot EtcdRecover uploaded.
func (s *machineService) Bootstrap(ctx context.Context, req *machine.BootstrapRequest) (*machine.BootstrapResponse, error) {
	if err := s.node.bootstrapEtcd(ctx, req); err != nil {
		return nil, err
	}
	return &machine.BootstrapResponse{Messages: []*machine.Bootstrap{{}}}, nil
}

// EtcdMemberList lists the members of the etcd cluster this node belongs to, as its own
// member sees them. With query_local Talos asks the local member and fails when it is not
// serving; without, Talos asks any control-plane node, which the simulator does not do yet:
// it answers from its own member, or FailedPrecondition without one.
func (s *machineService) EtcdMemberList(ctx context.Context, req *machine.EtcdMemberListRequest) (*machine.EtcdMemberListResponse, error) {
	m, err := s.node.etcdMember()
	if err != nil && req.GetQueryLocal() {
		return nil, status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:2379: connect: connection refused\"")
	}
	if err != nil {
		return nil, err
	}
	resp, err := m.client.MemberList(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "failed to list etcd members: %v", err)
	}
	out := &machine.EtcdMembers{}
	for _, member := range resp.Members {
		out.Members = append(out.Members, &machine.EtcdMember{
			Id: member.ID, Hostname: member.Name, PeerUrls: member.PeerURLs, ClientUrls: member.ClientURLs, IsLearner: member.IsLearner,
		})
	}
	return &machine.EtcdMemberListResponse{Messages: []*machine.EtcdMembers{out}}, nil
}

// EtcdRemoveMemberByID removes a member from the etcd cluster: a real membership change.
func (s *machineService) EtcdRemoveMemberByID(ctx context.Context, req *machine.EtcdRemoveMemberByIDRequest) (*machine.EtcdRemoveMemberByIDResponse, error) {
	m, err := s.node.etcdMember()
	if err != nil {
		return nil, err
	}
	if _, err := m.client.MemberRemove(ctx, req.GetMemberId()); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "failed to remove etcd member %x: %v", req.GetMemberId(), err)
	}
	return &machine.EtcdRemoveMemberByIDResponse{Messages: []*machine.EtcdRemoveMemberByID{{}}}, nil
}

// EtcdLeaveCluster removes this node's member from the cluster and stops it.
func (s *machineService) EtcdLeaveCluster(ctx context.Context, _ *machine.EtcdLeaveClusterRequest) (*machine.EtcdLeaveClusterResponse, error) {
	if err := s.node.leaveEtcd(ctx); err != nil {
		return nil, err
	}
	return &machine.EtcdLeaveClusterResponse{Messages: []*machine.EtcdLeaveCluster{{}}}, nil
}

// EtcdForfeitLeadership hands leadership to another voting member if this one leads.
func (s *machineService) EtcdForfeitLeadership(ctx context.Context, _ *machine.EtcdForfeitLeadershipRequest) (*machine.EtcdForfeitLeadershipResponse, error) {
	m, err := s.node.etcdMember()
	if err != nil {
		return nil, err
	}
	resp := &machine.EtcdForfeitLeadershipResponse{Messages: []*machine.EtcdForfeitLeadership{{}}}
	if m.leader() != m.id() {
		return resp, nil
	}
	members, err := m.client.MemberList(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "failed to list etcd members: %v", err)
	}
	for _, member := range members.Members {
		if member.ID != m.id() && !member.IsLearner {
			if _, err := m.client.MoveLeader(ctx, member.ID); err != nil {
				return nil, status.Errorf(codes.Unavailable, "failed to move etcd leadership: %v", err)
			}
			resp.Messages[0].Member = member.Name
			return resp, nil
		}
	}
	return resp, nil
}

// EtcdStatus reports this member's status as etcd sees it. It is read from the member
// itself rather than through etcd's Status call, which panics in a member that has just
// applied its own removal; a removed member answers FailedPrecondition.
func (s *machineService) EtcdStatus(context.Context, *emptypb.Empty) (_ *machine.EtcdStatusResponse, err error) {
	m, err := s.node.etcdMember()
	if err != nil {
		// Talos asks its local etcd and wraps the client's error: gRPC code Unknown.
		return nil, status.Error(codes.Unknown, "failed to query etcd status: dial tcp 127.0.0.1:2379: connect: connection refused")
	}
	if m.mem != nil {
		return memoryEtcdStatus(m)
	}
	srv := m.server.Server
	stopping := status.Error(codes.Unavailable, "this etcd member is stopping")
	select {
	case <-srv.StopNotify():
		return nil, stopping
	default:
	}
	// A member that stops meanwhile closes its backend under the reads below, and bbolt
	// panics on a closed database: that is a member stopping, not a node crashing.
	defer func() {
		if recover() != nil {
			err = stopping
		}
	}()
	self := srv.Cluster().Member(srv.MemberID())
	if self == nil {
		return nil, status.Error(codes.FailedPrecondition, "this etcd member was removed from the cluster")
	}
	st := &machine.EtcdMemberStatus{
		MemberId: uint64(srv.MemberID()), ProtocolVersion: etcdversion.Version,
		DbSize: srv.Backend().Size(), DbSizeInUse: srv.Backend().SizeInUse(), Leader: uint64(srv.Leader()),
		RaftIndex: srv.CommittedIndex(), RaftTerm: srv.Term(), RaftAppliedIndex: srv.AppliedIndex(), IsLearner: self.IsLearner,
	}
	if v := srv.StorageVersion(); v != nil {
		st.StorageVersion = v.String()
	}
	if st.Leader == 0 {
		st.Errors = append(st.Errors, "etcdserver: no leader")
	}
	for _, alarm := range srv.Alarms() {
		st.Errors = append(st.Errors, alarm.String())
	}
	return &machine.EtcdStatusResponse{Messages: []*machine.EtcdStatus{{MemberStatus: st}}}, nil
}

// EtcdSnapshot streams a real etcd snapshot of this member.
func (s *machineService) EtcdSnapshot(_ *machine.EtcdSnapshotRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	m, err := s.node.etcdMember()
	if err != nil {
		return err
	}
	if m.mem != nil {
		return status.Error(codes.Unimplemented, errNoMemoryData.Error())
	}
	snapshot, err := m.client.Snapshot(stream.Context())
	if err != nil {
		return status.Errorf(codes.Unavailable, "failed to take etcd snapshot: %v", err)
	}
	defer func() { _ = snapshot.Close() }()
	return streamData(stream, snapshot)
}

// Kubeconfig returns an admin kubeconfig for the cluster endpoint, as a gzipped tar.
func (s *machineService) Kubeconfig(_ *emptypb.Empty, stream grpc.ServerStreamingServer[common.Data]) error {
	if !s.node.isControlPlane() {
		return status.Error(codes.FailedPrecondition, "kubeconfig is only available on control-plane nodes")
	}
	s.node.mu.Lock()
	cfg := s.node.cfg
	s.node.mu.Unlock()
	archive, err := kubeconfigArchive(cfg)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return streamData(stream, bytes.NewReader(archive))
}

// ServiceList reports the node's services, as Talos' service manager would.
func (s *machineService) ServiceList(context.Context, *emptypb.Empty) (*machine.ServiceListResponse, error) {
	return &machine.ServiceListResponse{Messages: []*machine.ServiceList{{Services: s.node.services.list()}}}, nil
}

// Reboot restarts the node after answering: the kubelet reports NotReady, every service
// stops, a staged config becomes active, and the node boots again after its reboot delay.
// The answer names the actor whose events follow the reboot, as machined's does.
func (s *machineService) Reboot(context.Context, *machine.RebootRequest) (*machine.RebootResponse, error) {
	actorID := uuid.NewString()
	s.node.rebootLater("reboot", actorID)
	return &machine.RebootResponse{Messages: []*machine.Reboot{{ActorId: actorID}}}, nil
}

// Shutdown powers the node off after answering; it stays off until powered on.
func (s *machineService) Shutdown(context.Context, *machine.ShutdownRequest) (*machine.ShutdownResponse, error) {
	actorID := uuid.NewString()
	s.node.shutdownLater(actorID)
	return &machine.ShutdownResponse{Messages: []*machine.Shutdown{{ActorId: actorID}}}, nil
}

// Upgrade installs the Talos version of the installer image's tag: after the node's upgrade
// delay it reboots into it, keeping its state.
func (s *machineService) Upgrade(_ context.Context, req *machine.UpgradeRequest) (*machine.UpgradeResponse, error) {
	version := imageTag(req.GetImage())
	if !strings.HasPrefix(version, "v") {
		return nil, status.Errorf(codes.InvalidArgument, "installer image %q has no version tag", req.GetImage())
	}
	actorID := uuid.NewString()
	s.node.upgradeLater(version, actorID)
	return &machine.UpgradeResponse{Messages: []*machine.Upgrade{{
		Ack: "Upgrade request received", ActorId: actorID,
	}}}, nil
}

// Reset checks what it is asked to wipe as machined does, answers with the actor of the
// reset, and then, as machined's reset sequence: leaves etcd (when graceful, on a
// control-plane node), stops every service, wipes the system disk or just the partitions
// asked for, and reboots (into maintenance mode, when STATE was wiped) or powers off.
func (s *machineService) Reset(ctx context.Context, req *machine.ResetRequest) (*machine.ResetResponse, error) {
	wipe, err := s.node.resetTargets(ctx, req)
	if err != nil {
		return nil, err
	}
	actorID := uuid.NewString()
	s.node.later(answerGrace, func(ctx context.Context) { s.node.reset(ctx, req, wipe, actorID) })
	return &machine.ResetResponse{Messages: []*machine.Reset{{ActorId: actorID}}}, nil
}

// isControlPlane reports whether the node's config is a control-plane config.
func (n *Node) isControlPlane() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg != nil && n.cfg.Machine().Type() == machinetype.TypeControlPlane
}

// streamData sends r as a stream of common.Data chunks.
func streamData(stream grpc.ServerStreamingServer[common.Data], r io.Reader) error {
	buf := make([]byte, 64*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if sendErr := stream.Send(&common.Data{Bytes: append([]byte(nil), buf[:n]...)}); sendErr != nil {
				return sendErr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("failed to read: %w", err)
		}
	}
}

// simMemory is the memory a simulated node reports, in kB as /proc/meminfo counts it: 4 GiB,
// more than Talos' minimum for a control-plane node.
const simMemory = 4 << 20

// Memory reports the node's memory, as /proc/meminfo would.
func (s *machineService) Memory(context.Context, *emptypb.Empty) (*machine.MemoryResponse, error) {
	return &machine.MemoryResponse{Messages: []*machine.Memory{{Meminfo: &machine.MemInfo{
		Memtotal: simMemory, Memfree: simMemory / 2, Memavailable: simMemory * 3 / 4, Cached: simMemory / 8,
	}}}}, nil
}
