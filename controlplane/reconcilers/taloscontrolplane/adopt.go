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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/internal/record"
)

// adoptMachines makes Talon's records for the Machines of this control plane that another
// provider created (Sidero Labs' CACPPT, whose TalosControlPlane Talon now serves): the
// control-plane name label Talon selects its Machines by, the pre-terminate hook that holds
// a deleted Machine until its etcd member is removed, and what the Machine was made from,
// read off its own objects, so that a Machine made from the current spec is up to date and
// a takeover replaces nothing. A Machine is adopted once: its ConfigHashAnnotation is the
// record, and nothing here is derived again.
func (r *Reconciler) adoptMachines(ctx context.Context, s *scope) error {
	for _, m := range s.machines {
		if _, ok := m.Annotations[ConfigHashAnnotation]; ok || !m.DeletionTimestamp.IsZero() {
			continue
		}
		config := &bootstrapv1.TalosConfig{}
		if !m.Spec.Bootstrap.ConfigRef.IsDefined() {
			config = nil
		} else {
			switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, config); {
			case apierrors.IsNotFound(err):
				config = nil
			case err != nil:
				return fmt.Errorf("failed to read the TalosConfig of Machine %s: %w", m.Name, err)
			}
		}
		var clonedFrom map[string]string
		switch infra, err := external.GetObjectFromContractVersionedRef(ctx, r.Client, m.Spec.InfrastructureRef, m.Namespace); {
		case err == nil:
			clonedFrom = infra.GetAnnotations()
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("failed to read the infrastructure machine of Machine %s: %w", m.Name, err)
		}
		hash, why := madeFromConfig(s.tcp.Spec.ControlPlaneConfig, config)
		template := madeFromTemplate(s.tcp.Spec.MachineTemplate.Spec.InfrastructureRef, clonedFrom)

		before := m.DeepCopy()
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[clusterv1.MachineControlPlaneNameLabel] = s.tcp.Name
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[ConfigHashAnnotation] = hash
		m.Annotations[InfrastructureTemplateAnnotation] = template
		m.Annotations[EtcdMemberHook] = ""
		if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("failed to adopt Machine %s: %w", m.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Adopted a control-plane Machine another provider made", "Machine", klog.KObj(m),
			"infrastructureTemplate", template, "config", why)
		record.Event(r.Events, s.tcp, corev1.EventTypeNormal, "Adopted", "Adopt", "Adopted Machine %s (%s; infrastructure template %s)", m.Name, why, template)
	}
	return nil
}

// madeFromConfig is the ConfigHashAnnotation of an adopted Machine whose TalosConfig is
// config (nil: gone, or none referenced): the hash of the current controlPlaneConfig when config says the same
// (the generate type aside: CABPT's "init" reads as "controlplane"), else the hash of what
// config says, so that a rollout replaces the Machine; and why, for a person.
func madeFromConfig(want bootstrapv1.TalosConfigSpec, config *bootstrapv1.TalosConfig) (hash, why string) {
	if config == nil {
		// Nothing says what it was made from: it is taken as made from the current spec,
		// as CACPPT itself takes a Machine whose TalosConfig is gone.
		return configHash(want), "its TalosConfig is gone; taken as made from controlPlaneConfig"
	}
	spec := *config.Spec.DeepCopy()
	if spec.GenerateType == bootstrapv1.GenerateTypeControlPlane {
		spec.GenerateType = want.GenerateType
	}
	if equality.Semantic.DeepEqual(spec, want) {
		return configHash(want), "made from controlPlaneConfig"
	}
	return configHash(config.Spec), "made from another config than controlPlaneConfig: a rollout replaces it"
}

// madeFromTemplate is the InfrastructureTemplateAnnotation of an adopted Machine whose
// infrastructure machine has the annotations clonedFrom: the template Cluster API's
// cloned-from annotations name, or the current template when they name none.
func madeFromTemplate(current clusterv1.ContractVersionedObjectReference, clonedFrom map[string]string) string {
	name, hasName := clonedFrom[clusterv1.TemplateClonedFromNameAnnotation]
	groupKind, hasGroupKind := clonedFrom[clusterv1.TemplateClonedFromGroupKindAnnotation]
	switch {
	case !hasName || !hasGroupKind:
		return current.Name
	case groupKind != (schema.GroupKind{Group: current.APIGroup, Kind: current.Kind}).String():
		// Cloned from another kind of template: whatever its name, it is not the current one.
		return groupKind + "/" + name
	}
	return name
}
