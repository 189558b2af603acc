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

import clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

// Condition types shared by the infrastructure kinds. Cluster API mirrors Ready onto the
// Cluster (for the cluster kinds) and the Machine (for the machine kinds).
const (
	// ReadyCondition is true when the infrastructure object is provisioned and healthy.
	ReadyCondition = clusterv1.ReadyCondition

	// PausedCondition is true while reconciliation is paused.
	PausedCondition = clusterv1.PausedCondition
)

// Conditions of TalosDockerCluster.
const (
	// NetworkReadyCondition is true when the cluster network exists.
	NetworkReadyCondition = "NetworkReady"
	// LoadBalancerAvailableCondition is true when the load balancer runs and forwards to
	// the control-plane nodes.
	LoadBalancerAvailableCondition = "LoadBalancerAvailable"
)

// Conditions of TalosDockerMachine.
const (
	// ContainerProvisionedCondition is true when the Machine's container (or simulated
	// node) exists and runs.
	ContainerProvisionedCondition = "ContainerProvisioned"
	// NodeProviderIDSetCondition is true when the workload Node carries spec.providerID,
	// which links it to the Machine.
	NodeProviderIDSetCondition = "NodeProviderIDSet"
)

// Reasons of the Docker infrastructure conditions.
const (
	// ProvisionedReason: the object exists as specified.
	ProvisionedReason = "Provisioned"
	// ProvisioningFailedReason: the runtime refused the object; the message says why.
	ProvisioningFailedReason = "ProvisioningFailed"
	// ConflictReason: something else already holds a subnet, port or name.
	ConflictReason = "Conflict"
	// WaitingForClusterInfrastructureReason: the cluster network and load balancer are not ready.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// WaitingForBootstrapDataReason: the Machine has no bootstrap data yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// WaitingForNodeReason: the workload Node has not registered yet.
	WaitingForNodeReason = "WaitingForNode"
	// DeletingReason: the object is being removed.
	DeletingReason = "Deleting"
)

// Conditions of the bare-metal kinds.
const (
	// BMCReachableCondition is true on a MetalHost whose BMC answers with its credentials.
	BMCReachableCondition = "BMCReachable"
	// HostProvisionedCondition is true on a TalosMetalMachine whose claimed MetalHost booted
	// Talos and fetched its config.
	HostProvisionedCondition = "HostProvisioned"
	// ControlPlaneEndpointSetCondition is true on a TalosMetalCluster with an endpoint.
	ControlPlaneEndpointSetCondition = "ControlPlaneEndpointSet"
)

// Reasons of the bare-metal conditions.
const (
	// BMCUnreachableReason: the BMC does not answer, refuses the credentials or the
	// credentials Secret is missing; the message names the host and the problem.
	BMCUnreachableReason = "BMCUnreachable"
	// NoBMCReason: the MetalHost has no spec.bmc.
	NoBMCReason = "NoBMC"
	// WaitingForHostReason: no Available MetalHost matches the Machine's hostSelector.
	WaitingForHostReason = "WaitingForHost"
	// BootAssetsUnavailableReason: the kernel or initramfs cannot be downloaded or verified.
	BootAssetsUnavailableReason = "BootAssetsUnavailable"
	// BootingReason: the host was power-cycled into a network boot and has not fetched its
	// config yet.
	BootingReason = "Booting"
	// VIPLinkUnknownReason: the Machine is a control-plane Machine of a cluster with a VIP,
	// and Talon cannot tell which link of its host holds it.
	VIPLinkUnknownReason = "VIPLinkUnknown"
	// HostNotBootingReason: the host did not network-boot within the boot timeout.
	HostNotBootingReason = "HostNotBooting"
	// PowerStateMismatchReason: the BMC reports a power state other than the one requested.
	PowerStateMismatchReason = "PowerStateMismatch"
	// WaitingForControlPlaneEndpointReason: spec.controlPlaneEndpoint is not set.
	WaitingForControlPlaneEndpointReason = "WaitingForControlPlaneEndpoint"
)
