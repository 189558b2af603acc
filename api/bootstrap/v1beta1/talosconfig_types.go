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
)

// TalosConfigSpec describes the Talos machine config to render for one Machine.
//
// The foundation defines the contract surface; the rendering fields (generateType,
// talosVersion, configPatches, strategicPatches, hostname, data) arrive with the bootstrap
// provider's reconciler.
type TalosConfigSpec struct{}

// TalosConfigStatus is the observed state of a TalosConfig, as the Cluster API v1beta2
// BootstrapConfig contract defines it.
type TalosConfigStatus struct {
	// conditions describe the state of the TalosConfig; the Ready condition is mirrored onto
	// the owning Machine by Cluster API.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tracks the one-time milestones of the TalosConfig that Cluster API reads.
	// +optional
	Initialization TalosConfigInitializationStatus `json:"initialization,omitempty,omitzero"`

	// dataSecretName is the name of the Secret that holds the rendered machine config under
	// the key "value".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DataSecretName *string `json:"dataSecretName,omitempty"`

	// observedGeneration is the latest metadata.generation the controller has acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// TalosConfigInitializationStatus carries the contract's initialization flags.
// +kubebuilder:validation:MinProperties=1
type TalosConfigInitializationStatus struct {
	// dataSecretCreated is true once the bootstrap data Secret named in
	// status.dataSecretName exists and holds a validated machine config.
	// +optional
	DataSecretCreated *bool `json:"dataSecretCreated,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosconfigs,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the config belongs to"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the machine config is rendered and stored"
// +kubebuilder:printcolumn:name="Data Secret",type="string",JSONPath=".status.dataSecretName",description="Secret that holds the machine config",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosConfig renders the Talos machine config of one Machine into its bootstrap data Secret.
type TalosConfig struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired machine config.
	// +optional
	Spec TalosConfigSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the TalosConfig.
	// +optional
	Status TalosConfigStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the TalosConfig.
func (c *TalosConfig) GetConditions() []metav1.Condition {
	return c.Status.Conditions
}

// SetConditions replaces the conditions of the TalosConfig.
func (c *TalosConfig) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// TalosConfigList is a list of TalosConfigs.
type TalosConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosConfigs.
	Items []TalosConfig `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosConfig{}, &TalosConfigList{})
}
