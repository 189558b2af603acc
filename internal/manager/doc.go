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

// Package manager is the one place the three Talon managers (bootstrap, control plane,
// infrastructure) turn command-line flags into a running controller-runtime manager: the
// flags every Cluster API provider offers, logging, health and readiness checks, the metrics
// endpoint, leader election, the webhook server and a clean stop on SIGTERM.
//
// A provider contributes only what is its own (its scheme, reconcilers and webhooks) through
// a Provider value; the mains stay declarative. It holds no reconciliation logic.
package manager
