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

// Package webhooks holds the validating webhooks of TalosConfig and TalosConfigTemplate. A
// spec is refused at admission, with a message naming the field, when no node could get a
// valid config from it: an unsupported talosVersion, generateType and data that do not go
// together, patches that do not parse or do not apply to a config of the requested version.
// A TalosConfig's spec is immutable once its data Secret exists. Dry-run requests of the
// ClusterClass topology controller pass, as Cluster API's contract asks.
package webhooks
