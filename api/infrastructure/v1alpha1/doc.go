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

// Package v1alpha1 contains the infrastructure.cluster.x-k8s.io/v1alpha1 API of Talon's
// infrastructure provider: Talos nodes as Docker containers (TalosDockerCluster,
// TalosDockerMachine and their templates) and on PXE-booted bare metal (TalosMetalCluster,
// TalosMetalMachine, their templates, and the MetalHost inventory). The cluster and machine
// kinds implement the Cluster API v1beta2 InfraCluster and InfraMachine contracts.
//
// This package holds types, validation markers and generated deep copies only; it imports no
// controller-runtime and holds no reconciliation logic.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
