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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetalHostSpec describes one bare-metal server in the inventory.
//
// The foundation defines what identifies a host; BMC access, firmware and disk hints arrive
// with the bare-metal provider.
type MetalHostSpec struct {
	// bootMACAddresses are the MAC addresses of the network interfaces the host boots from.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`
	BootMACAddresses []string `json:"bootMACAddresses,omitempty"`
}

// MetalHostState is where a host stands in its lifecycle.
// +kubebuilder:validation:Enum=Registering;Available;Provisioning;Provisioned;Deprovisioning;Error
type MetalHostState string

// The lifecycle states of a MetalHost.
const (
	// MetalHostStateRegistering: the host's BMC is being checked.
	MetalHostStateRegistering MetalHostState = "Registering"
	// MetalHostStateAvailable: the host is wiped and free to be claimed.
	MetalHostStateAvailable MetalHostState = "Available"
	// MetalHostStateProvisioning: a TalosMetalMachine claimed the host and is booting it.
	MetalHostStateProvisioning MetalHostState = "Provisioning"
	// MetalHostStateProvisioned: the host runs as a node of the claiming Machine's cluster.
	MetalHostStateProvisioned MetalHostState = "Provisioned"
	// MetalHostStateDeprovisioning: the host is being reset and wiped.
	MetalHostStateDeprovisioning MetalHostState = "Deprovisioning"
	// MetalHostStateError: the host needs a person; status.lastError says why.
	MetalHostStateError MetalHostState = "Error"
)

// MetalHostStatus is the observed state of a bare-metal server.
type MetalHostStatus struct {
	// conditions describe the state of the host.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// state is where the host stands in its lifecycle.
	// +optional
	State MetalHostState `json:"state,omitempty"`

	// consumerRef is the TalosMetalMachine that claimed the host.
	// +optional
	ConsumerRef *corev1.ObjectReference `json:"consumerRef,omitempty"`

	// observedGeneration is the latest metadata.generation the controller has acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=metalhosts,shortName=mh,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.state",description="Lifecycle state of the host"
// +kubebuilder:printcolumn:name="Consumer",type="string",JSONPath=".status.consumerRef.name",description="TalosMetalMachine that claimed the host"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// MetalHost is one bare-metal server in Talon's inventory, claimed by TalosMetalMachines.
type MetalHost struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the host.
	// +required
	Spec MetalHostSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the host.
	// +optional
	Status MetalHostStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the MetalHost.
func (h *MetalHost) GetConditions() []metav1.Condition {
	return h.Status.Conditions
}

// SetConditions replaces the conditions of the MetalHost.
func (h *MetalHost) SetConditions(conditions []metav1.Condition) {
	h.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// MetalHostList is a list of MetalHosts.
type MetalHostList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the MetalHosts.
	Items []MetalHost `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &MetalHost{}, &MetalHostList{})
}
