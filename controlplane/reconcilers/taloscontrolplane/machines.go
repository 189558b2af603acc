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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
)

// Annotations recording what a control-plane Machine was created from.
const (
	// ConfigHashAnnotation is the hash of the controlPlaneConfig a Machine was created with.
	ConfigHashAnnotation = "controlplane.cluster.x-k8s.io/talos-config-hash"
	// InfrastructureTemplateAnnotation is the infrastructure template a Machine was cloned from.
	InfrastructureTemplateAnnotation = "controlplane.cluster.x-k8s.io/infrastructure-template"
	// EtcdMemberHook is the pre-terminate hook that holds a deleted control-plane Machine,
	// after its Node is drained, until its etcd member has been removed.
	EtcdMemberHook = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/talon-etcd-member"
)

// configHash identifies a controlPlaneConfig.
func configHash(spec bootstrapv1.TalosConfigSpec) string {
	data, _ := json.Marshal(spec) //nolint:errchkjson // a plain struct always marshals
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// upToDate says why m must be replaced, or "" when it matches the spec.
func (s *scope) upToDate(m *clusterv1.Machine) string {
	spec := s.tcp.Spec
	switch {
	case m.Spec.Version != spec.Version:
		return fmt.Sprintf("version %s, want %s", m.Spec.Version, spec.Version)
	case m.Annotations[ConfigHashAnnotation] != configHash(spec.ControlPlaneConfig):
		return "controlPlaneConfig changed"
	case m.Annotations[InfrastructureTemplateAnnotation] != spec.MachineTemplate.Spec.InfrastructureRef.Name:
		return fmt.Sprintf("infrastructure template %s, want %s", m.Annotations[InfrastructureTemplateAnnotation], spec.MachineTemplate.Spec.InfrastructureRef.Name)
	case !spec.Rollout.After.IsZero() && spec.Rollout.After.Before(ptrNow()) && m.CreationTimestamp.Before(&spec.Rollout.After):
		return "created before rollout.after"
	}
	return ""
}

func ptrNow() *metav1.Time {
	now := metav1.Now()
	return &now
}

// outdated are the active Machines that must be replaced.
func (s *scope) outdated() []*clusterv1.Machine {
	var out []*clusterv1.Machine
	for _, m := range s.active() {
		if s.upToDate(m) != "" {
			out = append(out, m)
		}
	}
	return out
}

// machineLabels are the labels of a new control-plane Machine and its objects.
func machineLabels(s *scope) map[string]string {
	labels := maps.Clone(s.tcp.Spec.MachineTemplate.ObjectMeta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, selectorLabels(s.cluster, s.tcp))
	labels[clusterv1.MachineControlPlaneLabel] = ""
	return labels
}

// createMachine creates one control-plane Machine: its infrastructure machine cloned from
// the template, its TalosConfig from controlPlaneConfig, the Machine itself in the failure
// domain the model picks. A failure leaves nothing behind.
func (r *Reconciler) createMachine(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	tcp := s.tcp
	name := names.SimpleNameGenerator.GenerateName(tcp.Name + "-")
	if tmpl := tcp.Spec.MachineNaming.Template; tmpl != "" {
		var err error
		if name, err = controlplane.MachineName(tmpl, s.cluster.Name, tcp.Name, utilrand.String(5)); err != nil {
			s.blocked = fmt.Sprintf("Cannot name a new Machine: spec.machineNaming.template: %v", err)
			return ctrl.Result{}, nil
		}
	}
	owner := metav1.NewControllerRef(tcp, controlplanev1.GroupVersion.WithKind("TalosControlPlane"))
	labels := machineLabels(s)
	annotations := maps.Clone(tcp.Spec.MachineTemplate.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[ConfigHashAnnotation] = configHash(tcp.Spec.ControlPlaneConfig)
	annotations[EtcdMemberHook] = ""
	annotations[InfrastructureTemplateAnnotation] = tcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name
	if remediation, ok := tcp.Annotations[controlplanev1.RemediationInProgressAnnotation]; ok {
		// The replacement of a remediated Machine: if it fails too, that is a retry.
		annotations[controlplanev1.RemediationForAnnotation] = remediation
	}

	template, err := external.GetObjectFromContractVersionedRef(ctx, r.Client, tcp.Spec.MachineTemplate.Spec.InfrastructureRef, tcp.Namespace)
	if err != nil {
		s.waiting = fmt.Sprintf("Cannot read the infrastructure template: %v", err)
		return ctrl.Result{}, err
	}
	infra, infraRef, err := external.CreateFromTemplate(ctx, &external.CreateFromTemplateInput{
		Client:      r.Client,
		TemplateRef: &corev1.ObjectReference{APIVersion: template.GetAPIVersion(), Kind: template.GetKind(), Name: template.GetName(), Namespace: tcp.Namespace},
		Namespace:   tcp.Namespace, Name: name, ClusterName: s.cluster.Name, OwnerRef: owner,
		Labels: labels, Annotations: tcp.Spec.MachineTemplate.ObjectMeta.Annotations,
	})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to clone the infrastructure machine: %w", err)
	}

	config := &bootstrapv1.TalosConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tcp.Namespace, Labels: labels, OwnerReferences: []metav1.OwnerReference{*owner}},
		Spec:       desiredConfigSpec(tcp),
	}
	undo := func() {
		_ = r.Client.Delete(context.WithoutCancel(ctx), infra)
		_ = r.Client.Delete(context.WithoutCancel(ctx), config)
	}
	if err := r.Client.Create(ctx, config); err != nil {
		undo()
		return ctrl.Result{}, fmt.Errorf("failed to create TalosConfig %s: %w", name, err)
	}
	tmpl := tcp.Spec.MachineTemplate.Spec
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: tcp.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*owner},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: s.cluster.Name,
			Version:     tcp.Spec.Version,
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "TalosConfig", Name: name,
			}},
			InfrastructureRef: infraRef,
			FailureDomain:     s.model().NextFailureDomain(),
			ReadinessGates:    tmpl.ReadinessGates,
			Taints:            tmpl.Taints,
			Deletion: clusterv1.MachineDeletionSpec{
				NodeDrainTimeoutSeconds:        tmpl.Deletion.NodeDrainTimeoutSeconds,
				NodeVolumeDetachTimeoutSeconds: tmpl.Deletion.NodeVolumeDetachTimeoutSeconds,
				NodeDeletionTimeoutSeconds:     tmpl.Deletion.NodeDeletionTimeoutSeconds,
			},
		},
	}
	if err := r.Client.Create(ctx, machine); err != nil {
		undo()
		return ctrl.Result{}, fmt.Errorf("failed to create Machine %s: %w", name, err)
	}
	log.Info("Created a control-plane Machine", "Machine", klog.KObj(machine), "failureDomain", machine.Spec.FailureDomain)
	return ctrl.Result{RequeueAfter: converging}, nil
}

