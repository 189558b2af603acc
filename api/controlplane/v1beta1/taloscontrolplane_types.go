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

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// TalosControlPlaneSpec is the desired state of a Talos control plane.
type TalosControlPlaneSpec struct {
	// replicas is the number of control-plane Machines. It must be odd so that etcd keeps a
	// quorum through the loss of a minority; defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Replicas *int32 `json:"replicas,omitempty"`

	// version is the Kubernetes version of the control plane, e.g. v1.36.3.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`

	// machineTemplate describes the control-plane Machines.
	// +required
	MachineTemplate TalosControlPlaneMachineTemplate `json:"machineTemplate,omitempty,omitzero"`

	// controlPlaneConfig is the TalosConfig spec of every control-plane Machine.
	// +optional
	ControlPlaneConfig bootstrapv1.TalosConfigSpec `json:"controlPlaneConfig,omitempty,omitzero"`

	// rollout says when and how control-plane Machines are replaced.
	// +optional
	Rollout TalosControlPlaneRolloutSpec `json:"rollout,omitempty,omitzero"`

	// remediation says how control-plane Machines that a MachineHealthCheck marks unhealthy
	// are replaced.
	// +optional
	Remediation TalosControlPlaneRemediationSpec `json:"remediation,omitempty,omitzero"`

	// machineNaming says how new control-plane Machines (and their TalosConfigs and
	// infrastructure machines) are named.
	// +optional
	MachineNaming TalosControlPlaneMachineNamingSpec `json:"machineNaming,omitempty,omitzero"`

	// restoreFrom makes a new control plane bootstrap etcd from a backup instead of empty:
	// the first node receives the snapshot (checked against the SHA-256 the backup recorded)
	// through Talos' EtcdRecover and bootstraps with recovery. It matters only until etcd is
	// bootstrapped, and cannot be set on a control plane that already was.
	// +optional
	RestoreFrom *EtcdRestoreSource `json:"restoreFrom,omitempty"`
}

// EtcdRestoreSource names the backup a control plane's etcd starts from.
type EtcdRestoreSource struct {
	// backupName is a TalosEtcdBackup in this namespace that succeeded: its storage, object
	// key, encryption and checksum are used. It may be of another cluster (or of this
	// cluster's previous life).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	BackupName string `json:"backupName,omitempty"`
}

// TalosControlPlaneMachineNamingSpec says how control-plane Machines are named.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneMachineNamingSpec struct {
	// template is a Go template for the names of new Machines. It may use
	// {{ .cluster.name }} and {{ .talosControlPlane.name }}, and must use {{ .random }}
	// (five random characters) so that names are unique. The result must be a DNS label of
	// at most 63 characters: Nodes are named after their Machines. Unset, names are
	// "<TalosControlPlane name>-<random>". Changing it names new Machines only.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Template string `json:"template,omitempty"`
}

// TalosControlPlaneRemediationSpec says how unhealthy control-plane Machines are replaced:
// one at a time, never when removing the Machine's etcd member would break quorum, with the
// same retry semantics as Cluster API's KubeadmControlPlane.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneRemediationSpec struct {
	// maxRetry is how many times in a row the replacement of a remediated Machine may itself
	// be remediated (a replacement that turns unhealthy within minHealthyPeriodSeconds counts
	// as a retry). When it is reached, remediation stops and the Machine's OwnerRemediated
	// condition says so. Unset means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxRetry *int32 `json:"maxRetry,omitempty"`

	// retryPeriodSeconds is how long to wait after a remediation before remediating its
	// replacement again. 0 (the default) retries at once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RetryPeriodSeconds *int32 `json:"retryPeriodSeconds,omitempty"`

	// minHealthyPeriodSeconds is how long a replacement must stay healthy for its own later
	// remediation to start a new series instead of counting as a retry; 3600 by default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinHealthyPeriodSeconds *int32 `json:"minHealthyPeriodSeconds,omitempty"`
}

// DefaultMinHealthyPeriodSeconds is remediation.minHealthyPeriodSeconds when unset.
const DefaultMinHealthyPeriodSeconds = 3600

