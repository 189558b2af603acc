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

// Package dashboard is talon dashboard: a web page of the Talos clusters in a management
// cluster, served from the caller's kubeconfig.
//
// It watches Clusters, TalosControlPlanes, MachineDeployments, Machines, Events and etcd
// backups with the caller's credentials (an informer per kind the caller may list and
// watch) and renders pages on the server from those caches. A browser tab holds one
// server-sent event stream; when the caches change the server says so and the tab fetches
// the page's content again, so no tab polls. Actions (scaling, a version change, a backup,
// downloading the kubeconfig and talosconfig) go to the Kubernetes API with the same
// credentials: the API server and Talon's webhooks decide, and their answer is what the
// page shows. The dashboard keeps no credentials or accounts of its own.
//
// It is not a replacement for kubectl or clusterctl: it shows what the objects say and
// changes only the few fields a person following a cluster changes most.
package dashboard
