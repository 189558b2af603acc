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

// Package require decides what a test does when a layer it needs (envtest, docker, netns,
// qemu) cannot run on this machine: skip with the reason, or fail when the layer is listed
// in TALON_REQUIRE, so that CI never passes by silently skipping what it must run.
package require
