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
	"fmt"
	"maps"
	"slices"
	"strings"

	etcdresource "github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
)

// ownedConditions are the conditions this controller writes.
var ownedConditions = []string{
	controlplanev1.AvailableCondition, controlplanev1.InitializedCondition, controlplanev1.EtcdClusterHealthyCondition,
	controlplanev1.ControlPlaneComponentsHealthyCondition,
	controlplanev1.MachinesReadyCondition, controlplanev1.MachinesUpToDateCondition, controlplanev1.RollingOutCondition,
	controlplanev1.ScalingUpCondition, controlplanev1.ScalingDownCondition, controlplanev1.DeletingCondition,
}

// Reasons of the conditions.
const (
	reasonTrue     = "AsExpected"
	reasonWaiting  = "Waiting"
	reasonUnknown  = "Unknown"
	reasonProblems = "Problems"
	reasonBlocked  = "Blocked"
	reasonNo       = "NotNeeded"
)

// set writes a condition: True with reasonTrue, or False with falseReason. The message is
// kept in both cases: ScalingUp is True with what the scaling waits for.
func set(tcp *controlplanev1.TalosControlPlane, conditionType string, ok bool, falseReason, message string) {
	status, reason := metav1.ConditionFalse, falseReason
	if ok {
		status, reason = metav1.ConditionTrue, reasonTrue
	}
	conditions.Set(tcp, metav1.Condition{Type: conditionType, Status: status, Reason: reason, Message: message})
}

// updateStatus writes what the reconcile saw and did into the status of the contract.
func updateStatus(s *scope) {
	tcp := s.tcp
	tcp.Status.ObservedGeneration = tcp.Generation
	tcp.Status.Selector = labels.SelectorFromSet(selectorLabels(s.cluster, tcp)).String()
	ready, available, upToDate := int32(0), int32(0), int32(0)
	perVersion := map[string]int32{}
	var notReady []string
	for _, m := range s.machines {
		if conditions.IsTrue(m, clusterv1.MachineReadyCondition) {
			ready++
		} else {
			notReady = append(notReady, m.Name)
		}
		if conditions.IsTrue(m, clusterv1.MachineAvailableCondition) {
			available++
		}
		if m.DeletionTimestamp.IsZero() && s.upToDate(m) == "" {
			upToDate++
		}
		perVersion[m.Spec.Version]++
	}
	tcp.Status.Replicas = ptr.To(int32(len(s.machines)))
	tcp.Status.ReadyReplicas, tcp.Status.AvailableReplicas, tcp.Status.UpToDateReplicas = ptr.To(ready), ptr.To(available), ptr.To(upToDate)
	tcp.Status.Versions = nil
	for _, v := range slices.SortedFunc(maps.Keys(perVersion), compareVersions) {
		tcp.Status.Versions = append(tcp.Status.Versions, clusterv1.StatusVersion{Version: v, Replicas: perVersion[v]})
	}

	initialized := ptr.Deref(tcp.Status.Initialization.ControlPlaneInitialized, false)
	if initialized {
		set(tcp, controlplanev1.InitializedCondition, true, "", "")
	} else {
		set(tcp, controlplanev1.InitializedCondition, false, reasonWaiting, orDefault(s.waiting, "Waiting for the first control-plane Machine"))
	}

	etcdHealthy, etcdMessage := s.etcdHealth()
	if s.etcd == nil {
		conditions.Set(tcp, metav1.Condition{Type: controlplanev1.EtcdClusterHealthyCondition, Status: metav1.ConditionUnknown,
			Reason: reasonUnknown, Message: "No control-plane node answers with the etcd member list"})
	} else {
		set(tcp, controlplanev1.EtcdClusterHealthyCondition, etcdHealthy, reasonProblems, etcdMessage)
	}
	switch {
	case !initialized || s.componentsErr != nil:
		conditions.Set(tcp, metav1.Condition{Type: controlplanev1.ControlPlaneComponentsHealthyCondition, Status: metav1.ConditionUnknown,
			Reason: reasonUnknown, Message: orDefault(errorMessage(s.componentsErr), "The control plane is not initialized yet")})
	default:
		problems := s.componentProblems()
		set(tcp, controlplanev1.ControlPlaneComponentsHealthyCondition, len(problems) == 0, reasonProblems, strings.Join(problems, "; "))
	}
	availableOK := initialized && s.etcd != nil && s.hasQuorum()
	availableMessage := ""
	if !availableOK {
		availableMessage = orDefault(s.waiting, "etcd has no healthy quorum")
	}
	set(tcp, controlplanev1.AvailableCondition, availableOK, reasonWaiting, availableMessage)

	set(tcp, controlplanev1.MachinesReadyCondition, len(notReady) == 0, reasonWaiting, listMessage("Machines not Ready: ", notReady))
	outdatedMachines := s.outdated()
	outdated := make([]string, 0, len(outdatedMachines))
	for _, m := range outdatedMachines {
		outdated = append(outdated, fmt.Sprintf("%s (%s)", m.Name, s.upToDate(m)))
	}
	set(tcp, controlplanev1.MachinesUpToDateCondition, len(outdated) == 0, reasonWaiting, listMessage("Machines to replace: ", outdated))
	rolling := len(outdated) > 0 && tcp.Spec.Rollout.Strategy.Type != controlplanev1.OnDeleteStrategyType
	message := ""
	if len(outdated) > 0 && !rolling {
		message = "OnDelete: delete the outdated Machines to replace them"
	}
	if rolling {
		message = fmt.Sprintf("Rolling out %d Machines. %s", len(outdated), s.blocked)
		if updates := len(s.toUpdate()); updates > 0 {
			// What the node under update waits for, unless something blocks the rollout.
			message = fmt.Sprintf("Rolling out %d Machines, %d of them in place. %s", len(outdated), updates, orDefault(s.blocked, s.waiting))
		}
	}
	set(tcp, controlplanev1.RollingOutCondition, rolling, reasonNo, strings.TrimSpace(message))

	desired, current := ptr.Deref(tcp.Spec.Replicas, 1), int32(len(s.active()))
	scaling := func(conditionType, direction string, active bool) {
		message := ""
		if active {
			message = strings.TrimSpace(fmt.Sprintf("Scaling %s from %d to %d replicas. %s", direction, current, desired, s.blocked))
		}
		set(tcp, conditionType, active, reasonNo, message)
	}
	scaling(controlplanev1.ScalingUpCondition, "up", current < desired)
	scaling(controlplanev1.ScalingDownCondition, "down", current > desired)
	scalingUp, scalingDown := current < desired, current > desired
	deleting := !tcp.DeletionTimestamp.IsZero()
	deletingMessage := ""
	if deleting {
		deletingMessage = fmt.Sprintf("Deleting %d Machines", len(s.machines))
	}
	set(tcp, controlplanev1.DeletingCondition, deleting, reasonNo, deletingMessage)
	if s.blocked != "" && !rolling && !scalingUp && !scalingDown {
		// An orphan member that cannot go: say it where a person looks first.
		set(tcp, controlplanev1.EtcdClusterHealthyCondition, false, reasonBlocked, s.blocked)
	}
}

