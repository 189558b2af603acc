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

// Package configgen is the one wrapper of Talos config generation. It creates a cluster's
// secrets bundle, renders a machine config for a version contract from a TalosConfig spec
// (generate, then RFC 6902 patches, then strategic-merge patches, then the hostname),
// validates the result for the node's runtime mode, and issues talosconfig client
// configurations. The bootstrap reconciler, its webhooks, the control plane and the talon
// CLI all render through it; nothing else imports Talos machinery's generate, configpatcher
// or validation packages.
//
// It performs no I/O and knows nothing of Kubernetes objects beyond the bootstrap API types.
package configgen
