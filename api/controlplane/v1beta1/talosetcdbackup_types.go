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

// TalosEtcdBackupSpec says which cluster's etcd to back up, and where to.
type TalosEtcdBackupSpec struct {
	// clusterName is the Cluster, in this namespace, whose etcd is backed up. Its control
	// plane must be a TalosControlPlane.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterName is immutable: a backup is of one cluster"
	ClusterName string `json:"clusterName,omitempty"`

	// storage is where the snapshot is written.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storage is immutable: create another backup to write elsewhere"
	Storage EtcdBackupStorage `json:"storage,omitempty,omitzero"`
}

// EtcdBackupStorage is an S3-compatible bucket that etcd snapshots are written to.
type EtcdBackupStorage struct {
	// s3 is the bucket.
	// +required
	S3 S3Storage `json:"s3,omitempty,omitzero"`

	// encryption, when set, encrypts each snapshot on the way to the bucket with a key only
	// this cluster's operators hold: the object is useless without it.
	// +optional
	Encryption *EtcdBackupEncryption `json:"encryption,omitempty"`
}

// S3Storage is a bucket of an S3-compatible object store (AWS S3, MinIO, Ceph RGW, Versity,
// Garage, ...).
type S3Storage struct {
	// endpoint is the store's URL, e.g. https://s3.eu-west-1.amazonaws.com or
	// http://minio.backup.svc:9000. http:// is allowed for stores inside the management
	// cluster's network only; credentials travel in clear over it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/]+/?$`
	Endpoint string `json:"endpoint,omitempty"`

	// bucket is the bucket's name. It must exist: Talon never creates buckets.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	Bucket string `json:"bucket,omitempty"`

	// prefix is prepended to every object key, e.g. "prod/" (a trailing slash is added when
	// missing). Unset, keys start with the namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Prefix string `json:"prefix,omitempty"`

	// region is the bucket's region, when the store needs one; unset, us-east-1.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`

	// credentialsSecretName is a Secret in this namespace with the keys accessKeyID and
	// secretAccessKey (and sessionToken, optionally).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`

	// caBundle is the PEM bundle that the store's certificate must chain to, for a store
	// with a private CA; unset, the system's roots.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CABundle string `json:"caBundle,omitempty"`

	// insecureSkipTLSVerify accepts any certificate from the store. For tests only: anyone
	// on the path can read and replace the snapshots.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
}

// EtcdBackupEncryption says how snapshots are encrypted.
type EtcdBackupEncryption struct {
	// keySecretName is a Secret in this namespace holding the key snapshots are encrypted
	// with (age: ChaCha20-Poly1305 in 64 KiB chunks): "identity", an age X25519 identity
	// (AGE-SECRET-KEY-1..., from age-keygen), or else "passphrase". Keep a copy outside the
	// management cluster: without it no backup restores.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	KeySecretName string `json:"keySecretName,omitempty"`
}

// EtcdBackupPhase is where a backup is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type EtcdBackupPhase string

const (
	// EtcdBackupPending is a backup not started yet: its cluster is not ready for it.
	EtcdBackupPending EtcdBackupPhase = "Pending"
	// EtcdBackupRunning is a snapshot being streamed to the store.
	EtcdBackupRunning EtcdBackupPhase = "Running"
	// EtcdBackupSucceeded is a complete snapshot in the store, with its checksum.
	EtcdBackupSucceeded EtcdBackupPhase = "Succeeded"
	// EtcdBackupFailed is a backup that will not be retried; its condition says why.
	EtcdBackupFailed EtcdBackupPhase = "Failed"
)

// TalosEtcdBackupStatus is what became of a backup.
type TalosEtcdBackupStatus struct {
	// phase is Pending, Running, Succeeded or Failed.
	// +optional
	Phase EtcdBackupPhase `json:"phase,omitempty"`

	// key is the object's key in the bucket, chosen (and recorded) before the upload starts.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key,omitempty"`

	// size is the object's size in bytes (encrypted, when encryption is on).
	// +optional
	Size *int64 `json:"size,omitempty"`

	// sha256 is the hex SHA-256 of the etcd snapshot (before encryption): a restore checks it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256,omitempty"`

	// encrypted says whether the object is encrypted.
	// +optional
	Encrypted bool `json:"encrypted,omitempty"`

	// member is the node whose etcd member the snapshot was taken from.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Member string `json:"member,omitempty"`

	// kubernetesVersion is the control plane's Kubernetes version when it was taken.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// talosVersion is the Talos version of the node it was taken from.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	TalosVersion string `json:"talosVersion,omitempty"`

	// startTime is when the upload started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the backup succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// attempts is how many uploads were started; a manager restarted in the middle of one
	// starts another under the same key.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// conditions: Ready (the backup is complete in the store), with the reason a backup
	// waits or failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosetcdbackups,shortName=teb,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName",description="Cluster whose etcd is backed up"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",description="Pending, Running, Succeeded or Failed"
// +kubebuilder:printcolumn:name="Size",type="integer",JSONPath=".status.size",description="Bytes in the store"
// +kubebuilder:printcolumn:name="Member",type="string",JSONPath=".status.member",description="Node whose etcd member was snapshotted",priority=10
// +kubebuilder:printcolumn:name="Key",type="string",JSONPath=".status.key",description="Object key in the bucket",priority=10
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Why it is not ready",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosEtcdBackup is one snapshot of a cluster's etcd, taken once through the Talos API and
// streamed to an S3-compatible bucket. Deleting it leaves the object in the bucket.
type TalosEtcdBackup struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what to back up and where.
	// +required
	Spec TalosEtcdBackupSpec `json:"spec,omitempty,omitzero"`

	// status is what became of it.
	// +optional
	Status TalosEtcdBackupStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the backup's conditions.
func (b *TalosEtcdBackup) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions sets the backup's conditions.
func (b *TalosEtcdBackup) SetConditions(conditions []metav1.Condition) {
	b.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// TalosEtcdBackupList is a list of TalosEtcdBackups.
type TalosEtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the backups.
	Items []TalosEtcdBackup `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosEtcdBackup{}, &TalosEtcdBackupList{})
}
