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

// Package talosconfig holds the TalosConfig reconciler: it waits for a Machine, its Cluster,
// provisioned infrastructure and a control-plane endpoint, creates the cluster's secrets
// bundle once, renders and validates the Machine's Talos config through configgen, and
// stores it in the bootstrap data Secret. It does not call Talos machinery itself.
//
// Empty until the bootstrap provider's issue lands.
package talosconfig
