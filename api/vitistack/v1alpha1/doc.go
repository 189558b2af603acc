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

// Package v1alpha1 contains the vitistack.io/v1alpha1 KubernetesCluster API, in the shape the
// vitistack operators use: a whole Kubernetes cluster declared as one object, identity fields
// under spec.data and the cluster's size and version under spec.topology. Talon's control-plane
// manager, when enabled (docs/kubernetescluster.md), turns each one into a Cluster API Cluster
// of a Talon ClusterClass and reports the cluster's phase, versions and nodes back in its
// status.
//
// This package holds types, validation markers and generated deep copies only.
//
// +kubebuilder:object:generate=true
// +groupName=vitistack.io
package v1alpha1
