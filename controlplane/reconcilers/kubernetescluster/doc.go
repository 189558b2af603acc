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

// Package kubernetescluster holds the controller that builds vitistack.io KubernetesClusters
// as Cluster API Clusters of a Talon ClusterClass (controlplane/pkg/kubernetescluster), runs
// in the control-plane manager when --kubernetes-cluster-class is set, and reports each
// cluster's phase, nodes and versions back into the KubernetesCluster's status.
package kubernetescluster
