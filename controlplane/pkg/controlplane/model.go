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

package controlplane

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Member is an etcd member of the control plane, as the Talos API lists it.
type Member struct {
	// ID is the member's etcd ID.
	ID uint64
	// Name is the member's name: the hostname of its node.
	Name string
	// Learner is true until the member has been promoted to a voting member.
	Learner bool
	// Healthy is true when the member answered its status call without errors or alarms.
	Healthy bool
}

// Machine is what the model knows of one control-plane Machine.
type Machine struct {
	// Name is the Machine's name.
	Name string
	// MemberID is the ID of the etcd member of the Machine's node: recorded on the Machine
	// once the node reported it, or reported by the node now; 0 when not known.
	MemberID uint64
	// NoMember is true when the Machine has no etcd member: a person recorded that it never
	// joined, or its node answers that it runs none and no member ID was ever recorded for it.
	NoMember bool
	// NoMemberReported is true when NoMember rests on the node's answer alone. That answer
	// and the member list are read apart: a member may have started on the node in between,
	// already listed by its peers under the node's hostname.
	NoMemberReported bool
	// Hostname is the hostname of the Machine's node, the name its member starts under.
	// Names can repeat, so it never claims a member: it only holds a removal back.
	Hostname string
	// Created is when the Machine was created.
	Created time.Time
	// FailureDomain is the Machine's failure domain, empty without one.
	FailureDomain string
	// Deleting is true once the Machine has a deletion timestamp.
	Deleting bool
	// DeleteRequested is true when the Machine carries Cluster API's delete-machine annotation.
	DeleteRequested bool
	// UpToDate is false when the Machine must be replaced (version, config, template, rollout.after).
	UpToDate bool
	// EtcdUnhealthy is true when the Machine's etcd member does not answer or reports errors.
	EtcdUnhealthy bool
}

// ControlPlane is the control plane the decisions are made on.
type ControlPlane struct {
	// Machines are the control-plane Machines, deleting ones included.
	Machines []Machine
	// Members are the etcd members, as reported by a healthy member; nil when unknown.
	Members []Member
	// FailureDomains are the control-plane failure domains of the Cluster, possibly none.
	FailureDomains []string
}

// quorum is how many voting members must be healthy for a cluster of n voters to accept writes.
func quorum(voters int) int { return voters/2 + 1 }

// voters are the voting members.
func (cp ControlPlane) voters() []Member {
	return slices.DeleteFunc(slices.Clone(cp.Members), func(m Member) bool { return m.Learner })
}

// MemberOf returns the etcd member of m's node, found by the member ID recorded for it.
func (cp ControlPlane) MemberOf(m Machine) (Member, bool) {
	if m.MemberID == 0 {
		return Member{}, false
	}
	i := slices.IndexFunc(cp.Members, func(member Member) bool { return member.ID == m.MemberID })
	if i < 0 {
		return Member{}, false
	}
	return cp.Members[i], true
}

// Unclaimed are the etcd members whose ID is recorded for no Machine.
func (cp ControlPlane) Unclaimed() []Member {
	var out []Member
	for _, member := range cp.Members {
		if !slices.ContainsFunc(cp.Machines, func(m Machine) bool { return m.MemberID == member.ID }) {
			out = append(out, member)
		}
	}
	return out
}

// Unidentified are the Machines that may have an etcd member nobody can name: their node has
// not said that it runs none (or said so while an unclaimed member under its hostname was
// listed), and no member ID is known for them or the one recorded is not in the list (the
// node may have rejoined with a new member).
func (cp ControlPlane) Unidentified() []Machine {
	unclaimed := cp.Unclaimed()
	return slices.DeleteFunc(slices.Clone(cp.Machines), func(m Machine) bool {
		if m.NoMember {
			return !m.NoMemberReported || !slices.ContainsFunc(unclaimed, func(u Member) bool { return u.Name != "" && u.Name == m.Hostname })
		}
		_, isMember := cp.MemberOf(m)
		return isMember
	})
}

