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

// Package clusterclass tests the variables of the shipped ClusterClasses
// (templates/clusterclass-*.yaml) through Cluster API's own topology reconcilers and Cluster
// webhooks: what each variable does to the configs Talon renders, and which values are
// refused. Building whole clusters from the classes is the providers' tests' part
// (infrastructure/docker, infrastructure/metal).
package clusterclass
