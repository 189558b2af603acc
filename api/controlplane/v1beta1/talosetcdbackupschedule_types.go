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
)

// EtcdBackupScheduleLabel is on every TalosEtcdBackup a schedule made, naming it.
const EtcdBackupScheduleLabel = "controlplane.cluster.x-k8s.io/etcd-backup-schedule"

// PruneAnnotation records on a backup that its schedule's retention decided to delete it:
// its object first, then the backup. Set before either is deleted, it makes a prune that a
// restart interrupted finish, and never undo.
const PruneAnnotation = "controlplane.cluster.x-k8s.io/prune"

// TalosEtcdBackupScheduleSpec says when to back up a cluster's etcd, where, and how many
// backups to keep.
type TalosEtcdBackupScheduleSpec struct {
	// clusterName is the Cluster, in this namespace, whose etcd is backed up.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName,omitempty"`

	// schedule is a cron expression in UTC ("0 * * * *": every hour), or a descriptor
	// ("@hourly", "@daily", "@every 30m").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule,omitempty"`

	// storage is where the snapshots are written.
	// +required
	Storage EtcdBackupStorage `json:"storage,omitempty,omitzero"`

	// retention says which of this schedule's backups are kept; the others are deleted,
	// their objects first. Only objects this schedule wrote are ever deleted.
	// +optional
	Retention EtcdBackupRetention `json:"retention,omitempty,omitzero"`

	// suspend stops new backups; the ones taken stay.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// EtcdBackupRetention bounds the backups a schedule keeps. The newest successful backup is
// always kept.
type EtcdBackupRetention struct {
	// count is how many successful backups to keep, newest first; unset, 24.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Count *int32 `json:"count,omitempty"`

	// maxAge deletes successful backups older than this (e.g. 168h), whatever their count.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// TalosEtcdBackupScheduleStatus is what the schedule did.
type TalosEtcdBackupScheduleStatus struct {
	// lastScheduleTime is the last time a backup was due; recorded before the backup is
	// created, so that no time is backed up twice.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// nextScheduleTime is when the next backup is due.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// lastSuccessfulBackup is the newest backup of this schedule that succeeded.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	LastSuccessfulBackup string `json:"lastSuccessfulBackup,omitempty"`

	// lastSuccessTime is when it completed.
	// +optional
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`

	// lastFailedBackup is the newest backup of this schedule that failed.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	LastFailedBackup string `json:"lastFailedBackup,omitempty"`

	// lastFailureTime is when it failed.
	// +optional
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty"`

	// lastFailureMessage is why.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	LastFailureMessage string `json:"lastFailureMessage,omitempty"`

	// conditions: Ready (the schedule is valid and its last backup did not fail).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosetcdbackupschedules,shortName=tebs,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName",description="Cluster whose etcd is backed up"
// +kubebuilder:printcolumn:name="Schedule",type="string",JSONPath=".spec.schedule",description="When backups are due (UTC)"
// +kubebuilder:printcolumn:name="Suspend",type="boolean",JSONPath=".spec.suspend",description="Whether new backups are stopped"
// +kubebuilder:printcolumn:name="Last success",type="date",JSONPath=".status.lastSuccessTime",description="When the last backup succeeded"
// +kubebuilder:printcolumn:name="Next",type="date",JSONPath=".status.nextScheduleTime",description="When the next backup is due"
// +kubebuilder:printcolumn:name="Last failure",type="string",JSONPath=".status.lastFailureMessage",description="Why the last failed backup failed",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosEtcdBackupSchedule takes a TalosEtcdBackup of a cluster on a cron schedule and deletes
// the backups (and their objects) its retention does not keep.
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="a schedule's name has at most 52 characters: its backups are named <schedule>-<unix time> and labeled with it"
type TalosEtcdBackupSchedule struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says when, where and how many.
	// +required
	Spec TalosEtcdBackupScheduleSpec `json:"spec,omitempty,omitzero"`

	// status is what the schedule did.
	// +optional
	Status TalosEtcdBackupScheduleStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the schedule's conditions.
func (s *TalosEtcdBackupSchedule) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions sets the schedule's conditions.
func (s *TalosEtcdBackupSchedule) SetConditions(conditions []metav1.Condition) {
	s.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// TalosEtcdBackupScheduleList is a list of TalosEtcdBackupSchedules.
type TalosEtcdBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the schedules.
	Items []TalosEtcdBackupSchedule `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosEtcdBackupSchedule{}, &TalosEtcdBackupScheduleList{})
}
