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

// Package envtest is Talon's hermetic test management plane, shared by every package whose
// tests need a Kubernetes API server. It starts a real etcd and kube-apiserver from bin/
// (built from pinned Go modules by "make tools", never downloaded), installs Cluster API's
// CRDs from the Cluster API module and Talon's from config/ with their contract labels, serves
// webhooks from the test process, and runs Cluster API's own core reconcilers next to Talon's.
//
// A package uses it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(envtest.Run(m)) }
//
// and each test takes the shared plane with envtest.Get(t), which skips the test with the
// reason when the binaries are missing, or fails it when TALON_REQUIRE lists "envtest".
package envtest
