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
	// The provider sets it to the load balancer's address on the cluster network when it
	// is empty.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// network is the bridge network the cluster's containers share. By default the
	// provider creates one network per cluster, named after it, in a subnet Docker picks.
	// +optional
	Network DockerNetwork `json:"network,omitempty,omitzero"`

	// loadBalancer is the container in front of the control-plane nodes that serves the
	// control-plane endpoint.
	// +optional
	LoadBalancer DockerLoadBalancer `json:"loadBalancer,omitempty,omitzero"`

	// failureDomains are the failure domains Machines are spread over. Containers on one
	// host share its fate, so these are labels for testing placement, not isolation.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`
}

// DockerNetwork is the bridge network of a cluster.
// +kubebuilder:validation:MinProperties=1
type DockerNetwork struct {
	// name of the network; default talon-<namespace>-<cluster>.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name,omitempty"`

	// subnet is the network's IPv4 subnet in CIDR notation, e.g. 172.31.10.0/24; it must
	// not overlap another Docker network. Default: Docker picks a free one.
	// +optional
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=18
	Subnet string `json:"subnet,omitempty"`

	// mtu of the network; default: Docker's.
	// +optional
	// +kubebuilder:validation:Minimum=576
	// +kubebuilder:validation:Maximum=65535
	MTU int32 `json:"mtu,omitempty"`
}

// DockerLoadBalancer is the control-plane endpoint's container.
// +kubebuilder:validation:MinProperties=1
type DockerLoadBalancer struct {
	// image runs `talon lb`; default: the infrastructure manager's image, which contains it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// hostPort publishes the endpoint (6443) on the host at this port, for kubectl on
	// the host; default: a free port Docker picks.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	HostPort int32 `json:"hostPort,omitempty"`
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

	// network is the cluster network as it exists.
	// +optional
	Network DockerNetworkStatus `json:"network,omitempty,omitzero"`

	// loadBalancer is the load balancer as it exists.
	// +optional
	LoadBalancer DockerLoadBalancerStatus `json:"loadBalancer,omitempty,omitzero"`

	// observedGeneration is the latest metadata.generation the controller has acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// DockerNetworkStatus is the cluster network as it exists.
// +kubebuilder:validation:MinProperties=1
type DockerNetworkStatus struct {
	// name of the network.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name,omitempty"`

	// subnet of the network.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Subnet string `json:"subnet,omitempty"`
}

// DockerLoadBalancerStatus is the load balancer as it exists.
// +kubebuilder:validation:MinProperties=1
type DockerLoadBalancerStatus struct {
	// address of the load balancer on the cluster network.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Address string `json:"address,omitempty"`

	// hostPort is where the endpoint is published on the host (on every host address).
	// +optional
	HostPort int32 `json:"hostPort,omitempty"`

	// backends are the control-plane node addresses the load balancer forwards to.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=64
	Backends []string `json:"backends,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosdockerclusters,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the infrastructure belongs to"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the infrastructure is ready"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Whether the infrastructure is provisioned"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control-plane endpoint host"
// +kubebuilder:printcolumn:name="Host Port",type="integer",JSONPath=".status.loadBalancer.hostPort",description="Endpoint published on the host",priority=10
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
