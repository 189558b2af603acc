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

// Package quickstart is the one-command local quickstart behind talon up, status and down:
// Up makes a management plane and a cluster, Down removes them, and Describe and Gather tell
// a person how a cluster is doing — the objects under a Cluster as a tree with what each
// waits for, the workload cluster's Nodes, and the etcd members the Talos API lists.
//
// It is for a person's machine, not for the providers, which never import it. Describe and
// Gather only read: the conditions they show are the ones the providers and Cluster API set.
package quickstart
