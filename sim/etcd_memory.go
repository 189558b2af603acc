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
	"io"
	"math/rand/v2"
	"slices"
	"sync"

	etcdserverpb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	etcdversion "go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

// memEtcd is an etcd cluster of light nodes (Options.Light) held in memory: its membership,
// which members run, and its leader, with the membership rules of etcd's strict
// reconfiguration check (etcd's default, and Talos'). It holds no keys: the Kubernetes
// objects its kube-apiservers serve live in an in-memory resource group of the cluster
// instead (apiserver_memory.go), as a real cluster's live in its etcd.
type memEtcd struct {
	light *Light
	id    uint64

	mu      sync.Mutex
	members []*memMember
	leader  uint64
	// index and term stand for the raft log: every membership change is an entry, every
	// new leader a term.
	index, term uint64
	// api serves the cluster's Kubernetes objects, once a kube-apiserver started.
	api *memAPI
	// forgotten: Light.Forget dropped the cluster with its objects (its disks are gone).
	forgotten bool
}

// memMember is one member of a memEtcd.
type memMember struct {
	id uint64
	// name and clientURLs are empty until the member first started, as etcd lists an
	// added member that has not published its attributes yet.
	name                 string
	peerURLs, clientURLs []string
	learner              bool
	// running: the member's node runs it; stopped closes when it stops.
	running bool
	stopped chan struct{}
}

// errNoMemoryData is the answer to what needs etcd's data, which light nodes do not keep.
var errNoMemoryData = errors.New("the scale-mode simulator keeps no etcd data: snapshots and recovery need a full simulated node")

// quorum is the number of voters a cluster of n voters needs to make progress.
func quorum(n int) int { return n/2 + 1 }

func (c *memEtcd) member(id uint64) *memMember {
	for _, m := range c.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (c *memEtcd) memberWithPeer(peerURL string) *memMember {
	for _, m := range c.members {
		if slices.Contains(m.peerURLs, peerURL) {
			return m
		}
	}
	return nil
}

// countVoters counts the voters other than except, and those of them that have started
// (published their name) at least once: etcd's reconfiguration check counts started members,
// not running ones.
func (c *memEtcd) countVoters(except uint64) (voters, started int) {
	for _, m := range c.members {
		if m.learner || m.id == except {
			continue
		}
		voters++
		if m.name != "" {
			started++
		}
	}
	return voters, started
}

// runningVoters counts the voters that run.
func (c *memEtcd) runningVoters() int {
	n := 0
	for _, m := range c.members {
		if !m.learner && m.running {
			n++
		}
	}
	return n
}

// electLocked keeps the leader while it runs as a voter with quorum, and otherwise elects the
// first running voter, if a quorum of voters runs.
func (c *memEtcd) electLocked() {
	voters, running := 0, 0
	for _, m := range c.members {
		if !m.learner {
			voters++
			if m.running {
				running++
			}
		}
	}
	if running < quorum(voters) {
		c.leader = 0
		return
	}
	if l := c.member(c.leader); l != nil && l.running && !l.learner {
		return
	}
	for _, m := range c.members {
		if m.running && !m.learner {
			c.leader = m.id
			c.term++
			return
		}
	}
}

// start runs the member with peerURL under name, serving clientURL; stopped closes when this
// run of it stops.
func (c *memEtcd) start(peerURL, name, clientURL string) (m *memMember, stopped <-chan struct{}, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgotten {
		return nil, nil, errors.New("etcd: the cluster's data is gone")
	}
	m = c.memberWithPeer(peerURL)
	if m == nil {
		return nil, nil, errors.New("etcd: member " + peerURL + " has already been removed from the cluster, or was never added")
	}
	if m.running {
		return nil, nil, errors.New("etcd: member " + name + " already runs")
	}
	m.name, m.clientURLs, m.running, m.stopped = name, []string{clientURL}, true, make(chan struct{})
	c.index++
	c.electLocked()
	return m, m.stopped, nil
}

// serves reports whether member id runs, is still a member and its cluster has a leader:
// what a kube-apiserver needs of its local etcd.
func (c *memEtcd) serves(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.member(id)
	return m != nil && m.running && c.leader != 0
}

// stop stops the member, as its node powering off.
func (c *memEtcd) stop(m *memMember) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !m.running {
		return
	}
	m.running = false
	close(m.stopped)
	c.electLocked()
}

