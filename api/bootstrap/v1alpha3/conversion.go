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
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // CABPT's conditions are Cluster API v1beta1's

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// ConversionDataAnnotation holds, as JSON, what one version of an object has and the other
// cannot say, so that converting there and back gives the object it started from: the
// v1alpha3 fields on a v1beta1 object (CABPT's generateType spelling, its failure fields,
// its conditions' severities) and the v1beta1 fields on a v1alpha3 one.
const ConversionDataAnnotation = "talon.dev/conversion-data"

// spokeData is what a v1beta1 TalosConfig keeps of the v1alpha3 object it was converted
// from.
type spokeData struct {
	GenerateType   *string                   `json:"generateType,omitempty"`
	TalosConfig    string                    `json:"talosConfig,omitempty"`
	FailureReason  string                    `json:"failureReason,omitempty"`
	FailureMessage string                    `json:"failureMessage,omitempty"`
	Conditions     clusterv1beta1.Conditions `json:"conditions,omitempty"`
}

// hubData is what a v1alpha3 TalosConfig keeps of the v1beta1 object it was converted from.
type hubData struct {
	Spec         *bootstrapv1.TalosConfigSpec    `json:"spec,omitempty"`
	Conditions   []metav1.Condition              `json:"conditions,omitempty"`
	ImageFactory *bootstrapv1.ImageFactoryStatus `json:"imageFactory,omitempty"`
	Template     *TemplateMeta                   `json:"template,omitempty"`
}

// TemplateMeta is the metadata of a v1beta1 TalosConfigTemplate's template, which v1alpha3
// has no field for.
type TemplateMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ConvertTalosConfigToHub converts CABPT's TalosConfig to Talon's.
func ConvertTalosConfigToHub(src *TalosConfig, dst *bootstrapv1.TalosConfig) error {
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	var saved hubData
	if err := TakeConversionData(&dst.ObjectMeta, &saved); err != nil {
		return err
	}
	dst.Spec = SpecToHub(src.Spec)
	if saved.Spec != nil && SameJSON(SpecFromHub(*saved.Spec), src.Spec) {
		// The object was v1beta1 and its spec is unchanged: keep what v1alpha3 cannot say.
		dst.Spec = *saved.Spec
	}
	dst.Status = bootstrapv1.TalosConfigStatus{
		DataSecretName:     src.Status.DataSecretName,
		ObservedGeneration: src.Status.ObservedGeneration,
		Conditions:         ConditionsToHub(src.Status.Conditions, saved.Conditions),
	}
	if saved.ImageFactory != nil {
		dst.Status.ImageFactory = *saved.ImageFactory
	}
	if src.Status.Ready {
		ready := true
		dst.Status.Initialization.DataSecretCreated = &ready
	}
	keep := spokeData{
		TalosConfig: src.Status.TalosConfig, FailureReason: src.Status.FailureReason, FailureMessage: src.Status.FailureMessage,
	}
	if generateTypeFromHub(dst.Spec.GenerateType) != src.Spec.GenerateType {
		keep.GenerateType = &src.Spec.GenerateType
	}
	if !SameJSON(ConditionsFromHub(dst.Status.Conditions, nil), src.Status.Conditions) {
		keep.Conditions = src.Status.Conditions
	}
	return PutConversionData(&dst.ObjectMeta, keep)
}

