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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TalosDockerMachineTemplateSpec holds the template from which TalosDockerMachines are created.
type TalosDockerMachineTemplateSpec struct {
	// template is the TalosDockerMachine to create.
	// +required
	Template TalosDockerMachineTemplateResource `json:"template,omitempty,omitzero"`
}

// TalosDockerMachineTemplateResource is the metadata and spec of the TalosDockerMachines to create.
type TalosDockerMachineTemplateResource struct {
	// metadata is copied onto each created TalosDockerMachine.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is copied onto each created TalosDockerMachine.
	// +optional
	Spec TalosDockerMachineSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosdockermachinetemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosDockerMachineTemplate is the template of the TalosDockerMachines that MachineDeployments, MachineSets, control planes and ClusterClasses create.
type TalosDockerMachineTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +optional
	Spec TalosDockerMachineTemplateSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// TalosDockerMachineTemplateList is a list of TalosDockerMachineTemplates.
type TalosDockerMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosDockerMachineTemplates.
	Items []TalosDockerMachineTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosDockerMachineTemplate{}, &TalosDockerMachineTemplateList{})
}
