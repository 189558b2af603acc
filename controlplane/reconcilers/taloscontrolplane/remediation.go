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
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
	"github.com/talon-capi/talon/internal/record"
)

// reconcileRemediation replaces, one at a time, the Machines that a MachineHealthCheck
// marked for their owner to remediate (HealthCheckSucceeded and OwnerRemediated false),
// with KubeadmControlPlane's semantics: it deletes the Machine once that is safe for etcd,
// and the scale-up that follows creates its replacement. Why a Machine is not remediated yet
// is written to its OwnerRemediated condition. A non-zero result ends the reconcile.
func (r *Reconciler) reconcileRemediation(ctx context.Context, s *scope) (ctrl.Result, error) {
	if record, ok, err := r.remediationInProgress(ctx, s); err != nil || ok {
		if err != nil || s.machineByName(record.Machine) == nil || !s.machineByName(record.Machine).DeletionTimestamp.IsZero() {
			return ctrl.Result{}, err
		}
		// Recorded, and the Machine not deleted: a manager stopped between the two. Finish it.
		return r.remediate(ctx, s, s.machineByName(record.Machine), record)
	}
	var candidates []controlplane.Candidate
	for _, m := range s.machines {
		if !conditions.IsFalse(m, clusterv1.MachineHealthCheckSucceededCondition) || !conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition) {
			continue
		}
		_, requested := m.Annotations[clusterv1.RemediateMachineAnnotation]
		candidates = append(candidates, controlplane.Candidate{
			Name: m.Name, Requested: requested, HasNode: m.Status.NodeRef.IsDefined(), Created: m.CreationTimestamp.Time,
			Healthy: [4]bool{
				conditions.IsTrue(m, controlplanev1.MachineEtcdMemberHealthyCondition),
				conditions.IsTrue(m, controlplanev1.MachineAPIServerPodHealthyCondition),
				conditions.IsTrue(m, controlplanev1.MachineControllerManagerPodHealthyCondition),
				conditions.IsTrue(m, controlplanev1.MachineSchedulerPodHealthyCondition),
			},
		})
	}
	picked, ok := controlplane.PickForRemediation(candidates)
	if !ok {
		return ctrl.Result{}, nil
	}
	m := s.machineByName(picked.Name)
	if !m.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var previous *controlplane.Remediation
	if value, ok := m.Annotations[controlplanev1.RemediationForAnnotation]; ok {
		record, err := controlplane.ParseRemediation(value)
		if err != nil {
			return ctrl.Result{}, err
		}
		previous = &record
	}
	next, deferred, refused := retryPolicy(s.tcp).NextRemediation(m.Name, previous, time.Now())
	switch {
	case refused != "":
		return r.deferRemediation(s, m, controlplanev1.CannotBeRemediatedReason, refused)
	case deferred != "":
		return r.deferRemediation(s, m, controlplanev1.RemediationDeferredReason, deferred)
	}
	return r.remediate(ctx, s, m, next)
}

// remediationInProgress reads the record of a remediation whose replacement is not created
// yet (ok). It clears a record that is done: its replacement exists, or its Machine is gone
// and the control plane needs no replacement.
func (r *Reconciler) remediationInProgress(ctx context.Context, s *scope) (controlplane.Remediation, bool, error) {
	value, ok := s.tcp.Annotations[controlplanev1.RemediationInProgressAnnotation]
	if !ok {
		return controlplane.Remediation{}, false, nil
	}
	record, err := controlplane.ParseRemediation(value)
	if err != nil {
		return controlplane.Remediation{}, false, err
	}
	// Creation times have whole seconds: a replacement made in the same second counts.
	replaced := slices.ContainsFunc(s.machines, func(m *clusterv1.Machine) bool {
		return m.Name != record.Machine && !m.CreationTimestamp.Time.Before(record.Timestamp.Truncate(time.Second))
	})
	gone := s.machineByName(record.Machine) == nil
	if replaced || (gone && len(s.active()) >= int(ptr.Deref(s.tcp.Spec.Replicas, 1))) {
		return controlplane.Remediation{}, false, r.patchAnnotations(ctx, s.tcp, map[string]string{controlplanev1.RemediationInProgressAnnotation: ""})
	}
	return record, true, nil
}