// ConvertTalosConfigFromHub converts Talon's TalosConfig to CABPT's.
func ConvertTalosConfigFromHub(src *bootstrapv1.TalosConfig, dst *TalosConfig) error {
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	var saved spokeData
	if err := TakeConversionData(&dst.ObjectMeta, &saved); err != nil {
		return err
	}
	dst.Spec = SpecFromHub(src.Spec)
	if saved.GenerateType != nil && generateTypeToHub(*saved.GenerateType) == src.Spec.GenerateType {
		dst.Spec.GenerateType = *saved.GenerateType
	}
	dst.Status = TalosConfigStatus{
		Ready:              src.Status.Initialization.DataSecretCreated != nil && *src.Status.Initialization.DataSecretCreated,
		DataSecretName:     src.Status.DataSecretName,
		ObservedGeneration: src.Status.ObservedGeneration,
		TalosConfig:        saved.TalosConfig,
		FailureReason:      saved.FailureReason,
		FailureMessage:     saved.FailureMessage,
		Conditions:         ConditionsFromHub(src.Status.Conditions, saved.Conditions),
	}
	keep := hubData{}
	if !SameJSON(ConditionsToHub(dst.Status.Conditions, nil), src.Status.Conditions) {
		keep.Conditions = src.Status.Conditions
	}
	if !SameJSON(SpecToHub(dst.Spec), src.Spec) {
		keep.Spec = src.Spec.DeepCopy()
	}
	if src.Status.ImageFactory != (bootstrapv1.ImageFactoryStatus{}) {
		keep.ImageFactory = src.Status.ImageFactory.DeepCopy()
	}
	return PutConversionData(&dst.ObjectMeta, keep)
}

// ConvertTalosConfigTemplateToHub converts CABPT's TalosConfigTemplate to Talon's.
func ConvertTalosConfigTemplateToHub(src *TalosConfigTemplate, dst *bootstrapv1.TalosConfigTemplate) error {
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	var saved hubData
	if err := TakeConversionData(&dst.ObjectMeta, &saved); err != nil {
		return err
	}
	dst.Spec.Template.Spec = SpecToHub(src.Spec.Template.Spec)
	if saved.Spec != nil && SameJSON(SpecFromHub(*saved.Spec), src.Spec.Template.Spec) {
		dst.Spec.Template.Spec = *saved.Spec
	}
	if saved.Template != nil {
		dst.Spec.Template.ObjectMeta.Labels = saved.Template.Labels
		dst.Spec.Template.ObjectMeta.Annotations = saved.Template.Annotations
	}
	keep := spokeData{}
	if generateTypeFromHub(dst.Spec.Template.Spec.GenerateType) != src.Spec.Template.Spec.GenerateType {
		keep.GenerateType = &src.Spec.Template.Spec.GenerateType
	}
	return PutConversionData(&dst.ObjectMeta, keep)
}

// ConvertTalosConfigTemplateFromHub converts Talon's TalosConfigTemplate to CABPT's.
func ConvertTalosConfigTemplateFromHub(src *bootstrapv1.TalosConfigTemplate, dst *TalosConfigTemplate) error {
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	var saved spokeData
	if err := TakeConversionData(&dst.ObjectMeta, &saved); err != nil {
		return err
	}
	spec := src.Spec.Template.Spec
	dst.Spec.Template.Spec = SpecFromHub(spec)
	if saved.GenerateType != nil && generateTypeToHub(*saved.GenerateType) == spec.GenerateType {
		dst.Spec.Template.Spec.GenerateType = *saved.GenerateType
	}
	keep := hubData{}
	if !SameJSON(SpecToHub(dst.Spec.Template.Spec), spec) {
		keep.Spec = spec.DeepCopy()
	}
	if meta := src.Spec.Template.ObjectMeta; len(meta.Labels) > 0 || len(meta.Annotations) > 0 {
		keep.Template = &TemplateMeta{Labels: meta.Labels, Annotations: meta.Annotations}
	}
	return PutConversionData(&dst.ObjectMeta, keep)
}

// generateTypeToHub reads CABPT's generateType as CABPT does (Talos' machine types, where
// init is a control plane, and anything else a worker), or none.
func generateTypeToHub(t string) bootstrapv1.GenerateType {
	switch t {
	case "none":
		return bootstrapv1.GenerateTypeNone
	case "init", "controlplane":
		return bootstrapv1.GenerateTypeControlPlane
	default:
		return bootstrapv1.GenerateTypeWorker
	}
}

// generateTypeFromHub is CABPT's spelling of a generateType: join for a worker.
func generateTypeFromHub(t bootstrapv1.GenerateType) string {
	if t == bootstrapv1.GenerateTypeWorker {
		return "join"
	}
	return string(t)
}