// deleteMachine deletes a control-plane Machine. Cluster API drains its Node, then waits
// for the EtcdMemberHook, which releaseMachines removes once the member is out of etcd.
func (r *Reconciler) deleteMachine(ctx context.Context, m *clusterv1.Machine) error {
	if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete Machine %s: %w", m.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleting a control-plane Machine", "Machine", klog.KObj(m))
	return nil
}

// waitsForHook reports whether Cluster API holds a deleted Machine for the EtcdMemberHook:
// its Node is drained and only the pre-terminate hooks are left.
func waitsForHook(m *clusterv1.Machine) bool {
	if m.DeletionTimestamp.IsZero() {
		return false
	}
	if _, ok := m.Annotations[EtcdMemberHook]; !ok {
		return false
	}
	c := conditions.Get(m, clusterv1.MachineDeletingCondition)
	return c != nil && c.Reason == clusterv1.MachineDeletingWaitingForPreTerminateHookReason
}

// releaseMachines removes the etcd member of every deleted Machine whose Node is drained,
// then lets Cluster API go on by removing the EtcdMemberHook. The last Machine of a control
// plane being deleted keeps its member: there is no cluster left to remove it from.
func (r *Reconciler) releaseMachines(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, m := range s.deleting() {
		if !waitsForHook(m) {
			continue
		}
		clusterGoing := !s.tcp.DeletionTimestamp.IsZero()
		// The only Machine left has no cluster to leave: removing its member would end etcd.
		if len(s.machines) > 1 {
			result := r.removeMember(ctx, s, m)
			if !result.IsZero() && !clusterGoing {
				// While the control plane is deleted, a member that cannot be removed does not
				// hold the deletion: the cluster is going away.
				return result, nil
			}
		}
		before := m.DeepCopy()
		delete(m.Annotations, EtcdMemberHook)
		if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("failed to release Machine %s: %w", m.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Released a deleted Machine after removing its etcd member", "Machine", klog.KObj(m))
		// One membership change per reconcile: the next one sees etcd as it is now.
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	return ctrl.Result{}, nil
}

// reconcileInPlace carries changes that need no new Machine to the existing ones: the
// labels and annotations of machineTemplate.metadata and the deletion timeouts.
func (r *Reconciler) reconcileInPlace(ctx context.Context, s *scope) (ctrl.Result, error) {
	tmpl := s.tcp.Spec.MachineTemplate
	var errs []error
	for _, m := range s.active() {
		updated := m.DeepCopy()
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		maps.Copy(updated.Labels, tmpl.ObjectMeta.Labels)
		maps.Copy(updated.Annotations, tmpl.ObjectMeta.Annotations)
		updated.Annotations[EtcdMemberHook] = ""
		updated.Spec.Deletion = clusterv1.MachineDeletionSpec{
			NodeDrainTimeoutSeconds:        tmpl.Spec.Deletion.NodeDrainTimeoutSeconds,
			NodeVolumeDetachTimeoutSeconds: tmpl.Spec.Deletion.NodeVolumeDetachTimeoutSeconds,
			NodeDeletionTimeoutSeconds:     tmpl.Spec.Deletion.NodeDeletionTimeoutSeconds,
		}
		if maps.Equal(updated.Labels, m.Labels) && maps.Equal(updated.Annotations, m.Annotations) &&
			equalDeletion(updated.Spec.Deletion, m.Spec.Deletion) {
			continue
		}
		if err := r.Client.Patch(ctx, updated, client.MergeFrom(m)); err != nil {
			errs = append(errs, fmt.Errorf("failed to update Machine %s in place: %w", m.Name, err))
		}
	}
	return ctrl.Result{RequeueAfter: requeueForRolloutAfter(s.tcp)}, errors.Join(errs...)
}

func equalDeletion(a, b clusterv1.MachineDeletionSpec) bool {
	eq := func(x, y *int32) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(a.NodeDrainTimeoutSeconds, b.NodeDrainTimeoutSeconds) &&
		eq(a.NodeVolumeDetachTimeoutSeconds, b.NodeVolumeDetachTimeoutSeconds) &&
		eq(a.NodeDeletionTimeoutSeconds, b.NodeDeletionTimeoutSeconds)
}

// requeueForRolloutAfter is when a future rollout.after is due.
func requeueForRolloutAfter(tcp *controlplanev1.TalosControlPlane) time.Duration {
	if after := tcp.Spec.Rollout.After; !after.IsZero() && after.After(time.Now()) {
		return time.Until(after.Time)
	}
	return 0
}

// orphanGrace is how old a TalosConfig or infrastructure machine without its Machine must be
// before it counts as left behind (by a manager stopped between the creates): younger ones
// may belong to a Machine the cache has not shown yet.
const orphanGrace = 30 * time.Second

// deleteOrphans deletes the TalosConfigs and infrastructure machines the control plane
// created for Machines that were never created. It returns when to look again for orphans
// too young to delete, or zero.
func (r *Reconciler) deleteOrphans(ctx context.Context, s *scope) (time.Duration, error) {
	objects := make([]client.Object, 0, len(s.configs))
	for _, c := range s.configs {
		objects = append(objects, c)
	}
	template := s.tcp.Spec.MachineTemplate.Spec.InfrastructureRef
	if tmpl, err := external.GetObjectFromContractVersionedRef(ctx, r.Client, template, s.tcp.Namespace); err == nil {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(tmpl.GetAPIVersion())
		list.SetKind(strings.TrimSuffix(tmpl.GetKind(), "Template") + "List")
		if err := r.Client.List(ctx, list, client.InNamespace(s.tcp.Namespace), client.MatchingLabels(selectorLabels(s.cluster, s.tcp))); err != nil {
			return 0, fmt.Errorf("failed to list infrastructure machines: %w", err)
		}
		for i := range list.Items {
			objects = append(objects, &list.Items[i])
		}
	}
	var next time.Duration
	var errs []error
	for _, o := range objects {
		if !metav1.IsControlledBy(o, s.tcp) || s.machineByName(o.GetName()) != nil {
			continue
		}
		if age := time.Since(o.GetCreationTimestamp().Time); age < orphanGrace {
			next = max(next, orphanGrace-age)
			continue
		}
		if err := r.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleted an object left behind without its Machine", "kind", o.GetObjectKind().GroupVersionKind().Kind, "name", o.GetName())
	}
	return next, errors.Join(errs...)
}
