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
	"testing"

	. "github.com/onsi/gomega"
)

func TestAgree(t *testing.T) {
	abc := []Member{{ID: 0xa, Name: "a"}, {ID: 0xb, Name: "b"}, {ID: 0xc, Name: "c"}}
	ab := abc[:2]
	// An ID that sorts before the others: only the recorded members can make abc the cluster's.
	own := []Member{{ID: 0x1, Name: "c"}}
	cases := []struct {
		name     string
		views    []View
		recorded map[uint64]bool
		agree    bool
		members  []Member
		foreign  []string
		problem  string
	}{
		{name: "no answer", views: nil, agree: false},
		{name: "all the same, in any order", views: []View{{"m1", abc}, {"m2", []Member{abc[2], abc[0], abc[1]}}}, agree: true, members: abc},
		{name: "a node with a list of its own cluster", views: []View{{"m1", abc}, {"m2", abc}, {"m3", own}}, members: abc, foreign: []string{"m3"},
			problem: "the node of Machine m3 reports a different etcd cluster (members c (0000000000000001)), not the cluster's (members a (000000000000000a), b (000000000000000b), c (000000000000000c))"},
		{name: "a node behind on a membership change", views: []View{{"m1", abc}, {"m2", abc}, {"m3", ab}}, members: abc,
			problem: "the node of Machine m3 reports members a (000000000000000a), b (000000000000000b), other nodes a (000000000000000a), b (000000000000000b), c (000000000000000c)"},
		{name: "one against one: the recorded members decide", views: []View{{"m1", own}, {"m2", abc}}, recorded: map[uint64]bool{0xa: true},
			members: abc, foreign: []string{"m1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := Agree(tc.views, tc.recorded)
			g.Expect(a.Agree).To(Equal(tc.agree))
			g.Expect(a.Members).To(Equal(tc.members))
			g.Expect(a.Foreign).To(Equal(tc.foreign))
			if tc.problem != "" {
				g.Expect(a.Problems).To(ContainElement(tc.problem))
			}
		})
	}
}
