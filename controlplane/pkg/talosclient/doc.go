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

// Package talosclient is the narrow interface through which the control plane talks to Talos
// nodes (version, bootstrap, etcd membership and health, the boot ID, installing a Talos
// upgrade, rebooting), with a factory that builds clients from the cluster's secrets bundle:
// a short-lived admin certificate minted in memory. Tests use the same interface against the
// node simulator, which speaks the real Talos API.
package talosclient
