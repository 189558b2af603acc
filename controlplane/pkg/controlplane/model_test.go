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
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func members(states ...string) []Member {
	out := make([]Member, 0, len(states))
	for i, s := range states {
		out = append(out, Member{ID: uint64(i + 1), Name: string(rune('a' + i)), Healthy: s != "down", Learner: s == "learner"})
	}
	return out
}

func TestCanRemoveMember(t *testing.T) {
	cases := []struct {
		name    string
		members []Member
		remove  uint64
		refused string
	}{
		{"3 healthy: any may go", members("up", "up", "up"), 1, ""},
		{"3 with one down: removing a healthy one would leave 1 of 2", members("up", "up", "down"), 1, "would leave 1 of 2 members healthy, fewer than the quorum of 2 (unhealthy: c)"},
		{"3 with one down: the down one may go", members("up", "up", "down"), 3, ""},
		{"5 with one down: a healthy one may go", members("up", "up", "up", "up", "down"), 1, ""},
		{"5 with two down: no healthy one may go", members("up", "up", "up", "down", "down"), 1, "would leave 2 of 4"},
		{"1 member: the last one never goes", members("up"), 1, "is the last voting member"},
		{"a learner never counts", members("up", "up", "learner"), 3, ""},
		{"2 voters and a learner: a voter may go", members("up", "up", "learner"), 1, ""},
		{"unknown member", members("up"), 42, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := ControlPlane{Members: tc.members}.CanRemoveMember(tc.remove)
			if tc.refused == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.refused)))
		})
	}
}

func TestCanAddMember(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ControlPlane{Members: members("up", "up", "up")}.CanAddMember()).To(Succeed())
	g.Expect(ControlPlane{Members: members("up", "learner")}.CanAddMember()).To(MatchError(ContainSubstring("b is still a learner")))
	g.Expect(ControlPlane{Members: members("up", "down")}.CanAddMember()).To(MatchError(ContainSubstring("b is not healthy")))
	g.Expect(ControlPlane{Members: members("up"), Machines: []Machine{{Name: "m", Deleting: true}}}.CanAddMember()).
		To(MatchError(ContainSubstring("machine m is being deleted")))
}

func TestNextFailureDomain(t *testing.T) {
	cases := []struct {
		name     string
		domains  []string
		machines []Machine
		want     string
	}{
		{"no failure domains", nil, []Machine{{Name: "a"}}, ""},
		{"empty: the first by name", []string{"z", "b"}, nil, "b"},
		{"fewest up-to-date machines", []string{"a", "b", "c"}, []Machine{
			{FailureDomain: "a", UpToDate: true}, {FailureDomain: "b", UpToDate: true}, {FailureDomain: "c"},
		}, "c"},
		{"tie on up-to-date: fewest machines", []string{"a", "b"}, []Machine{
			{FailureDomain: "a", UpToDate: true}, {FailureDomain: "a"}, {FailureDomain: "b", UpToDate: true},
		}, "b"},
		{"deleting machines do not count", []string{"a", "b"}, []Machine{
			{FailureDomain: "a", UpToDate: true, Deleting: true}, {FailureDomain: "b", UpToDate: true},
		}, "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(ControlPlane{FailureDomains: tc.domains, Machines: tc.machines}.NextFailureDomain()).To(Equal(tc.want))
		})
	}
}

func TestVictim(t *testing.T) {
	cases := []struct {
		name     string
		machines []Machine
		want     string
	}{
		{"delete annotation first", []Machine{
			{Name: "old-outdated", Created: t0}, {Name: "marked", Created: t0.Add(time.Hour), UpToDate: true, DeleteRequested: true},
		}, "marked"},
		{"then outdated", []Machine{
			{Name: "oldest", Created: t0, UpToDate: true}, {Name: "outdated", Created: t0.Add(time.Hour)},
		}, "outdated"},
		{"then one with an unhealthy etcd member", []Machine{
			{Name: "oldest", Created: t0, UpToDate: true}, {Name: "sick", Created: t0.Add(time.Hour), UpToDate: true, EtcdUnhealthy: true},
		}, "sick"},
		{"then the failure domain with the most machines", []Machine{
			{Name: "a1", FailureDomain: "a", Created: t0, UpToDate: true},
			{Name: "b1", FailureDomain: "b", Created: t0.Add(time.Hour), UpToDate: true},
			{Name: "b2", FailureDomain: "b", Created: t0.Add(2 * time.Hour), UpToDate: true},
		}, "b1"},
		{"then the oldest", []Machine{
			{Name: "new", Created: t0.Add(time.Hour), UpToDate: true}, {Name: "old", Created: t0, UpToDate: true},
		}, "old"},
		{"never one already deleting", []Machine{
			{Name: "deleting", Created: t0, Deleting: true, DeleteRequested: true}, {Name: "other", Created: t0.Add(time.Hour), UpToDate: true},
		}, "other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			victim, ok := ControlPlane{Machines: tc.machines}.Victim()
			g.Expect(ok).To(BeTrue())
			g.Expect(victim.Name).To(Equal(tc.want))
		})
	}
	_, ok := ControlPlane{Machines: []Machine{{Name: "x", Deleting: true}}}.Victim()
	NewWithT(t).Expect(ok).To(BeFalse())
}

