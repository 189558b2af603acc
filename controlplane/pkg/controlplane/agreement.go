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

	etcdresource "github.com/siderolabs/talos/pkg/machinery/resources/etcd"
)

// View is the etcd member list one control-plane node reports.
type View struct {
	// Machine is the name of the node's Machine.
	Machine string
	// Members are the members the node lists.
	Members []Member
}

// Agreement is what the nodes that answered say of etcd, taken together.
type Agreement struct {
	// Members is the member list most nodes report (ties go to the list that holds the most
	// recorded member IDs); nil when no node answered.
	Members []Member
	// Agree is true when every node that answered reports the same member IDs.
	Agree bool
	// Foreign are the Machines whose node reports a member list that shares no member with
	// Members: a second etcd cluster.
	Foreign []string
	// Problems say, per disagreeing node, what it reports, in words for a condition.
	Problems []string
}

// Agree compares the member lists the nodes report. recorded are the member IDs recorded on
// the Machines: where two lists are reported by as many nodes, the one that holds more of
// them is the cluster's.
func Agree(views []View, recorded map[uint64]bool) Agreement {
	if len(views) == 0 {
		return Agreement{}
	}
	type group struct {
		key      string
		members  []Member
		machines []string
		recorded int
	}
	groups := map[string]*group{}
	for _, v := range views {
		key := idKey(v.Members)
		g, ok := groups[key]
		if !ok {
			g = &group{key: key, members: v.Members}
			for _, m := range v.Members {
				if recorded[m.ID] {
					g.recorded++
				}
			}
			groups[key] = g
		}
		g.machines = append(g.machines, v.Machine)
	}
	ordered := make([]*group, 0, len(groups))
	for _, g := range groups {
		ordered = append(ordered, g)
	}
	slices.SortFunc(ordered, func(a, b *group) int {
		return cmp.Or(-cmp.Compare(len(a.machines), len(b.machines)), -cmp.Compare(a.recorded, b.recorded), cmp.Compare(a.key, b.key))
	})
	ref := ordered[0]
	out := Agreement{Members: ref.members, Agree: len(ordered) == 1}
	for _, g := range ordered[1:] {
		slices.Sort(g.machines)
		shared := slices.ContainsFunc(g.members, func(m Member) bool {
			return slices.ContainsFunc(ref.members, func(r Member) bool { return r.ID == m.ID })
		})
		for _, machine := range g.machines {
			if !shared {
				out.Foreign = append(out.Foreign, machine)
				out.Problems = append(out.Problems, fmt.Sprintf("the node of Machine %s reports a different etcd cluster (members %s), not the cluster's (members %s)",
					machine, describeMembers(g.members), describeMembers(ref.members)))
				continue
			}
			out.Problems = append(out.Problems, fmt.Sprintf("the node of Machine %s reports members %s, other nodes %s",
				machine, describeMembers(g.members), describeMembers(ref.members)))
		}
	}
	return out
}

// idKey identifies a member list by its sorted member IDs.
func idKey(members []Member) string {
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ids = append(ids, fmt.Sprintf("%016x", m.ID))
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// describeMembers lists members as name (id), sorted by ID.
func describeMembers(members []Member) string {
	sorted := slices.SortedFunc(slices.Values(members), func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	parts := make([]string, 0, len(sorted))
	for _, m := range sorted {
		parts = append(parts, DescribeMember(m))
	}
	return strings.Join(parts, ", ")
}

// DescribeMember names a member for a person: its name and ID as talosctl prints it, e.g.
// demo-x7k2p (8e9e05c52164694d); a learner that has not started has no name yet.
func DescribeMember(m Member) string {
	name := m.Name
	if name == "" {
		name = "unstarted learner"
	}
	return fmt.Sprintf("%s (%s)", name, etcdresource.FormatMemberID(m.ID))
}
