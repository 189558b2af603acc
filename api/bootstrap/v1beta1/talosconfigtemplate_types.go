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
)

// TalosConfigTemplateSpec holds the template from which TalosConfigs are stamped.
type TalosConfigTemplateSpec struct {
	// template is the TalosConfig to stamp for each Machine.
	// +required
	Template TalosConfigTemplateResource `json:"template,omitempty,omitzero"`
}

// TalosConfigTemplateResource is the metadata and spec of the TalosConfigs to stamp.
type TalosConfigTemplateResource struct {
	// metadata is copied onto each stamped TalosConfig.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is copied onto each stamped TalosConfig.
	// +optional
	Spec TalosConfigSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosconfigtemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the template belongs to"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosConfigTemplate is the template of the TalosConfigs that MachineDeployments, MachinePools
// and ClusterClasses create.
type TalosConfigTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +optional
	Spec TalosConfigTemplateSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// TalosConfigTemplateList is a list of TalosConfigTemplates.
type TalosConfigTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosConfigTemplates.
	Items []TalosConfigTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosConfigTemplate{}, &TalosConfigTemplateList{})
}
