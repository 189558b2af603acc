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

// TalosDockerClusterSpec is the desired shared infrastructure of a Talos cluster whose nodes are Docker containers.
type TalosDockerClusterSpec struct {
	// controlPlaneEndpoint is the address clients use to reach the cluster's API servers.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`
}

// TalosDockerClusterStatus is the observed state of the cluster's shared infrastructure.
type TalosDockerClusterStatus struct {
	// conditions describe the state of the shared infrastructure.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tracks the one-time milestones Cluster API reads.
	// +optional
	Initialization ClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// failureDomains are the failure domains Machines can be spread over.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// observedGeneration is the latest metadata.generation the controller has acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosdockerclusters,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the infrastructure belongs to"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the infrastructure is ready"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Whether the infrastructure is provisioned"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control-plane endpoint host"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosDockerCluster is the shared infrastructure of a Talos cluster whose nodes are Docker containers.
type TalosDockerCluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired infrastructure.
	// +optional
	Spec TalosDockerClusterSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the infrastructure.
	// +optional
	Status TalosDockerClusterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the TalosDockerCluster.
func (c *TalosDockerCluster) GetConditions() []metav1.Condition {
	return c.Status.Conditions
}

// SetConditions replaces the conditions of the TalosDockerCluster.
func (c *TalosDockerCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// TalosDockerClusterList is a list of TalosDockerClusters.
type TalosDockerClusterList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosDockerClusters.
	Items []TalosDockerCluster `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosDockerCluster{}, &TalosDockerClusterList{})
}
