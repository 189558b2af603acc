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

// Package clientconfig holds the reconciler of each Talon cluster's talosconfig: the Secret
// <cluster>-talosconfig (key "talosconfig") that people and tools use to reach the nodes'
// Talos API. Its endpoints follow the control-plane Machines' addresses; its os:admin client
// certificate is re-issued only when a third of its lifetime remains, not on every reconcile.
//
// It acts only on Clusters that have a Talon secrets bundle, and never creates one.
package clientconfig
