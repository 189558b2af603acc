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
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // CACPPT's conditions are Cluster API v1beta1's
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1alpha3 "github.com/talon-capi/talon/api/bootstrap/v1alpha3"
	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/api/internal/roundtrip"
)

// TestRoundTrips converts random TalosControlPlanes to the other version and back and
// expects what it started from. The seed is logged; TALON_CONVERSION_SEED replays it.
func TestRoundTrips(t *testing.T) {
	r := roundtrip.Rand(t)
	for i := range 500 {
		spoke := &TalosControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "cp", Namespace: "default"}, Spec: randomSpec(r), Status: randomStatus(r)}
		hub := &controlplanev1.TalosControlPlane{}
		back := &TalosControlPlane{}
		roundtrip.Must(t, ConvertTalosControlPlaneToHub(spoke, hub))
		roundtrip.Must(t, ConvertTalosControlPlaneFromHub(hub, back))
		roundtrip.ExpectSame(t, i, "v1alpha3 -> v1beta1 -> v1alpha3", spoke, back)

		talon := &controlplanev1.TalosControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "cp", Namespace: "default", Labels: map[string]string{"a": "b"}},
			Spec: randomHubSpec(r), Status: randomHubStatus(r)}
		viaSpoke := &TalosControlPlane{}
		again := &controlplanev1.TalosControlPlane{}
		roundtrip.Must(t, ConvertTalosControlPlaneFromHub(talon, viaSpoke))
		roundtrip.Must(t, ConvertTalosControlPlaneToHub(viaSpoke, again))
		roundtrip.ExpectSame(t, i, "v1beta1 -> v1alpha3 -> v1beta1", talon, again)
	}
}

// TestCACPPTObjectReadsAsTalons: a TalosControlPlane as CACPPT stores it reads as Talon's
// (its Machine template, config, replicas and initialization), and CACPPT's record of the etcd
// bootstrap is still there to read.
func TestCACPPTObjectReadsAsTalons(t *testing.T) {
	var spoke TalosControlPlane
	roundtrip.Must(t, json.Unmarshal([]byte(`{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha3", "kind": "TalosControlPlane",
		"metadata": {"name": "demo-control-plane", "namespace": "default"},
		"spec": {"replicas": 3, "version": "v1.36.3",
			"infrastructureTemplate": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TalosDockerMachineTemplate", "name": "demo-control-plane"},
			"controlPlaneConfig": {"controlplane": {"generateType": "controlplane", "talosVersion": "v1.13"}},
			"rolloutStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
		"status": {"replicas": 3, "readyReplicas": 3, "initialized": true, "ready": true, "bootstrapped": true,
			"selector": "cluster.x-k8s.io/cluster-name=demo", "version": "v1.36.3"}
	}`), &spoke))
	hub := &controlplanev1.TalosControlPlane{}
	roundtrip.Must(t, ConvertTalosControlPlaneToHub(&spoke, hub))
	wantRef := clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TalosDockerMachineTemplate", Name: "demo-control-plane"}
	if hub.Spec.MachineTemplate.Spec.InfrastructureRef != wantRef {
		t.Errorf("infrastructureRef: got %+v, want %+v", hub.Spec.MachineTemplate.Spec.InfrastructureRef, wantRef)
	}
	if *hub.Spec.Replicas != 3 || hub.Spec.Version != "v1.36.3" || hub.Spec.ControlPlaneConfig.GenerateType != bootstrapv1.GenerateTypeControlPlane {
		t.Errorf("spec: got %+v", hub.Spec)
	}
	if s := hub.Status; s.Initialization.ControlPlaneInitialized == nil || !*s.Initialization.ControlPlaneInitialized || *s.ReadyReplicas != 3 {
		t.Errorf("status: got %+v", hub.Status)
	}
	if !Bootstrapped(hub) {
		t.Error("CACPPT's record that it bootstrapped etcd is lost")
	}
	back := &TalosControlPlane{}
	roundtrip.Must(t, ConvertTalosControlPlaneFromHub(hub, back))
	spoke.TypeMeta = metav1.TypeMeta{} // set by whoever serves the object, not by conversion
	roundtrip.ExpectSame(t, 0, "v1alpha3 -> v1beta1 -> v1alpha3", &spoke, back)
}

func int32Ptr(r *rand.Rand) *int32 {
	if r.IntN(3) == 0 {
		return nil
	}
	n := int32(r.IntN(4))
	return &n
}

func randomConfig(r *rand.Rand) bootstrapv1alpha3.TalosConfigSpec {
	return bootstrapv1alpha3.TalosConfigSpec{GenerateType: roundtrip.Some(r, "controlplane", "init", ""), TalosVersion: roundtrip.Some(r, "", "v1.13"),
		StrategicPatches: roundtrip.Some(r, []string(nil), []string{"machine:\n  env:\n    A: b\n"})}
}

