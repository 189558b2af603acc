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

// Package plane runs a local Cluster API management plane from the binaries in bin/:
// etcd, kube-apiserver and kube-controller-manager as processes, Cluster API and Talon
// installed by clusterctl, and the providers' managers as local processes whose webhooks
// the API server calls on the loopback interface.
//
// A plane keeps everything in one directory (certificates, etcd's data, logs and
// plane.json with the processes it started), so that a later command (talon status,
// talon down) finds and stops it. Its processes run in their own sessions and outlive the
// command that started them.
//
// The plane runs no Pods (it has no kubelet), so the providers' Deployments that
// clusterctl installs are scaled to zero and their managers run here instead. For the same
// reason there is no cert-manager: the plane installs cert-manager's API (its
// CustomResourceDefinitions, so that clusterctl finds it and installs providers) and does
// the two jobs cert-manager does for providers itself: it issues the webhook serving
// certificate (for 127.0.0.1) and puts its CA into the webhook configurations and
// conversion webhooks it points at the local managers.
package plane
