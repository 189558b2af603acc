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

package taloscontrolplane

import (
	"testing"

	. "github.com/onsi/gomega"
	etcdresource "github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
)

// TestMemberStartedAfterItsNodeSaidNone: a joining node answered that it runs no etcd
// member (its own status call failed) while its peers already listed the member it started,
// under its hostname. That member is the new Machine's: never an orphan to remove, and the
// one to remove with the Machine if it goes. Seen once under load in
// TestManagerSurvivesSIGKILL, where the orphan sweep removed the member of a Machine that
// had just joined.
func TestMemberStartedAfterItsNodeSaidNone(t *testing.T) {
	g := NewWithT(t)
	machine := func(name, memberID, infra string) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
		if memberID != "" {
			m.Annotations[controlplanev1.EtcdMemberIDAnnotation] = memberID
		}
		m.Spec.Bootstrap.ConfigRef.Name = name
		m.Spec.InfrastructureRef.Name = infra
		return m
	}
	newScope := func(machines ...*clusterv1.Machine) *scope {
		return &scope{
			cluster: &clusterv1.Cluster{}, tcp: &controlplanev1.TalosControlPlane{}, machines: machines,
			configs: map[string]*bootstrapv1.TalosConfig{},
			nodes:   map[string]*nodeReport{"cp-new": {noEtcd: true, problem: "connection refused"}},
			etcd: &etcdState{
				members: []talosclient.Member{{ID: 1, Name: "cp-a"}, {ID: 2, Name: "cp-b"}, {ID: 3, Name: "cp-new"}},
				healthy: map[uint64]bool{1: true, 2: true, 3: true},
			},
		}
	}
	s := newScope(machine("cp-a", etcdresource.FormatMemberID(1), "a"), machine("cp-b", etcdresource.FormatMemberID(2), "b"), machine("cp-new", "", "new"))
	g.Expect(s.model().OrphanMembers()).To(BeEmpty(), "the member listed under cp-new's hostname is not an orphan")
	member, has, ok, why := s.memberToRemove(s.machines[2])
	g.Expect(ok).To(BeTrue(), why)
	g.Expect(has).To(BeTrue(), "the Machine has a member")
	g.Expect(member.ID).To(Equal(uint64(3)))

	t.Log("Two Machines whose nodes share a hostname: which one's the member is cannot be known")
	s = newScope(machine("cp-a", etcdresource.FormatMemberID(1), "a"), machine("cp-b", etcdresource.FormatMemberID(2), "b"), machine("cp-new", "", "new"), machine("cp-other", "", "new"))
	for _, name := range []string{"cp-new", "cp-other"} {
		s.configs[name] = &bootstrapv1.TalosConfig{Spec: bootstrapv1.TalosConfigSpec{Hostname: bootstrapv1.HostnameSpec{Source: bootstrapv1.HostnameSourceInfrastructureName}}}
	}
	s.etcd.members[2].Name = "new"
	_, _, ok, why = s.memberToRemove(s.machines[2])
	g.Expect(ok).To(BeFalse())
	g.Expect(why).To(ContainSubstring("carries the hostname of both Machine cp-new and Machine cp-other"))
}
