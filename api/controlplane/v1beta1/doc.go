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

// Package v1beta1 contains the controlplane.cluster.x-k8s.io/v1beta1 API of Talon's
// control-plane provider: TalosControlPlane, which creates the control-plane Machines of a
// Talos cluster, bootstraps etcd once through the Talos API and keeps etcd quorum while it
// scales, rolls out, upgrades and remediates; and TalosControlPlaneTemplate for ClusterClass.
// The kinds implement the Cluster API v1beta2 ControlPlane contract.
//
// This package holds types, validation markers and generated deep copies only; it imports no
// controller-runtime and holds no reconciliation logic.
//
// +kubebuilder:object:generate=true
// +groupName=controlplane.cluster.x-k8s.io
package v1beta1