// TalosControlPlaneMachineTemplate describes the control-plane Machines.
type TalosControlPlaneMachineTemplate struct {
	// metadata is applied to every control-plane Machine; changes propagate to existing
	// Machines without a rollout.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the part of the Machine spec the control plane sets.
	// +required
	Spec TalosControlPlaneMachineTemplateSpec `json:"spec,omitempty,omitzero"`
}

// TalosControlPlaneMachineTemplateSpec is the part of a Machine spec the control plane sets.
type TalosControlPlaneMachineTemplateSpec struct {
	// infrastructureRef is the infrastructure machine template cloned for every Machine.
	// +required
	InfrastructureRef clusterv1.ContractVersionedObjectReference `json:"infrastructureRef,omitempty,omitzero"`

	// deletion holds the timeouts applied while a control-plane Machine is deleted; changes
	// propagate to existing Machines without a rollout.
	// +optional
	Deletion TalosControlPlaneMachineTemplateDeletionSpec `json:"deletion,omitempty,omitzero"`

	// readinessGates are extra conditions that must be true before a Machine is Ready.
	// +optional
	// +listType=map
	// +listMapKey=conditionType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	ReadinessGates []clusterv1.MachineReadinessGate `json:"readinessGates,omitempty"`

	// taints are the Node taints Cluster API manages on control-plane Nodes.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Taints []clusterv1.MachineTaint `json:"taints,omitempty"`
}

// TalosControlPlaneMachineTemplateDeletionSpec holds the deletion timeouts of control-plane Machines.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneMachineTemplateDeletionSpec struct {
	// nodeDrainTimeoutSeconds bounds how long a Node is drained; 0 means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDrainTimeoutSeconds *int32 `json:"nodeDrainTimeoutSeconds,omitempty"`

	// nodeVolumeDetachTimeoutSeconds bounds how long volumes may take to detach; 0 means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeVolumeDetachTimeoutSeconds *int32 `json:"nodeVolumeDetachTimeoutSeconds,omitempty"`

	// nodeDeletionTimeoutSeconds bounds how long deleting the Node is retried; 0 means forever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDeletionTimeoutSeconds *int32 `json:"nodeDeletionTimeoutSeconds,omitempty"`
}

// TalosControlPlaneRolloutSpec says when and how control-plane Machines are replaced.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneRolloutSpec struct {
	// after asks for every Machine created before this time to be replaced.
	// +optional
	After metav1.Time `json:"after,omitempty,omitzero"`

	// strategy is how Machines are replaced.
	// +optional
	Strategy TalosControlPlaneRolloutStrategy `json:"strategy,omitempty,omitzero"`
}

// TalosControlPlaneRolloutStrategyType names a rollout strategy.
// +kubebuilder:validation:Enum=RollingUpdate;OnDelete;InPlace
type TalosControlPlaneRolloutStrategyType string

const (
	// RollingUpdateStrategyType replaces outdated Machines one at a time.
	RollingUpdateStrategyType TalosControlPlaneRolloutStrategyType = "RollingUpdate"

	// OnDeleteStrategyType replaces an outdated Machine only after a person deletes it.
	OnDeleteStrategyType TalosControlPlaneRolloutStrategyType = "OnDelete"

	// InPlaceStrategyType updates outdated Machines in place, one node at a time, through the
	// Talos API: a new Kubernetes version, Talos version or controlPlaneConfig is applied to
	// the running node (rebooting it only when Talos needs a reboot for the change). A new
	// infrastructure template or rollout.after still replaces Machines, as RollingUpdate does.
	InPlaceStrategyType TalosControlPlaneRolloutStrategyType = "InPlace"
)

// TalosControlPlaneRolloutStrategy is how Machines are replaced.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneRolloutStrategy struct {
	// type is RollingUpdate (the default), OnDelete or InPlace.
	// +optional
	Type TalosControlPlaneRolloutStrategyType `json:"type,omitempty"`

	// rollingUpdate tunes the RollingUpdate strategy.
	// +optional
	RollingUpdate TalosControlPlaneRollingUpdate `json:"rollingUpdate,omitempty,omitzero"`
}

