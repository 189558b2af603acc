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

// Package sim is the Talos node simulator: a stand-in for a Talos node where the real image
// cannot run. It serves the real Talos machine API (machinery's gRPC definitions), validates
// configs with machinery, and runs a real etcd member and kube-apiserver. Tests and the talon
// CLI use it; the providers never import it.
//
// Empty until the node simulator issue lands.
package sim