// etcdHealth says whether every member is a healthy voter that belongs to a Machine and
// every node reports the same member list, and what is wrong otherwise.
func (s *scope) etcdHealth() (bool, string) {
	if s.etcd == nil {
		return false, ""
	}
	var problems []string
	model := s.model()
	for _, m := range model.Members {
		switch {
		case m.Learner:
			problems = append(problems, fmt.Sprintf("etcd member %s is a learner", controlplane.DescribeMember(m)))
		case !m.Healthy:
			problems = append(problems, fmt.Sprintf("etcd member %s is not healthy", controlplane.DescribeMember(m)))
		}
	}
	if len(model.Unidentified()) == 0 {
		for _, m := range model.Unclaimed() {
			problems = append(problems, fmt.Sprintf("etcd member %s belongs to no Machine", controlplane.DescribeMember(m)))
		}
	}
	for _, m := range s.active() {
		if id := recordedMemberID(m); id != 0 && !s.isMemberID(id) {
			problems = append(problems, fmt.Sprintf("Machine %s is not an etcd member: its member %s is not in etcd's member list", m.Name, etcdresource.FormatMemberID(id)))
		}
	}
	problems = append(problems, s.etcd.problems...)
	slices.Sort(problems)
	// Disagreement first: it blocks every membership change.
	problems = append(slices.Clone(s.etcd.agreement.Problems), slices.Compact(problems)...)
	return len(problems) == 0, strings.Join(problems, "; ")
}

// isMemberID reports whether id is in etcd's member list.
func (s *scope) isMemberID(id uint64) bool {
	return s.etcd != nil && slices.ContainsFunc(s.etcd.members, func(m talosclient.Member) bool { return m.ID == id })
}

// hasQuorum reports whether the healthy voters are a quorum.
func (s *scope) hasQuorum() bool {
	voters, healthy := 0, 0
	for _, m := range s.etcd.members {
		if !m.Learner {
			voters++
			if s.etcd.healthy[m.ID] {
				healthy++
			}
		}
	}
	return voters > 0 && healthy > voters/2
}

func compareVersions(a, b string) int {
	va, errA := version.ParseSemantic(a)
	vb, errB := version.ParseSemantic(b)
	switch {
	case errA != nil || errB != nil:
		return strings.Compare(a, b)
	case va.LessThan(vb):
		return -1
	case vb.LessThan(va):
		return 1
	}
	return 0
}

func listMessage(prefix string, items []string) string {
	if len(items) == 0 {
		return ""
	}
	return prefix + strings.Join(items, ", ")
}

func orDefault(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

func errorMessage(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
