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

	// image is the Talos image the container runs; default
	// ghcr.io/siderolabs/talos:<the Talos version Talon renders configs for>.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// cpus limits the container's CPUs, as a quantity such as "2" or "1500m"; default: unlimited.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	CPUs string `json:"cpus,omitempty"`

	// memory limits the container's memory, as a quantity such as "2Gi"; default: unlimited.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Memory string `json:"memory,omitempty"`

	// extraMounts are host paths mounted into the container.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ExtraMounts []DockerMount `json:"extraMounts,omitempty"`

	// extraPortMappings publish container ports on the host.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ExtraPortMappings []DockerPortMapping `json:"extraPortMappings,omitempty"`

	// extraEnv adds environment variables to the container (PLATFORM, TALOSSKU and
	// USERDATA are the provider's).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	ExtraEnv []DockerEnvVar `json:"extraEnv,omitempty"`
}

// DockerMount mounts a host path into a container.
type DockerMount struct {
	// hostPath is the absolute path on the Docker host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	HostPath string `json:"hostPath,omitempty"`

	// containerPath is the absolute path in the container.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	ContainerPath string `json:"containerPath,omitempty"`

	// readOnly mounts the path read-only.
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`
}

// DockerPortMapping publishes a container port on the host.
type DockerPortMapping struct {
	// containerPort is the port in the container.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort int32 `json:"containerPort,omitempty"`

	// hostPort is the port on the host; it must be free.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	HostPort int32 `json:"hostPort,omitempty"`

	// protocol is TCP (default) or UDP.
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol string `json:"protocol,omitempty"`

	// hostIP is the host address to bind; default: all.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	HostIP string `json:"hostIP,omitempty"`
}

// DockerEnvVar is an environment variable of a container.
type DockerEnvVar struct {
	// name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// value of the variable.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Value string `json:"value,omitempty"`
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
