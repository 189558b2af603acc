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

package v1alpha3

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1alpha3 "github.com/talon-capi/talon/api/bootstrap/v1alpha3"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
)

// hubData is what a v1alpha3 TalosControlPlane keeps of the v1beta1 object it was converted
// from; spokeData what a v1beta1 one keeps of the v1alpha3 object. Each is restored when the
// object converted back still says what it said then.
type hubData struct {
	Spec   *controlplanev1.TalosControlPlaneSpec   `json:"spec,omitempty"`
	Status *controlplanev1.TalosControlPlaneStatus `json:"status,omitempty"`
}

type spokeData struct {
	Spec   *TalosControlPlaneSpec   `json:"spec,omitempty"`
	Status *TalosControlPlaneStatus `json:"status,omitempty"`
}

// ConvertTalosControlPlaneToHub converts CACPPT's TalosControlPlane to Talon's.
func ConvertTalosControlPlaneToHub(src *TalosControlPlane, dst *controlplanev1.TalosControlPlane) error {
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	var saved hubData
	if err := bootstrapv1alpha3.TakeConversionData(&dst.ObjectMeta, &saved); err != nil {
		return err
	}
	dst.Spec = specToHub(src.Spec)
	if saved.Spec != nil && bootstrapv1alpha3.SameJSON(specFromHub(*saved.Spec), src.Spec) {
		dst.Spec = *saved.Spec
	}
	dst.Status = statusToHub(src.Status)
	if saved.Status != nil && bootstrapv1alpha3.SameJSON(statusFromHub(*saved.Status), src.Status) {
		dst.Status = *saved.Status
	}
	var keep spokeData
	if !bootstrapv1alpha3.SameJSON(specFromHub(dst.Spec), src.Spec) {
		keep.Spec = src.Spec.DeepCopy()
	}
	if !bootstrapv1alpha3.SameJSON(statusFromHub(dst.Status), src.Status) {
		keep.Status = src.Status.DeepCopy()
	}
	return bootstrapv1alpha3.PutConversionData(&dst.ObjectMeta, keep)
}

// ConvertTalosControlPlaneFromHub converts Talon's TalosControlPlane to CACPPT's.
func ConvertTalosControlPlaneFromHub(src *controlplanev1.TalosControlPlane, dst *TalosControlPlane) error {
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	var saved spokeData
	if err := bootstrapv1alpha3.TakeConversionData(&dst.ObjectMeta, &saved); err != nil {
		return err
	}
	dst.Spec = specFromHub(src.Spec)
	if saved.Spec != nil && bootstrapv1alpha3.SameJSON(specToHub(*saved.Spec), src.Spec) {
		dst.Spec = *saved.Spec
	}
	dst.Status = statusFromHub(src.Status)
	if saved.Status != nil && bootstrapv1alpha3.SameJSON(statusToHub(*saved.Status), src.Status) {
		dst.Status = *saved.Status
	}
	var keep hubData
	if !bootstrapv1alpha3.SameJSON(specToHub(dst.Spec), src.Spec) {
		keep.Spec = src.Spec.DeepCopy()
	}
	if !bootstrapv1alpha3.SameJSON(statusToHub(dst.Status), src.Status) {
		keep.Status = src.Status.DeepCopy()
	}
	return bootstrapv1alpha3.PutConversionData(&dst.ObjectMeta, keep)
}

