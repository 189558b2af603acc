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
	"context"
	"errors"
	"fmt"
	"slices"

	etcdresource "github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
)

// ownedMachineConditions are the conditions the control plane writes on its Machines.
var ownedMachineConditions = []string{
	clusterv1.MachineUpToDateCondition, clusterv1.MachineOwnerRemediatedCondition,
	controlplanev1.MachineAPIServerPodHealthyCondition, controlplanev1.MachineControllerManagerPodHealthyCondition,
	controlplanev1.MachineSchedulerPodHealthyCondition, controlplanev1.MachineEtcdMemberHealthyCondition,
}

// podConditions name the Machine condition of each static pod.
var podConditions = map[string]string{
	"kube-apiserver":          controlplanev1.MachineAPIServerPodHealthyCondition,
	"kube-controller-manager": controlplanev1.MachineControllerManagerPodHealthyCondition,
	"kube-scheduler":          controlplanev1.MachineSchedulerPodHealthyCondition,
}

// patchMachineConditions writes what this reconcile saw of each Machine onto it: UpToDate,
// the health of its static pods and of its etcd member, and OwnerRemediated.
func (r *Reconciler) patchMachineConditions(ctx context.Context, s *scope) error {
	var errs []error
	for _, m := range s.machines {
		// Compared with the Machine as observed: remediation set OwnerRemediated meanwhile.
		before, ok := s.observed[m.Name]
		if !ok {
			before = m.DeepCopy()
		}
		setMachineConditions(s, m)
		helper, err := patch.NewHelper(before, r.Client)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := helper.Patch(ctx, m, patch.WithOwnedConditions{Conditions: ownedMachineConditions}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("failed to patch the conditions of Machine %s: %w", m.Name, err))
		}
	}
	return errors.Join(errs...)
}

// setMachineConditions sets the conditions the control plane owns on m.
func setMachineConditions(s *scope, m *clusterv1.Machine) {
	if why := s.upToDate(m); why != "" {
		if rec, ok, _ := recordOf(m); ok {
			why += fmt.Sprintf("; updating in place to %s, step %s", rec.Version, rec.Step)
		}
		conditions.Set(m, metav1.Condition{Type: clusterv1.MachineUpToDateCondition, Status: metav1.ConditionFalse,
			Reason: clusterv1.MachineNotUpToDateReason, Message: "* " + why})
	} else {
		conditions.Set(m, metav1.Condition{Type: clusterv1.MachineUpToDateCondition, Status: metav1.ConditionTrue, Reason: clusterv1.MachineUpToDateReason})
	}
	// A Machine the health check passes again needs no remediation any more.
	if conditions.IsTrue(m, clusterv1.MachineHealthCheckSucceededCondition) && conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition) {
		conditions.Delete(m, clusterv1.MachineOwnerRemediatedCondition)
	}

	components, seen := s.components[m.Name]
	for component, conditionType := range podConditions {
		c := metav1.Condition{Type: conditionType, Status: metav1.ConditionUnknown, Reason: controlplanev1.PodInspectionFailedReason}
		switch {
		case !s.initialized():
			c.Message = "Waiting for the control plane to be initialized"
		case s.componentsErr != nil:
			c.Message = s.componentsErr.Error()
		case !seen || !components.registered:
			c.Message = "Waiting for the Machine's Node to register"
		default:
			switch pod := components.pods[component]; {
			case !pod.exists:
				c.Status, c.Reason, c.Message = metav1.ConditionFalse, controlplanev1.PodDoesNotExistReason,
					fmt.Sprintf("Node %s has no mirror Pod %s-%s", components.node, component, components.node)
			case !pod.ready:
				c.Status, c.Reason, c.Message = metav1.ConditionFalse, controlplanev1.PodNotReadyReason,
					fmt.Sprintf("Pod %s-%s is not Ready", component, components.node)
			default:
				c.Status, c.Reason, c.Message = metav1.ConditionTrue, controlplanev1.PodRunningReason, ""
			}
		}
		conditions.Set(m, c)
	}
	conditions.Set(m, etcdMemberCondition(s, m))
}

// etcdMemberCondition is EtcdMemberHealthy for m: its member, by the recorded ID, is a
// healthy voter of the cluster's etcd.
func etcdMemberCondition(s *scope, m *clusterv1.Machine) metav1.Condition {
	c := metav1.Condition{Type: controlplanev1.MachineEtcdMemberHealthyCondition, Status: metav1.ConditionFalse, Reason: controlplanev1.EtcdMemberUnhealthyReason}
	id := recordedMemberID(m)
	member, isMember := s.memberOf(m)
	report := s.nodes[m.Name]
	switch {
	case s.etcd == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, controlplanev1.EtcdMemberInspectionFailedReason, "No control-plane node answers with the etcd member list"
	case slices.Contains(s.etcd.agreement.Foreign, m.Name):
		c.Message = fmt.Sprintf("The node of Machine %s runs a different etcd cluster than the other control-plane nodes", m.Name)
	case id == 0:
		c.Message = "The node has not joined etcd yet (no member ID recorded)"
	case !isMember:
		c.Message = fmt.Sprintf("Member %s is not in etcd's member list", etcdresource.FormatMemberID(id))
	case member.Learner:
		c.Message = fmt.Sprintf("Member %s is a learner, not promoted yet", controlplane.DescribeMember(controlplane.Member{ID: id, Name: member.Name}))
	case !s.etcd.healthy[id]:
		c.Message = fmt.Sprintf("Member %s is not healthy", controlplane.DescribeMember(controlplane.Member{ID: id, Name: member.Name}))
		if report != nil && report.problem != "" {
			c.Message += ": " + report.problem
		}
	default:
		c.Status, c.Reason = metav1.ConditionTrue, controlplanev1.EtcdMemberHealthyReason
	}
	return c
}