// CanRemoveMember says whether removing member id keeps etcd able to accept writes: the
// healthy voters left must still be a quorum of the voters left. The error says why not, in
// words a person can act on.
func (cp ControlPlane) CanRemoveMember(id uint64) error {
	voters := cp.voters()
	i := slices.IndexFunc(voters, func(m Member) bool { return m.ID == id })
	if i < 0 {
		// A learner or an unknown member: removing it changes no quorum.
		return nil
	}
	left := slices.Delete(slices.Clone(voters), i, i+1)
	if len(left) == 0 {
		return fmt.Errorf("etcd member %s is the last voting member: removing it would end the cluster", voters[i].Name)
	}
	healthy, unhealthy := 0, []string{}
	for _, m := range left {
		if m.Healthy {
			healthy++
		} else {
			unhealthy = append(unhealthy, m.Name)
		}
	}
	if need := quorum(len(left)); healthy < need {
		return fmt.Errorf("removing etcd member %s would leave %d of %d members healthy, fewer than the quorum of %d (unhealthy: %s)",
			voters[i].Name, healthy, len(left), need, strings.Join(unhealthy, ", "))
	}
	return nil
}

// CanAddMember says whether a new member may join: every member is a healthy voter, so that
// the new learner can catch up and be promoted without risking quorum.
func (cp ControlPlane) CanAddMember() error {
	for _, m := range cp.Members {
		if m.Learner {
			return fmt.Errorf("etcd member %s is still a learner: waiting for it to be promoted", m.Name)
		}
		if !m.Healthy {
			return fmt.Errorf("etcd member %s is not healthy", m.Name)
		}
	}
	for _, m := range cp.Machines {
		if m.Deleting {
			return fmt.Errorf("machine %s is being deleted", m.Name)
		}
	}
	return nil
}

// NextFailureDomain is where the next Machine goes: the failure domain with the fewest
// up-to-date Machines, then the fewest Machines, then the first by name. Empty without
// failure domains.
func (cp ControlPlane) NextFailureDomain() string {
	if len(cp.FailureDomains) == 0 {
		return ""
	}
	domains := slices.Sorted(slices.Values(cp.FailureDomains))
	count := func(fd string, upToDateOnly bool) int {
		n := 0
		for _, m := range cp.Machines {
			if m.FailureDomain == fd && !m.Deleting && (!upToDateOnly || m.UpToDate) {
				n++
			}
		}
		return n
	}
	return slices.MinFunc(domains, func(a, b string) int {
		return cmp.Or(cmp.Compare(count(a, true), count(b, true)), cmp.Compare(count(a, false), count(b, false)), cmp.Compare(a, b))
	})
}

// Victim is the Machine to remove next when scaling down or rolling out, chosen like
// Cluster API's KubeadmControlPlane: a Machine marked for deletion, then an outdated one,
// then one whose etcd member is unhealthy (removing it costs no quorum, so one bad member
// never blocks the change that replaces it), then one in the failure domain with the most
// Machines, then the oldest. A Machine already being deleted is never chosen; ok is false
// when there is nothing to choose.
func (cp ControlPlane) Victim() (Machine, bool) {
	candidates := slices.DeleteFunc(slices.Clone(cp.Machines), func(m Machine) bool { return m.Deleting })
	if len(candidates) == 0 {
		return Machine{}, false
	}
	perDomain := map[string]int{}
	for _, m := range candidates {
		perDomain[m.FailureDomain]++
	}
	return slices.MinFunc(candidates, func(a, b Machine) int {
		return cmp.Or(
			-compareBool(a.DeleteRequested, b.DeleteRequested),
			compareBool(a.UpToDate, b.UpToDate),
			-compareBool(a.EtcdUnhealthy, b.EtcdUnhealthy),
			-cmp.Compare(perDomain[a.FailureDomain], perDomain[b.FailureDomain]),
			a.Created.Compare(b.Created),
			cmp.Compare(a.Name, b.Name),
		)
	}), true
}

// OrphanMembers are started etcd members that belong to no Machine: left behind by a
// Machine that went before its member was removed. Only once every Machine is identified
// (its member ID known, or its node running no member while no unclaimed member carries its
// hostname) can a member be called an orphan: an unidentified Machine may own it. Learners that never started have no name and are left to
// StaleLearners.
func (cp ControlPlane) OrphanMembers() []Member {
	if len(cp.Unidentified()) > 0 {
		return nil
	}
	return slices.DeleteFunc(cp.Unclaimed(), func(m Member) bool { return m.Name == "" })
}

// StaleLearners are the unclaimed learners that have not started (they have no name) and
// were first seen before deadline: a node that was added to etcd and never started its
// member. They count for no quorum, but block every later scale-up.
func (cp ControlPlane) StaleLearners(firstSeen map[uint64]time.Time, deadline time.Time) []Member {
	var out []Member
	for _, m := range cp.Unclaimed() {
		if seen, ok := firstSeen[m.ID]; ok && m.Learner && m.Name == "" && seen.Before(deadline) {
			out = append(out, m)
		}
	}
	return out
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}
