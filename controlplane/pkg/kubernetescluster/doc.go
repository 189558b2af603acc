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

// Package kubernetescluster turns a vitistack.io KubernetesCluster into the Cluster API
// Cluster that builds it: a Cluster of a Talon ClusterClass whose topology holds the control
// plane's size, a MachineDeployment per worker pool and the resolved Kubernetes version. The
// same code serves the control-plane manager's controller and "talon kubernetescluster
// render", so a reviewed manifest is what the controller applies.
package kubernetescluster