// specToHub converts what both versions can say: the infrastructure template becomes the
// Machine template's contract-versioned reference (its group, kind and name), the
// control-plane config and the rollout strategy field by field (a percentage maxSurge has
// no v1beta1 counterpart and is left unset: Talon's default of one).
func specToHub(in TalosControlPlaneSpec) controlplanev1.TalosControlPlaneSpec {
	out := controlplanev1.TalosControlPlaneSpec{
		Replicas:           in.Replicas,
		Version:            in.Version,
		ControlPlaneConfig: bootstrapv1alpha3.SpecToHub(in.ControlPlaneConfig.ControlPlaneConfig),
	}
	gv, _ := schema.ParseGroupVersion(in.InfrastructureTemplate.APIVersion)
	out.MachineTemplate.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{
		APIGroup: gv.Group, Kind: in.InfrastructureTemplate.Kind, Name: in.InfrastructureTemplate.Name,
	}
	if in.RolloutStrategy != nil {
		out.Rollout.Strategy.Type = controlplanev1.TalosControlPlaneRolloutStrategyType(in.RolloutStrategy.Type)
		if ru := in.RolloutStrategy.RollingUpdate; ru != nil && ru.MaxSurge != nil && ru.MaxSurge.Type == intstr.Int {
			surge := ru.MaxSurge.IntVal
			out.Rollout.Strategy.RollingUpdate.MaxSurge = &surge
		}
	}
	return out
}

// specFromHub converts what both versions can say. The infrastructure template's
// apiVersion names the group only ("<group>/"): v1beta1 does not say the version.
func specFromHub(in controlplanev1.TalosControlPlaneSpec) TalosControlPlaneSpec {
	ref := in.MachineTemplate.Spec.InfrastructureRef
	out := TalosControlPlaneSpec{
		Replicas: in.Replicas,
		Version:  in.Version,
		InfrastructureTemplate: corev1.ObjectReference{
			APIVersion: ref.APIGroup + "/", Kind: ref.Kind, Name: ref.Name,
		},
		ControlPlaneConfig: ControlPlaneConfig{ControlPlaneConfig: bootstrapv1alpha3.SpecFromHub(in.ControlPlaneConfig)},
	}
	if s := in.Rollout.Strategy; s.Type != "" || s.RollingUpdate.MaxSurge != nil {
		out.RolloutStrategy = &RolloutStrategy{Type: string(s.Type)}
		if s.RollingUpdate.MaxSurge != nil {
			surge := intstr.FromInt32(*s.RollingUpdate.MaxSurge)
			out.RolloutStrategy.RollingUpdate = &RollingUpdate{MaxSurge: &surge}
		}
	}
	return out
}

// statusToHub converts what both versions can say.
func statusToHub(in TalosControlPlaneStatus) controlplanev1.TalosControlPlaneStatus {
	out := controlplanev1.TalosControlPlaneStatus{
		Selector:           in.Selector,
		Replicas:           nonZero(in.Replicas),
		ReadyReplicas:      nonZero(in.ReadyReplicas),
		ObservedGeneration: in.ObservedGeneration,
		Conditions:         bootstrapv1alpha3.ConditionsToHub(in.Conditions, nil),
	}
	if in.Initialized {
		initialized := true
		out.Initialization.ControlPlaneInitialized = &initialized
	}
	return out
}

// statusFromHub converts what both versions can say.
func statusFromHub(in controlplanev1.TalosControlPlaneStatus) TalosControlPlaneStatus {
	out := TalosControlPlaneStatus{
		Selector:           in.Selector,
		ObservedGeneration: in.ObservedGeneration,
		Conditions:         bootstrapv1alpha3.ConditionsFromHub(in.Conditions, nil),
		Initialized:        in.Initialization.ControlPlaneInitialized != nil && *in.Initialization.ControlPlaneInitialized,
	}
	if in.Replicas != nil {
		out.Replicas = *in.Replicas
	}
	if in.ReadyReplicas != nil {
		out.ReadyReplicas = *in.ReadyReplicas
	}
	return out
}

// nonZero is a pointer to n, or nil for zero.
func nonZero(n int32) *int32 {
	if n == 0 {
		return nil
	}
	return &n
}

// Bootstrapped is whether CACPPT recorded that it bootstrapped etcd, read from a
// TalosControlPlane converted from v1alpha3: the record a takeover starts from.
func Bootstrapped(tcp *controlplanev1.TalosControlPlane) bool {
	var saved spokeData
	meta := tcp.ObjectMeta.DeepCopy()
	if err := bootstrapv1alpha3.TakeConversionData(meta, &saved); err != nil || saved.Status == nil {
		return false
	}
	return saved.Status.Bootstrapped
}