// exists reports whether id is still a member.
func (c *memEtcd) exists(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.member(id) != nil
}

// leaderID is the cluster's leader, 0 without one.
func (c *memEtcd) leaderID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// client is an etcd client of the cluster's members at endpoints (client URLs), talking to
// the member self first.
func (c *memEtcd) client(self uint64, endpoints ...string) *clientv3.Client {
	client := clientv3.NewCtxClient(context.Background())
	api := &memClient{cluster: c, self: self, endpoints: endpoints}
	client.Cluster, client.Maintenance = api, api
	return client
}

// memClient answers etcd's Cluster and Maintenance calls from a memEtcd, through member self
// while it runs, else through another running member serving one of endpoints.
type memClient struct {
	cluster   *memEtcd
	self      uint64
	endpoints []string
}

var (
	_ clientv3.Cluster     = &memClient{}
	_ clientv3.Maintenance = &memClient{}
)

// serving picks the member the client talks to, as an etcd client of several endpoints
// moves on from one that stopped to a running one, and checks that it may answer: a learner
// answers only Status (learnerOK), and requests that need a leader need one. It returns with
// the cluster locked when it succeeds.
func (a *memClient) serving(needLeader, learnerOK bool) error {
	c := a.cluster
	c.mu.Lock()
	self := c.member(a.self)
	if self == nil || !self.running {
		for _, m := range c.members {
			if m.running && slices.ContainsFunc(m.clientURLs, func(u string) bool { return slices.Contains(a.endpoints, u) }) {
				self, a.self = m, m.id
				break
			}
		}
	}
	switch {
	case self == nil || !self.running:
		c.mu.Unlock()
		return rpctypes.ErrStopped
	case self.learner && !learnerOK:
		c.mu.Unlock()
		return rpctypes.Error(rpctypes.ErrGRPCNotSupportedForLearner)
	case needLeader && c.leader == 0:
		c.mu.Unlock()
		return rpctypes.ErrNoLeader
	}
	return nil
}

func (a *memClient) header() *etcdserverpb.ResponseHeader {
	return &etcdserverpb.ResponseHeader{ClusterId: a.cluster.id, MemberId: a.self, RaftTerm: a.cluster.term}
}

func (a *memClient) membersLocked() []*etcdserverpb.Member {
	members := make([]*etcdserverpb.Member, 0, len(a.cluster.members))
	for _, m := range a.cluster.members {
		members = append(members, &etcdserverpb.Member{
			ID: m.id, Name: m.name, PeerURLs: slices.Clone(m.peerURLs), ClientURLs: slices.Clone(m.clientURLs), IsLearner: m.learner,
		})
	}
	return members
}

// MemberList lists the members; a serializable list needs no leader.
func (a *memClient) MemberList(_ context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	op := clientv3.OpGet("", opts...)
	if err := a.serving(!op.IsSerializable(), false); err != nil {
		return nil, err
	}
	defer a.cluster.mu.Unlock()
	return &clientv3.MemberListResponse{Header: a.header(), Members: a.membersLocked()}, nil
}

// MemberAdd adds a voter, if the started voters would still make a quorum.
func (a *memClient) MemberAdd(_ context.Context, peerAddrs []string) (*clientv3.MemberAddResponse, error) {
	return a.add(peerAddrs, false)
}

// MemberAddAsLearner adds a learner; etcd allows one at a time.
func (a *memClient) MemberAddAsLearner(_ context.Context, peerAddrs []string) (*clientv3.MemberAddResponse, error) {
	return a.add(peerAddrs, true)
}

