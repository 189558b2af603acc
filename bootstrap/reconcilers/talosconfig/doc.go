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

// Package talosconfig holds the TalosConfig reconciler. For each TalosConfig owned by a
// Machine or MachinePool it waits, with a condition saying what for, until the Cluster's
// infrastructure is provisioned and it has a control-plane endpoint; then it takes the
// Cluster's secrets bundle (creating it once, the first time any TalosConfig of the cluster
// needs it), renders and validates the machine config through configgen, and writes the
// bootstrap data Secret once.
//
// It does not call Talos machinery itself, and never rewrites a data Secret: changes reach
// machines by rollout.
package talosconfig