func randomSpec(r *rand.Rand) TalosControlPlaneSpec {
	s := TalosControlPlaneSpec{
		Replicas: int32Ptr(r),
		Version:  roundtrip.Some(r, "v1.36.3", "v1.35.4"),
		InfrastructureTemplate: corev1.ObjectReference{
			APIVersion: roundtrip.Some(r, "infrastructure.cluster.x-k8s.io/v1alpha1", "infrastructure.cluster.x-k8s.io/v1beta1", ""),
			Kind:       roundtrip.Some(r, "TalosDockerMachineTemplate", "MetalMachineTemplate"), Name: roundtrip.Some(r, "cp", "cp-2"),
			Namespace: roundtrip.Some(r, "", "default"),
		},
		ControlPlaneConfig: ControlPlaneConfig{ControlPlaneConfig: randomConfig(r)},
	}
	if r.IntN(3) == 0 {
		s.ControlPlaneConfig.InitConfig = randomConfig(r)
	}
	if r.IntN(2) == 0 {
		s.RolloutStrategy = &RolloutStrategy{Type: roundtrip.Some(r, "", "RollingUpdate", "OnDelete")}
		if r.IntN(2) == 0 {
			surge := roundtrip.Some(r, intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromString("50%"))
			s.RolloutStrategy.RollingUpdate = &RollingUpdate{MaxSurge: &surge}
		}
	}
	return s
}

func randomStatus(r *rand.Rand) TalosControlPlaneStatus {
	s := TalosControlPlaneStatus{
		Selector: roundtrip.Some(r, "", "cluster.x-k8s.io/cluster-name=demo"), Replicas: int32(r.IntN(4)), ReadyReplicas: int32(r.IntN(4)),
		UnavailableReplicas: int32(r.IntN(2)), Initialized: r.IntN(2) == 0, Ready: r.IntN(2) == 0, Bootstrapped: r.IntN(2) == 0,
		ObservedGeneration: int64(r.IntN(3)),
	}
	if r.IntN(3) == 0 {
		s.FailureReason, s.FailureMessage = roundtrip.Some(r, nil, strPtr("Bad")), roundtrip.Some(r, nil, strPtr("it broke"))
	}
	if r.IntN(2) == 0 {
		s.Version = strPtr("v1.36.3")
	}
	for i := range r.IntN(3) {
		s.Conditions = append(s.Conditions, clusterv1beta1.Condition{
			Type: clusterv1beta1.ConditionType(fmt.Sprintf("C%d", i)), Status: roundtrip.Some(r, corev1.ConditionTrue, corev1.ConditionFalse),
			Severity:           roundtrip.Some(r, clusterv1beta1.ConditionSeverityNone, clusterv1beta1.ConditionSeverityWarning),
			LastTransitionTime: roundtrip.Time(r), Reason: roundtrip.Some(r, "", "Waiting"), Message: roundtrip.Some(r, "", "because"),
		})
	}
	return s
}

func randomHubSpec(r *rand.Rand) controlplanev1.TalosControlPlaneSpec {
	s := controlplanev1.TalosControlPlaneSpec{
		Replicas: int32Ptr(r), Version: roundtrip.Some(r, "v1.36.3", "v1.35.4"),
		ControlPlaneConfig: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: roundtrip.Some(r, "", "v1.13")},
	}
	s.MachineTemplate.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TalosDockerMachineTemplate", Name: "cp"}
	if r.IntN(2) == 0 {
		s.MachineTemplate.ObjectMeta.Labels = map[string]string{"tier": "cp"}
		s.MachineNaming.Template = "{{ .cluster.name }}-cp-{{ .random }}"
	}
	if r.IntN(2) == 0 {
		s.Rollout.Strategy.Type = roundtrip.Some(r, controlplanev1.RollingUpdateStrategyType, controlplanev1.OnDeleteStrategyType)
		s.Rollout.Strategy.RollingUpdate.MaxSurge = int32Ptr(r)
		s.Rollout.After = roundtrip.Time(r)
	}
	if r.IntN(2) == 0 {
		s.Remediation.MaxRetry = int32Ptr(r)
	}
	return s
}

func randomHubStatus(r *rand.Rand) controlplanev1.TalosControlPlaneStatus {
	s := controlplanev1.TalosControlPlaneStatus{
		Selector: roundtrip.Some(r, "", "cluster.x-k8s.io/cluster-name=demo"), Replicas: int32Ptr(r), ReadyReplicas: int32Ptr(r),
		AvailableReplicas: int32Ptr(r), UpToDateReplicas: int32Ptr(r), ObservedGeneration: int64(r.IntN(3)),
	}
	if r.IntN(2) == 0 {
		initialized := r.IntN(2) == 0
		s.Initialization.ControlPlaneInitialized = &initialized
	}
	for i := range r.IntN(3) {
		s.Conditions = append(s.Conditions, metav1.Condition{
			Type: fmt.Sprintf("C%d", i), Status: roundtrip.Some(r, metav1.ConditionTrue, metav1.ConditionFalse), ObservedGeneration: int64(r.IntN(3)),
			LastTransitionTime: roundtrip.Time(r), Reason: roundtrip.Some(r, "Ready", "Waiting"), Message: roundtrip.Some(r, "", "because"),
		})
	}
	return s
}

func strPtr(s string) *string { return &s }