// TalosControlPlaneRollingUpdate tunes the RollingUpdate strategy.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneRollingUpdate struct {
	// maxSurge is how many Machines may exist above replicas during a rollout: 1 (the default)
	// creates the new Machine before removing the old one; 0 removes first, for environments
	// without spare capacity.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	MaxSurge *int32 `json:"maxSurge,omitempty"`
}

// TalosControlPlaneStatus is the observed state of a Talos control plane, as the Cluster API
// v1beta2 ControlPlane contract defines it.
type TalosControlPlaneStatus struct {
	// conditions describe the state of the control plane.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tracks the one-time milestones Cluster API reads.
	// +optional
	Initialization TalosControlPlaneInitializationStatus `json:"initialization,omitempty,omitzero"`

	// selector is the label selector of the control-plane Machines, for the scale subresource.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Selector string `json:"selector,omitempty"`

	// replicas is the number of control-plane Machines.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of control-plane Machines whose Ready condition is true.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// availableReplicas is the number of control-plane Machines whose Available condition is true.
	// +optional
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`

	// upToDateReplicas is the number of control-plane Machines whose UpToDate condition is true.
	// +optional
	UpToDateReplicas *int32 `json:"upToDateReplicas,omitempty"`

	// versions lists the Kubernetes versions of the control-plane Machines with how many run
	// each, oldest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Versions []clusterv1.StatusVersion `json:"versions,omitempty"`

	// lastRemediation is the last remediation of a Machine this control plane started.
	// +optional
	LastRemediation TalosControlPlaneLastRemediationStatus `json:"lastRemediation,omitempty,omitzero"`

	// observedGeneration is the latest metadata.generation the controller has acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// TalosControlPlaneLastRemediationStatus describes the last remediation started.
type TalosControlPlaneLastRemediationStatus struct {
	// machine is the name of the Machine that was deleted to be replaced.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Machine string `json:"machine,omitempty"`

	// time is when the remediation started.
	// +required
	Time metav1.Time `json:"time,omitempty,omitzero"`

	// retryCount is how many remediations in a row this one follows (0 for the first).
	// +required
	// +kubebuilder:validation:Minimum=0
	RetryCount *int32 `json:"retryCount,omitempty"`
}

// TalosControlPlaneInitializationStatus carries the contract's initialization flags.
// +kubebuilder:validation:MinProperties=1
type TalosControlPlaneInitializationStatus struct {
	// controlPlaneInitialized is true once etcd is bootstrapped and the workload API server
	// accepts requests.
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=taloscontrolplanes,shortName=tcp,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the control plane belongs to"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether the control plane passes its availability checks"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas",description="Desired number of Machines"
// +kubebuilder:printcolumn:name="Current",type="integer",JSONPath=".status.replicas",description="Number of Machines"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas",description="Machines whose Ready condition is true"
// +kubebuilder:printcolumn:name="Available",type="integer",JSONPath=".status.availableReplicas",description="Machines whose Available condition is true"
// +kubebuilder:printcolumn:name="Up-to-date",type="integer",JSONPath=".status.upToDateReplicas",description="Machines whose UpToDate condition is true"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Initialized",type="boolean",JSONPath=".status.initialization.controlPlaneInitialized",description="Whether the API server accepts requests"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".spec.version",description="Kubernetes version of the control plane"

// TalosControlPlane manages the control-plane Machines of a Talos cluster.
type TalosControlPlane struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired control plane.
	// +required
	Spec TalosControlPlaneSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the control plane.
	// +optional
	Status TalosControlPlaneStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the TalosControlPlane.
func (c *TalosControlPlane) GetConditions() []metav1.Condition {
	return c.Status.Conditions
}

// SetConditions replaces the conditions of the TalosControlPlane.
func (c *TalosControlPlane) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// TalosControlPlaneList is a list of TalosControlPlanes.
type TalosControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosControlPlanes.
	Items []TalosControlPlane `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosControlPlane{}, &TalosControlPlaneList{})
}
