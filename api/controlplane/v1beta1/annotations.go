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

// Records the control plane keeps in annotations: decisions that must never be taken twice
// are written here before they are acted on, and annotations survive a restart of the
// manager and a clusterctl move (status does not).
const (
	// BootstrapMachineAnnotation, on the TalosControlPlane, names the Machine chosen to
	// bootstrap etcd. It is written before Bootstrap is called; no other Machine is ever
	// bootstrapped while that Machine exists (docs/controlplane.md has the rule).
	BootstrapMachineAnnotation = "controlplane.cluster.x-k8s.io/bootstrap-machine"

	// EtcdClusterAnnotation, on the TalosControlPlane, records that etcd was formed and the
	// control plane served (its API server answered): the member ID (hex) of the bootstrapped
	// node's member. From then on etcd is never bootstrapped again and the membership safety
	// checks hold even where status was lost (clusterctl move). The Talos API does not expose
	// etcd's cluster ID; this ID names the cluster.
	EtcdClusterAnnotation = "controlplane.cluster.x-k8s.io/etcd-cluster"

	// EtcdMemberIDAnnotation, on a control-plane Machine, is the etcd member ID (hex) its node
	// reported for itself once it was a member of the cluster's etcd. Members are removed by
	// this ID; node and member names are never matched.
	EtcdMemberIDAnnotation = "controlplane.cluster.x-k8s.io/etcd-member-id"

	// RemediationInProgressAnnotation, on the TalosControlPlane, records a remediation that
	// has deleted a Machine and not yet created its replacement (JSON: machine, timestamp,
	// retryCount).
	RemediationInProgressAnnotation = "controlplane.cluster.x-k8s.io/remediation-in-progress"

	// RemediationForAnnotation, on a control-plane Machine, says which remediation created it
	// (the same JSON), so that a replacement that fails again counts as a retry.
	RemediationForAnnotation = "controlplane.cluster.x-k8s.io/remediation-for"

	// InPlaceUpdateAnnotation, on a control-plane Machine or a worker Machine that Cluster
	// API's in-place update hooks update, records the in-place update of its node under way
	// (JSON: what it is updated from and to, and the step reached). It is written before the
	// node is touched, and removed once the node runs the new spec: a restarted manager
	// resumes the node at its step, and never updates a node twice or skips one.
	InPlaceUpdateAnnotation = "controlplane.cluster.x-k8s.io/in-place-update"

	// ManifestsSyncedAnnotation, on the TalosControlPlane, records the spec (version and
	// controlPlaneConfig hash) the bootstrap manifests were last synced into the workload
	// cluster for, after an in-place update.
	ManifestsSyncedAnnotation = "controlplane.cluster.x-k8s.io/manifests-synced"
)