func (a *memClient) add(peerAddrs []string, learner bool) (*clientv3.MemberAddResponse, error) {
	if err := a.serving(true, false); err != nil {
		return nil, err
	}
	c := a.cluster
	defer c.mu.Unlock()
	if len(peerAddrs) == 0 {
		return nil, rpctypes.ErrMemberBadURLs
	}
	for _, u := range peerAddrs {
		if c.memberWithPeer(u) != nil {
			return nil, rpctypes.ErrPeerURLExist
		}
	}
	voters, started := c.countVoters(0)
	if learner && slices.ContainsFunc(c.members, func(m *memMember) bool { return m.learner }) {
		return nil, rpctypes.ErrTooManyLearners
	}
	// etcd's IsReadyToAddVotingMember, with its exception for a second member of one.
	if !learner && started < quorum(voters+1) && (started != 1 || voters != 1) {
		return nil, rpctypes.ErrMemberNotEnoughStarted
	}
	m := &memMember{id: c.light.newID(), peerURLs: slices.Clone(peerAddrs), learner: learner}
	c.members = append(c.members, m)
	c.index++
	added := &etcdserverpb.Member{ID: m.id, PeerURLs: slices.Clone(m.peerURLs), IsLearner: learner}
	return &clientv3.MemberAddResponse{Header: a.header(), Member: added, Members: a.membersLocked()}, nil
}

// MemberRemove removes a member, unless that leaves fewer started voters than a quorum.
func (a *memClient) MemberRemove(_ context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	if err := a.serving(true, false); err != nil {
		return nil, err
	}
	c := a.cluster
	defer c.mu.Unlock()
	m := c.member(id)
	if m == nil {
		return nil, rpctypes.ErrMemberNotFound
	}
	if !m.learner {
		voters, started := c.countVoters(id)
		if started < quorum(voters) {
			return nil, rpctypes.ErrMemberNotEnoughStarted
		}
		// etcd's mayRemoveMember: a member that is down is safe to remove, but removing one
		// that runs must leave a quorum of the remaining voters running.
		if stillRunning := c.runningVoters() - 1; m.running && stillRunning < quorum(voters) {
			return nil, rpctypes.ErrUnhealthy
		}
	}
	// The removed member answers nothing more (serving); its node sees it gone and stops
	// it, as an etcd process exits once it applied its own removal.
	c.members = slices.DeleteFunc(c.members, func(other *memMember) bool { return other == m })
	c.index++
	c.electLocked()
	if len(c.members) == 0 {
		c.light.forgetCluster(c)
	}
	return &clientv3.MemberRemoveResponse{Header: a.header(), Members: a.membersLocked()}, nil
}

// MemberUpdate changes a member's peer URLs.
func (a *memClient) MemberUpdate(_ context.Context, id uint64, peerAddrs []string) (*clientv3.MemberUpdateResponse, error) {
	if err := a.serving(true, false); err != nil {
		return nil, err
	}
	c := a.cluster
	defer c.mu.Unlock()
	m := c.member(id)
	if m == nil {
		return nil, rpctypes.ErrMemberNotFound
	}
	m.peerURLs = slices.Clone(peerAddrs)
	c.index++
	return &clientv3.MemberUpdateResponse{Header: a.header(), Members: a.membersLocked()}, nil
}

// MemberPromote makes a learner that runs (and so has caught up: there is no log to replay)
// a voter.
func (a *memClient) MemberPromote(_ context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	if err := a.serving(true, false); err != nil {
		return nil, err
	}
	c := a.cluster
	defer c.mu.Unlock()
	m := c.member(id)
	switch {
	case m == nil:
		return nil, rpctypes.ErrMemberNotFound
	case !m.learner:
		return nil, rpctypes.ErrMemberNotLearner
	case !m.running:
		return nil, rpctypes.ErrMemberLearnerNotReady
	}
	m.learner = false
	c.index++
	c.electLocked()
	return &clientv3.MemberPromoteResponse{Header: a.header(), Members: a.membersLocked()}, nil
}

// MoveLeader hands leadership to a running voter; only the leader can.
func (a *memClient) MoveLeader(_ context.Context, transfereeID uint64) (*clientv3.MoveLeaderResponse, error) {
	if err := a.serving(true, false); err != nil {
		return nil, err
	}
	c := a.cluster
	defer c.mu.Unlock()
	if c.leader != a.self {
		return nil, rpctypes.ErrNotLeader
	}
	t := c.member(transfereeID)
	if t == nil || t.learner || !t.running {
		return nil, rpctypes.ErrBadLeaderTransferee
	}
	c.leader = t.id
	c.term++
	return &clientv3.MoveLeaderResponse{Header: a.header()}, nil
}

