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

// Package taloscontrolplane holds the TalosControlPlane reconciler: an entry file
// (controller.go) and one file per concern: what a reconcile observes (scope.go), Machines
// (machines.go), etcd bootstrap, membership and scaling (etcd.go), the kubeconfig Secret
// (kubeconfig.go) and status (status.go). Decisions come from the model in
// controlplane/pkg/controlplane; Talos API calls go through controlplane/pkg/talosclient.
package taloscontrolplane
