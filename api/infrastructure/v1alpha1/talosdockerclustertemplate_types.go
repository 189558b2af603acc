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

// TalosDockerClusterTemplateSpec holds the template from which TalosDockerClusters are created.
type TalosDockerClusterTemplateSpec struct {
	// template is the TalosDockerCluster to create.
	// +required
	Template TalosDockerClusterTemplateResource `json:"template,omitempty,omitzero"`
}

// TalosDockerClusterTemplateResource is the metadata and spec of the TalosDockerClusters to create.
type TalosDockerClusterTemplateResource struct {
	// metadata is copied onto each created TalosDockerCluster.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is copied onto each created TalosDockerCluster.
	// +optional
	Spec TalosDockerClusterSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosdockerclustertemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosDockerClusterTemplate is the template of the TalosDockerClusters that ClusterClasses create.
type TalosDockerClusterTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +optional
	Spec TalosDockerClusterTemplateSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// TalosDockerClusterTemplateList is a list of TalosDockerClusterTemplates.
type TalosDockerClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosDockerClusterTemplates.
	Items []TalosDockerClusterTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosDockerClusterTemplate{}, &TalosDockerClusterTemplateList{})
}
