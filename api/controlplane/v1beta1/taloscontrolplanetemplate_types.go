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

package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// TalosControlPlaneTemplateSpec holds the template from which a ClusterClass creates
// TalosControlPlanes.
type TalosControlPlaneTemplateSpec struct {
	// template is the TalosControlPlane to create.
	// +required
	Template TalosControlPlaneTemplateResource `json:"template,omitempty,omitzero"`
}

// TalosControlPlaneTemplateResource is the metadata and spec of the TalosControlPlanes to create.
type TalosControlPlaneTemplateResource struct {
	// metadata is copied onto each created TalosControlPlane.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is copied onto each created TalosControlPlane.
	// +required
	Spec TalosControlPlaneTemplateResourceSpec `json:"spec,omitempty,omitzero"`
}

// TalosControlPlaneTemplateResourceSpec is a TalosControlPlaneSpec without the fields a
// Cluster topology sets itself: replicas, version and the infrastructure reference.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneTemplateResourceSpec struct {
	// machineTemplate describes the control-plane Machines.
	// +optional
	MachineTemplate TalosControlPlaneTemplateMachineTemplate `json:"machineTemplate,omitempty,omitzero"`

	// controlPlaneConfig is the TalosConfig spec of every control-plane Machine.
	// +optional
	ControlPlaneConfig bootstrapv1.TalosConfigSpec `json:"controlPlaneConfig,omitempty,omitzero"`

	// rollout says when and how control-plane Machines are replaced.
	// +optional
	Rollout TalosControlPlaneRolloutSpec `json:"rollout,omitempty,omitzero"`

	// remediation says how unhealthy control-plane Machines are replaced.
	// +optional
	Remediation TalosControlPlaneRemediationSpec `json:"remediation,omitempty,omitzero"`

	// machineNaming says how new control-plane Machines are named.
	// +optional
	MachineNaming TalosControlPlaneMachineNamingSpec `json:"machineNaming,omitempty,omitzero"`
}

// TalosControlPlaneTemplateMachineTemplate describes the control-plane Machines in a template.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneTemplateMachineTemplate struct {
	// metadata is applied to every control-plane Machine.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the part of the Machine spec the control plane sets.
	// +optional
	Spec TalosControlPlaneTemplateMachineTemplateSpec `json:"spec,omitempty,omitzero"`
}

// TalosControlPlaneTemplateMachineTemplateSpec is the Machine spec of a template, without the
// infrastructure reference the topology sets.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneTemplateMachineTemplateSpec struct {
	// deletion holds the timeouts applied while a control-plane Machine is deleted.
	// +optional
	Deletion TalosControlPlaneMachineTemplateDeletionSpec `json:"deletion,omitempty,omitzero"`

	// taints are the Node taints Cluster API manages on control-plane Nodes.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []clusterv1.MachineTaint `json:"taints,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=taloscontrolplanetemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosControlPlaneTemplate is the template of the TalosControlPlanes a ClusterClass creates.
type TalosControlPlaneTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec TalosControlPlaneTemplateSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// TalosControlPlaneTemplateList is a list of TalosControlPlaneTemplates.
type TalosControlPlaneTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosControlPlaneTemplates.
	Items []TalosControlPlaneTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosControlPlaneTemplate{}, &TalosControlPlaneTemplateList{})
}
