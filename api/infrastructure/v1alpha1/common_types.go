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

// ClusterInitializationStatus carries the InfraCluster contract's initialization flags.
// +kubebuilder:validation:MinProperties=1
type ClusterInitializationStatus struct {
	// provisioned is true once the shared infrastructure of the cluster (network, load
	// balancer or endpoint) is ready and spec.controlPlaneEndpoint is set.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// MachineInitializationStatus carries the InfraMachine contract's initialization flags.
// +kubebuilder:validation:MinProperties=1
type MachineInitializationStatus struct {
	// provisioned is true once the node exists and spec.providerID is set.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}
