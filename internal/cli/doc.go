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

// Package cli is the command tree of the talon command-line tool. Each subcommand lives in a
// file of its own and writes to the streams it is given, so tests run it in process. Today
// talon prints its version; render, validate, up, down, status, sim, lb and dashboard arrive with their
// issues.
package cli
