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

// Package e2e runs Talon as a user does, with every part a separate process as in
// production: the talon CLI starts a local management plane (etcd, kube-apiserver,
// kube-controller-manager), clusterctl installs Cluster API and Talon from Talon's local
// repository, Cluster API's core manager and Talon's three manager binaries reconcile, and
// nodes run as containers of the simulator image on the Docker Engine. clusterctl itself
// does init, generate, describe and move. "make test-e2e" runs only this package; "make
// test" runs it with the rest.
package e2e
