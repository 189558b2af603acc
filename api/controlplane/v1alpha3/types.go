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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // CACPPT's conditions are Cluster API v1beta1's

	bootstrapv1alpha3 "github.com/talon-capi/talon/api/bootstrap/v1alpha3"
)

// TalosControlPlaneSpec is CACPPT's spec of a control plane.
type TalosControlPlaneSpec struct {
	// replicas is the number of control-plane Machines.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// version is the Kubernetes version of the control plane.
	Version string `json:"version"`

	// infrastructureTemplate is the infrastructure template control-plane Machines are made from.
	InfrastructureTemplate corev1.ObjectReference `json:"infrastructureTemplate"`

	// controlPlaneConfig is the TalosConfig spec of the control-plane Machines.
	ControlPlaneConfig ControlPlaneConfig `json:"controlPlaneConfig"`

	// rolloutStrategy says how outdated Machines are replaced.
	// +optional
	RolloutStrategy *RolloutStrategy `json:"rolloutStrategy,omitempty"`
}

// ControlPlaneConfig holds the control-plane Machines' TalosConfig specs.
type ControlPlaneConfig struct {
	// init was the first Machine's config (unused by CACPPT since v0.4).
	// +optional
	InitConfig bootstrapv1alpha3.TalosConfigSpec `json:"init,omitempty,omitzero"`
	// controlplane is every control-plane Machine's config.
	ControlPlaneConfig bootstrapv1alpha3.TalosConfigSpec `json:"controlplane"`
}

// RolloutStrategy says how outdated Machines are replaced.
type RolloutStrategy struct {
	// rollingUpdate are the rolling update's parameters.
	// +optional
	RollingUpdate *RollingUpdate `json:"rollingUpdate,omitempty"`
	// type is RollingUpdate or OnDelete.
	// +optional
	Type string `json:"type,omitempty"`
}

// RollingUpdate are a rolling update's parameters.
type RollingUpdate struct {
	// maxSurge is how many Machines may exist above replicas during a rollout.
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// TalosControlPlaneStatus is CACPPT's status of a control plane.
type TalosControlPlaneStatus struct {
	// selector selects the control plane's Machines (the scale subresource's).
	// +optional
	Selector string `json:"selector,omitempty"`
	// replicas is the number of control-plane Machines.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// readyReplicas is the number of ready control-plane Machines.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// unavailableReplicas is the number of unavailable control-plane Machines.
	// +optional
	UnavailableReplicas int32 `json:"unavailableReplicas,omitempty"`
	// initialized is true once the control plane's API server answers.
	// +optional
	Initialized bool `json:"initialized"`
	// ready is true once the control plane is ready.
	// +optional
	Ready bool `json:"ready"`
	// bootstrapped is true once CACPPT bootstrapped etcd.
	// +optional
	Bootstrapped bool `json:"bootstrapped,omitempty"`
	// failureReason is a terminal problem's short reason.
	// +optional
	FailureReason *string `json:"failureReason,omitempty"`
	// failureMessage is a terminal problem's explanation.
	// +optional
	FailureMessage *string `json:"failureMessage,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions are Cluster API v1beta1 conditions.
	// +optional
	Conditions clusterv1beta1.Conditions `json:"conditions,omitempty"`
	// version is the lowest Kubernetes version of the control-plane Machines.
	// +optional
	Version *string `json:"version,omitempty"`
}

// TalosControlPlane is CACPPT's TalosControlPlane.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=taloscontrolplanes,shortName=tcp,scope=Namespaced,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:deprecatedversion:warning="controlplane.cluster.x-k8s.io/v1alpha3 is Sidero's CACPPT API, served for clusters Talon took over; use v1beta1"
type TalosControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TalosControlPlaneSpec   `json:"spec,omitempty"`
	Status TalosControlPlaneStatus `json:"status,omitempty"`
}

// TalosControlPlaneList is a list of TalosControlPlanes.
//
// +kubebuilder:object:root=true
type TalosControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TalosControlPlane `json:"items"`
}
