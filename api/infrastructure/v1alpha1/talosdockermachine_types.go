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

// TalosDockerMachineSpec is the desired node of one Machine as a Docker container running the Talos image.
type TalosDockerMachineSpec struct {
	// providerID is the node's identity; the provider sets it on the workload Node too, so
	// that Cluster API links Machine and Node.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`
}

// TalosDockerMachineStatus is the observed state of the node.
type TalosDockerMachineStatus struct {
	// conditions describe the state of the node.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tracks the one-time milestones Cluster API reads.
	// +optional
	Initialization MachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// addresses are the node's addresses.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// failureDomain is the failure domain the node runs in.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// observedGeneration is the latest metadata.generation the controller has acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosdockermachines,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the node belongs to"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=".metadata.ownerReferences[?(@.kind==\"Machine\")].name",description="Machine that owns the node"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the node is ready"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Whether the node is provisioned"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",description="Provider ID of the node",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosDockerMachine is the node of one Machine as a Docker container running the Talos image.
type TalosDockerMachine struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired node.
	// +optional
	Spec TalosDockerMachineSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the node.
	// +optional
	Status TalosDockerMachineStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the TalosDockerMachine.
func (m *TalosDockerMachine) GetConditions() []metav1.Condition {
	return m.Status.Conditions
}

// SetConditions replaces the conditions of the TalosDockerMachine.
func (m *TalosDockerMachine) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// TalosDockerMachineList is a list of TalosDockerMachines.
type TalosDockerMachineList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosDockerMachines.
	Items []TalosDockerMachine `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosDockerMachine{}, &TalosDockerMachineList{})
}