// SpecToHub converts a spec field by field.
func SpecToHub(in TalosConfigSpec) bootstrapv1.TalosConfigSpec {
	out := bootstrapv1.TalosConfigSpec{
		GenerateType:     generateTypeToHub(in.GenerateType),
		TalosVersion:     in.TalosVersion,
		StrategicPatches: append([]string(nil), in.StrategicPatches...),
		Hostname:         bootstrapv1.HostnameSpec{Source: bootstrapv1.HostnameSource(in.Hostname.Source)},
		Data:             in.Data,
	}
	for _, p := range in.ConfigPatches {
		patch := bootstrapv1.ConfigPatch{Op: p.Op, Path: p.Path}
		if len(p.Value.Raw) > 0 {
			patch.Value = &apiextensionsv1.JSON{Raw: append([]byte(nil), p.Value.Raw...)}
		}
		out.ConfigPatches = append(out.ConfigPatches, patch)
	}
	return out
}

// SpecFromHub converts a spec field by field; a patch's from has no v1alpha3 field.
func SpecFromHub(in bootstrapv1.TalosConfigSpec) TalosConfigSpec {
	out := TalosConfigSpec{
		GenerateType:     generateTypeFromHub(in.GenerateType),
		TalosVersion:     in.TalosVersion,
		StrategicPatches: append([]string(nil), in.StrategicPatches...),
		Hostname:         HostnameSpec{Source: string(in.Hostname.Source)},
		Data:             in.Data,
	}
	for _, p := range in.ConfigPatches {
		patch := ConfigPatches{Op: p.Op, Path: p.Path}
		if p.Value != nil {
			patch.Value = apiextensionsv1.JSON{Raw: append([]byte(nil), p.Value.Raw...)}
		}
		out.ConfigPatches = append(out.ConfigPatches, patch)
	}
	return out
}

// ConditionsToHub converts Cluster API v1beta1 conditions to metav1 ones, or gives back the
// metav1 conditions saved when the object was v1beta1 and its conditions did not change.
func ConditionsToHub(in clusterv1beta1.Conditions, saved []metav1.Condition) []metav1.Condition {
	if saved != nil && SameJSON(ConditionsFromHub(saved, nil), in) {
		return saved
	}
	var out []metav1.Condition
	for _, c := range in {
		reason := c.Reason
		if reason == "" {
			// metav1 conditions always have a reason.
			reason = string(c.Status)
		}
		out = append(out, metav1.Condition{
			Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), LastTransitionTime: c.LastTransitionTime,
			Reason: reason, Message: c.Message,
		})
	}
	return out
}

// ConditionsFromHub converts metav1 conditions to Cluster API v1beta1 ones, or gives back the
// v1beta1 conditions saved when the object was v1alpha3 and its conditions did not change.
func ConditionsFromHub(in []metav1.Condition, saved clusterv1beta1.Conditions) clusterv1beta1.Conditions {
	if saved != nil && SameJSON(ConditionsToHub(saved, nil), in) {
		return saved
	}
	var out clusterv1beta1.Conditions
	for _, c := range in {
		out = append(out, clusterv1beta1.Condition{
			Type: clusterv1beta1.ConditionType(c.Type), Status: corev1.ConditionStatus(c.Status), LastTransitionTime: c.LastTransitionTime,
			Reason: c.Reason, Message: c.Message,
		})
	}
	return out
}

// SameJSON is whether a and b have the same JSON: how the conversions tell that an object
// still says what it said when its other version's fields were saved.
func SameJSON(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// TakeConversionData reads the conversion data annotation into v and removes it from meta.
func TakeConversionData(meta *metav1.ObjectMeta, v any) error {
	data, ok := meta.Annotations[ConversionDataAnnotation]
	if !ok {
		return nil
	}
	delete(meta.Annotations, ConversionDataAnnotation)
	if len(meta.Annotations) == 0 {
		meta.Annotations = nil
	}
	if err := json.Unmarshal([]byte(data), v); err != nil {
		return fmt.Errorf("annotation %s: %w", ConversionDataAnnotation, err)
	}
	return nil
}

// PutConversionData writes v into the conversion data annotation, unless it is empty.
func PutConversionData(meta *metav1.ObjectMeta, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if string(data) == "{}" {
		return nil
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[ConversionDataAnnotation] = string(data)
	return nil
}