// Status is the serving member's status.
func (a *memClient) Status(context.Context, string) (*clientv3.StatusResponse, error) {
	if err := a.serving(false, true); err != nil {
		return nil, err
	}
	c := a.cluster
	defer c.mu.Unlock()
	resp := &clientv3.StatusResponse{
		Header: a.header(), Version: etcdversion.Version, Leader: c.leader, RaftIndex: c.index, RaftTerm: c.term,
		RaftAppliedIndex: c.index, IsLearner: c.member(a.self).learner,
	}
	if c.leader == 0 {
		resp.Errors = append(resp.Errors, rpctypes.ErrNoLeader.Error())
	}
	return resp, nil
}

// AlarmList lists no alarms: there is no database to fill.
func (a *memClient) AlarmList(context.Context) (*clientv3.AlarmResponse, error) {
	if err := a.serving(false, false); err != nil {
		return nil, err
	}
	defer a.cluster.mu.Unlock()
	return &clientv3.AlarmResponse{Header: a.header()}, nil
}

// AlarmDisarm has nothing to disarm.
func (a *memClient) AlarmDisarm(ctx context.Context, _ *clientv3.AlarmMember) (*clientv3.AlarmResponse, error) {
	return a.AlarmList(ctx)
}

// Defragment has no database to compact.
func (a *memClient) Defragment(context.Context, string) (*clientv3.DefragmentResponse, error) {
	if err := a.serving(false, false); err != nil {
		return nil, err
	}
	defer a.cluster.mu.Unlock()
	return &clientv3.DefragmentResponse{Header: a.header()}, nil
}

// HashKV is refused: there are no keys.
func (a *memClient) HashKV(context.Context, string, int64) (*clientv3.HashKVResponse, error) {
	return nil, errNoMemoryData
}

// SnapshotWithVersion is refused: there is no database.
func (a *memClient) SnapshotWithVersion(context.Context) (*clientv3.SnapshotResponse, error) {
	return nil, errNoMemoryData
}

// Snapshot is refused: there is no database.
func (a *memClient) Snapshot(context.Context) (io.ReadCloser, error) { return nil, errNoMemoryData }

// Downgrade is refused: every member runs one version.
func (a *memClient) Downgrade(context.Context, clientv3.DowngradeAction, string) (*clientv3.DowngradeResponse, error) {
	return nil, rpctypes.ErrNotCapable
}

// newMemberID is a random non-zero etcd ID.
func newMemberID(r *rand.Rand) uint64 {
	for {
		if id := r.Uint64(); id != 0 {
			return id
		}
	}
}

// memoryEtcdStatus is EtcdStatus of a light node's member, with the answers the server
// library's member gives: Unavailable while it stops, FailedPrecondition once removed.
func memoryEtcdStatus(m *etcdMember) (*machine.EtcdStatusResponse, error) {
	c := m.memCluster
	c.mu.Lock()
	defer c.mu.Unlock()
	if !m.mem.running {
		return nil, status.Error(codes.Unavailable, "this etcd member is stopping")
	}
	self := c.member(m.mem.id)
	if self == nil {
		return nil, status.Error(codes.FailedPrecondition, "this etcd member was removed from the cluster")
	}
	st := &machine.EtcdMemberStatus{
		MemberId: self.id, ProtocolVersion: etcdversion.Version, StorageVersion: etcdversion.Cluster(etcdversion.Version) + ".0",
		Leader: c.leader, RaftIndex: c.index, RaftTerm: c.term, RaftAppliedIndex: c.index, IsLearner: self.learner,
	}
	if st.Leader == 0 {
		st.Errors = append(st.Errors, rpctypes.ErrNoLeader.Error())
	}
	return &machine.EtcdStatusResponse{Messages: []*machine.EtcdStatus{{MemberStatus: st}}}, nil
}
