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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // CABPT's conditions are Cluster API v1beta1's
)

// TalosConfigSpec is CABPT's spec of one Machine's Talos config.
type TalosConfigSpec struct {
	// talosVersion is the Talos version whose config contract the config follows (e.g. v1.13).
	// +optional
	TalosVersion string `json:"talosVersion,omitempty"`

	// generateType is init, controlplane, join (a worker) or none (data holds the config).
	GenerateType string `json:"generateType"`

	// data is a complete machine config, used as it is when generateType is none.
	// +optional
	Data string `json:"data,omitempty"`

	// configPatches are RFC 6902 operations on the generated config.
	// +optional
	ConfigPatches []ConfigPatches `json:"configPatches,omitempty"`

	// strategicPatches are Talos strategic merge patches on the generated config.
	// +optional
	StrategicPatches []string `json:"strategicPatches,omitempty"`

	// hostname says where the node's hostname comes from.
	// +optional
	Hostname HostnameSpec `json:"hostname,omitempty,omitzero"`
}

// ConfigPatches is one RFC 6902 operation.
type ConfigPatches struct {
	// op is the operation (add, remove, replace, ...).
	Op string `json:"op"`
	// path is the JSON pointer the operation applies to.
	Path string `json:"path"`
	// value is the operation's value.
	// +optional
	Value apiextensionsv1.JSON `json:"value,omitempty"`
}

// HostnameSpec says where a node's hostname comes from.
type HostnameSpec struct {
	// source is MachineName or InfrastructureName; empty leaves the hostname to Talos.
	// +optional
	Source string `json:"source,omitempty"`
}

// TalosConfigStatus is CABPT's status of a TalosConfig.
type TalosConfigStatus struct {
	// ready is true once the bootstrap data Secret exists.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// dataSecretName is the Secret that holds the machine config.
	// +optional
	DataSecretName *string `json:"dataSecretName,omitempty"`

	// talosConfig is a talosconfig for the cluster (deprecated by CABPT: the
	// <cluster>-talosconfig Secret holds it).
	// +optional
	TalosConfig string `json:"talosConfig,omitempty"`

	// failureReason is a terminal problem's short reason.
	// +optional
	FailureReason string `json:"failureReason,omitempty"`

	// failureMessage is a terminal problem's explanation.
	// +optional
	FailureMessage string `json:"failureMessage,omitempty"`

	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Cluster API v1beta1 conditions.
	// +optional
	Conditions clusterv1beta1.Conditions `json:"conditions,omitempty"`
}

// TalosConfig is CABPT's TalosConfig.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosconfigs,scope=Namespaced,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:deprecatedversion:warning="bootstrap.cluster.x-k8s.io/v1alpha3 is Sidero's CABPT API, served for clusters Talon took over; use v1beta1"
type TalosConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TalosConfigSpec   `json:"spec,omitempty"`
	Status TalosConfigStatus `json:"status,omitempty"`
}

// TalosConfigList is a list of TalosConfigs.
//
// +kubebuilder:object:root=true
type TalosConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TalosConfig `json:"items"`
}

// TalosConfigTemplateSpec is CABPT's template spec.
type TalosConfigTemplateSpec struct {
	// template is the TalosConfig stamped for each Machine.
	Template TalosConfigTemplateResource `json:"template"`
}

// TalosConfigTemplateResource is the templated TalosConfig.
type TalosConfigTemplateResource struct {
	// spec is the TalosConfig's spec.
	// +optional
	Spec TalosConfigSpec `json:"spec,omitempty"`
}

// TalosConfigTemplate is CABPT's TalosConfigTemplate.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosconfigtemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:deprecatedversion:warning="bootstrap.cluster.x-k8s.io/v1alpha3 is Sidero's CABPT API, served for clusters Talon took over; use v1beta1"
type TalosConfigTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TalosConfigTemplateSpec `json:"spec,omitempty"`
}

// TalosConfigTemplateList is a list of TalosConfigTemplates.
//
// +kubebuilder:object:root=true
type TalosConfigTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TalosConfigTemplate `json:"items"`
}