func TestOrphanMembers(t *testing.T) {
	g := NewWithT(t)
	cp := ControlPlane{Members: members("up", "up", "up"), Machines: []Machine{{Name: "x", MemberID: 1}, {Name: "y", MemberID: 2}}}
	g.Expect(cp.OrphanMembers()).To(ConsistOf(HaveField("Name", "c")))
	cp.Members = append(cp.Members, Member{ID: 9, Learner: true})
	g.Expect(cp.OrphanMembers()).To(ConsistOf(HaveField("Name", "c")), "a learner not started yet has no name: StaleLearners decides on it")
	cp.Machines = append(cp.Machines, Machine{Name: "no-etcd", NoMember: true, NoMemberReported: true, Hostname: "no-etcd"})
	g.Expect(cp.OrphanMembers()).To(ConsistOf(HaveField("Name", "c")), "a Machine whose node runs no member owns none")
	// The node's answer and its peers' member list are read apart: a member that started in
	// between is listed under the node's hostname, and is the new Machine's, not an orphan.
	starting := Machine{Name: "starting", NoMember: true, NoMemberReported: true, Hostname: "c"}
	g.Expect(ControlPlane{Members: cp.Members, Machines: append(slices.Clone(cp.Machines), starting)}.OrphanMembers()).To(BeEmpty(),
		"a member under the hostname of a Machine whose node just said it runs none")
	starting.NoMemberReported = false
	g.Expect(ControlPlane{Members: cp.Members, Machines: append(slices.Clone(cp.Machines), starting)}.OrphanMembers()).To(ConsistOf(HaveField("Name", "c")),
		"a person's record that the Machine never joined stands")
	cp.Machines = append(cp.Machines, Machine{Name: "joining"})
	g.Expect(cp.OrphanMembers()).To(BeEmpty(), "no orphans while a Machine may own a member nobody can name")
}

func TestMembersAreFoundByIDNeverByName(t *testing.T) {
	g := NewWithT(t)
	// Every member has the same name: only the recorded IDs tell them apart.
	cp := ControlPlane{Members: []Member{{ID: 10, Name: "cp"}, {ID: 11, Name: "cp"}, {ID: 12, Name: "cp"}}}
	cp.Machines = []Machine{{Name: "cp-a", MemberID: 11}, {Name: "cp-b"}}
	member, ok := cp.MemberOf(cp.Machines[0])
	g.Expect(ok).To(BeTrue())
	g.Expect(member.ID).To(Equal(uint64(11)))
	_, ok = cp.MemberOf(cp.Machines[1])
	g.Expect(ok).To(BeFalse(), "no recorded ID: no member, whatever the names")
	g.Expect(cp.Unclaimed()).To(ConsistOf(HaveField("ID", uint64(10)), HaveField("ID", uint64(12))))
	g.Expect(cp.Unidentified()).To(ConsistOf(HaveField("Name", "cp-b")))
}

func TestStaleLearners(t *testing.T) {
	g := NewWithT(t)
	cp := ControlPlane{Members: []Member{{ID: 1, Name: "a"}, {ID: 2, Learner: true}, {ID: 3, Learner: true}, {ID: 4, Learner: true, Name: "started"}},
		Machines: []Machine{{Name: "a", MemberID: 1}, {Name: "joining", MemberID: 3}}}
	seen := map[uint64]time.Time{2: t0, 3: t0, 4: t0}
	g.Expect(cp.StaleLearners(seen, t0)).To(BeEmpty(), "not yet due")
	g.Expect(cp.StaleLearners(seen, t0.Add(time.Minute))).To(ConsistOf(HaveField("ID", uint64(2))),
		"only unclaimed, unstarted learners: 3 belongs to a Machine, 4 has started")
}
