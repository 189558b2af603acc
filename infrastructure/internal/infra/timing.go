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

package infra

import "time"

// Converging is how soon a step that waits on something outside (a node to register, a host
// to boot, the last nodes to go) is looked at again when no event comes first.
const Converging = 2 * time.Second

// RetryConflict is how soon a spec that conflicts with something outside (a subnet, a port,
// a Node's providerID) is tried again: the user may fix either side.
const RetryConflict = 30 * time.Second
