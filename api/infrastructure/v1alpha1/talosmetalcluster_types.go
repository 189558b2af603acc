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

// TalosMetalClusterSpec is the desired shared infrastructure of a Talos cluster on bare metal.
type TalosMetalClusterSpec struct {
	// controlPlaneEndpoint is the address clients use to reach the cluster's API servers.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// controlPlaneVIP is a shared address Talos keeps on one control-plane node at a time (a
	// Layer 2 VIP, elected through etcd): the config Talon serves each control-plane host
	// holds it. Set controlPlaneEndpoint.host to it. The VIP moves to another control-plane
	// node within about a minute when its holder goes down; it needs the nodes on one Layer 2
	// segment.
	// +optional
	ControlPlaneVIP *ControlPlaneVIP `json:"controlPlaneVIP,omitempty"`
}

// ControlPlaneVIP is a Talos shared VIP for the control-plane endpoint.
type ControlPlaneVIP struct {
	// address is the VIP, an unused address on the control-plane hosts' network. It cannot
	// change: the cluster's certificates and kubeconfigs name it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="the VIP is an IP address"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the VIP cannot change: the cluster's certificates and kubeconfigs name it"
	Address string `json:"address,omitempty"`

	// link is the network link that holds the VIP on every control-plane host, e.g. eth0 or
	// the name of a MetalHost's static interface. When empty, each host holds it on its static
	// interface whose addresses' network contains the VIP.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Link string `json:"link,omitempty"`
}

// TalosMetalClusterStatus is the observed state of the cluster's shared infrastructure.
type TalosMetalClusterStatus struct {
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
// +kubebuilder:resource:path=talosmetalclusters,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the infrastructure belongs to"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the infrastructure is ready"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Whether the infrastructure is provisioned"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control-plane endpoint host"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosMetalCluster is the shared infrastructure of a Talos cluster on bare metal.
type TalosMetalCluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired infrastructure.
	// +optional
	Spec TalosMetalClusterSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the infrastructure.
	// +optional
	Status TalosMetalClusterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the TalosMetalCluster.
func (c *TalosMetalCluster) GetConditions() []metav1.Condition {
	return c.Status.Conditions
}

// SetConditions replaces the conditions of the TalosMetalCluster.
func (c *TalosMetalCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// TalosMetalClusterList is a list of TalosMetalClusters.
type TalosMetalClusterList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosMetalClusters.
	Items []TalosMetalCluster `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosMetalCluster{}, &TalosMetalClusterList{})
}
