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

package v1beta1

import clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

// Condition types of a TalosControlPlane. Available is mirrored onto the Cluster by Cluster API.
const (
	// AvailableCondition is true when etcd has quorum and the API server answers.
	AvailableCondition = clusterv1.AvailableCondition

	// InitializedCondition is true once etcd is bootstrapped and the API server has answered.
	InitializedCondition = "Initialized"

	// EtcdClusterHealthyCondition is true when every etcd member is healthy and none is a learner.
	EtcdClusterHealthyCondition = "EtcdClusterHealthy"

	// ControlPlaneComponentsHealthyCondition is true when every control-plane component is healthy.
	ControlPlaneComponentsHealthyCondition = "ControlPlaneComponentsHealthy"

	// MachinesReadyCondition aggregates the Ready conditions of the control-plane Machines.
	MachinesReadyCondition = clusterv1.MachinesReadyCondition

	// MachinesUpToDateCondition aggregates the UpToDate conditions of the control-plane Machines.
	MachinesUpToDateCondition = clusterv1.MachinesUpToDateCondition

	// RollingOutCondition is true while outdated Machines are being replaced.
	RollingOutCondition = clusterv1.RollingOutCondition

	// ScalingUpCondition is true while Machines are being added.
	ScalingUpCondition = clusterv1.ScalingUpCondition

	// ScalingDownCondition is true while Machines are being removed.
	ScalingDownCondition = clusterv1.ScalingDownCondition

	// DeletingCondition is true while the control plane is being deleted.
	DeletingCondition = clusterv1.DeletingCondition

	// PausedCondition is true while reconciliation is paused.
	PausedCondition = clusterv1.PausedCondition
)

// Conditions the control plane sets on each of its Machines, with the names Cluster API's
// KubeadmControlPlane uses, so that MachineHealthChecks and dashboards written for it work.
// UpToDate (clusterv1.MachineUpToDateCondition) is set too, as the contract asks.
const (
	// MachineAPIServerPodHealthyCondition is true when the mirror Pod of the node's
	// kube-apiserver is Ready.
	MachineAPIServerPodHealthyCondition = "APIServerPodHealthy"

	// MachineControllerManagerPodHealthyCondition is true when the mirror Pod of the node's
	// kube-controller-manager is Ready.
	MachineControllerManagerPodHealthyCondition = "ControllerManagerPodHealthy"

	// MachineSchedulerPodHealthyCondition is true when the mirror Pod of the node's
	// kube-scheduler is Ready.
	MachineSchedulerPodHealthyCondition = "SchedulerPodHealthy"

	// MachineEtcdMemberHealthyCondition is true when the node's etcd member, identified by the
	// member ID recorded on the Machine, is a voting member of the cluster's etcd that answers
	// without errors and knows the leader.
	MachineEtcdMemberHealthyCondition = "EtcdMemberHealthy"
)

// Reasons of the Machine conditions above and of OwnerRemediated.
const (
	// PodRunningReason: the mirror Pod is Ready.
	PodRunningReason = "PodRunning"
	// PodNotReadyReason: the mirror Pod exists and is not Ready.
	PodNotReadyReason = "PodNotReady"
	// PodDoesNotExistReason: the node has registered but has no mirror Pod of the component.
	PodDoesNotExistReason = "PodDoesNotExist"
	// PodInspectionFailedReason: the workload cluster could not be read, or the node has not
	// registered yet.
	PodInspectionFailedReason = "PodInspectionFailed"

	// EtcdMemberHealthyReason: the member is a healthy voter.
	EtcdMemberHealthyReason = "EtcdMemberHealthy"
	// EtcdMemberUnhealthyReason: the member is missing, a learner, unreachable or reports errors.
	EtcdMemberUnhealthyReason = "EtcdMemberUnhealthy"
	// EtcdMemberInspectionFailedReason: etcd could not be read.
	EtcdMemberInspectionFailedReason = "EtcdMemberInspectionFailed"

	// RemediationDeferredReason: the Machine will be remediated once the message's
	// precondition holds (another change in progress, a retry period).
	RemediationDeferredReason = "RemediationDeferred"
	// CannotBeRemediatedReason: remediating the Machine now would break etcd quorum, leave no
	// control plane, or exceed remediation.maxRetry; the message says which.
	CannotBeRemediatedReason = "CannotBeRemediated"
	// RemediationMachineDeletingReason: the Machine is being deleted to be replaced.
	RemediationMachineDeletingReason = "MachineDeleting"
)