// remediate deletes the unhealthy Machine m once that is safe, recording the remediation
// next first. A Machine that may not go now gets the reason on its OwnerRemediated condition.
func (r *Reconciler) remediate(ctx context.Context, s *scope, m *clusterv1.Machine, next controlplane.Remediation) (ctrl.Result, error) {
	if s.etcdFormed() {
		why, reason := "", ""
		if reason, why = s.whyNotRemediate(m); why == "" {
			if result := r.checkRemoval(ctx, s, m); !result.IsZero() {
				reason = controlplanev1.RemediationDeferredReason
				if member, ok := s.memberOf(m); ok && s.model().CanRemoveMember(member.ID) != nil {
					reason = controlplanev1.CannotBeRemediatedReason
				}
				// The Machine's condition says it; the control plane's conditions stay about etcd.
				why, s.blocked = s.blocked, ""
			}
		}
		if why != "" {
			if s.tcp.Annotations[controlplanev1.RemediationInProgressAnnotation] != "" {
				// A remediation recorded but not carried out, no longer safe: forget it.
				if err := r.patchAnnotations(ctx, s.tcp, map[string]string{controlplanev1.RemediationInProgressAnnotation: ""}); err != nil {
					return ctrl.Result{}, err
				}
			}
			return r.deferRemediation(s, m, reason, why)
		}
	}
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m))
	// The record comes first: a restarted manager finishes it, and the replacement carries it.
	if err := r.patchAnnotations(ctx, s.tcp, map[string]string{controlplanev1.RemediationInProgressAnnotation: next.Marshal()}); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.deleteMachine(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	log.Info("Deleting an unhealthy Machine to replace it", "retryCount", next.RetryCount)
	if marked := conditions.Get(m, clusterv1.MachineOwnerRemediatedCondition); marked != nil {
		// The Machine health check marked it by turning that condition false.
		observeOperation(operationRemediation, marked.LastTransitionTime.Time)
	}
	record.Event(r.Events, s.tcp, corev1.EventTypeNormal, "Remediating", "Remediate", "Deleting unhealthy Machine %s to replace it (remediation %d in a row)", m.Name, next.RetryCount+1)
	conditions.Set(m, metav1.Condition{
		Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse,
		Reason: controlplanev1.RemediationMachineDeletingReason, Message: "Machine is being deleted; a new Machine replaces it",
	})
	s.tcp.Status.LastRemediation = controlplanev1.TalosControlPlaneLastRemediationStatus{
		Machine: m.Name, Time: metav1.NewTime(next.Timestamp), RetryCount: ptr.To(int32(next.RetryCount)),
	}
	return ctrl.Result{RequeueAfter: converging}, nil
}

// whyNotRemediate says why deleting m would be unsafe or premature now, with the reason for
// its OwnerRemediated condition, or "".
func (s *scope) whyNotRemediate(m *clusterv1.Machine) (reason, why string) {
	if s.etcd == nil {
		return controlplanev1.CannotBeRemediatedReason, "no control-plane node answers with etcd's member list: etcd may have lost quorum, " +
			"and removing a member now could lose the cluster; bring the other control-plane nodes back"
	}
	if len(s.active()) <= 1 {
		return controlplanev1.CannotBeRemediatedReason, "the control plane has a single Machine: removing it would leave no control plane; add replicas first"
	}
	for _, other := range s.machines {
		// A node the in-place update reboots goes NotReady for a while, as planned.
		if rec, ok, _ := recordOf(other); ok && rec.Step == stepReboot && rec.RebootSent != nil && time.Since(rec.RebootSent.Time) < rebootGrace {
			return controlplanev1.RemediationDeferredReason, fmt.Sprintf("waiting for the node of Machine %s to come back from the reboot of its in-place update", other.Name)
		}
	}
	for _, other := range s.machines {
		switch {
		case other.Name == m.Name:
		case !other.DeletionTimestamp.IsZero():
			return controlplanev1.RemediationDeferredReason, fmt.Sprintf("waiting for Machine %s to be deleted first", other.Name)
		case !s.isVoter(other):
			return controlplanev1.RemediationDeferredReason, fmt.Sprintf("waiting for Machine %s to join etcd as a voting member first", other.Name)
		}
	}
	return "", ""
}

// deferRemediation says on m's OwnerRemediated condition why it is not remediated now, and
// tells the caller to look again.
func (r *Reconciler) deferRemediation(s *scope, m *clusterv1.Machine, reason, why string) (ctrl.Result, error) {
	message := "Remediation waits: " + why
	if reason == controlplanev1.CannotBeRemediatedReason {
		message = "Cannot remediate: " + why
	}
	if c := conditions.Get(m, clusterv1.MachineOwnerRemediatedCondition); c == nil || c.Message != message {
		record.Event(r.Events, s.tcp, corev1.EventTypeWarning, reason, "Remediate", "Machine %s: %s", m.Name, message)
	}
	conditions.Set(m, metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse, Reason: reason, Message: message})
	// Remediation does not hold the rest back (a scale-up may be what it waits for), but it
	// is looked at again: a retry period ends, or etcd recovers, without an event.
	s.lookAgain(5 * converging)
	return ctrl.Result{}, nil
}

// retryPolicy is the control plane's remediation spec with its defaults.
func retryPolicy(tcp *controlplanev1.TalosControlPlane) controlplane.RetryPolicy {
	spec := tcp.Spec.Remediation
	p := controlplane.RetryPolicy{
		RetryPeriod:      time.Duration(ptr.Deref(spec.RetryPeriodSeconds, 0)) * time.Second,
		MinHealthyPeriod: time.Duration(ptr.Deref(spec.MinHealthyPeriodSeconds, controlplanev1.DefaultMinHealthyPeriodSeconds)) * time.Second,
	}
	if spec.MaxRetry != nil {
		p.MaxRetry = ptr.To(int(*spec.MaxRetry))
	}
	return p
}
