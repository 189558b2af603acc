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

// Package clustersecrets keeps a cluster's Talos identity in the management cluster: the
// secrets bundle in Secret <cluster>-talos (key "bundle") and the Kubernetes CA in
// <cluster>-ca (tls.crt, tls.key) for Cluster API's kubeconfig tooling. Both are owned by the
// Cluster and labelled for "clusterctl move".
//
// A bundle is created once and never again: concurrent first calls agree on one bundle
// through the API server's create semantics, and a missing bundle whose CA Secret still
// exists is reported, not replaced, because a new bundle would split the cluster's identity.
package clustersecrets
