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
