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

// Package sim is the Talos node simulator: a stand-in for a Talos node on machines where
// the Talos image cannot run. It stands in at exactly one boundary, the Talos machine API,
// and is built on the Talos project's own parts there: it serves machinery's MachineService
// gRPC definitions over TLS issued from the machine config's CAs, checks client roles as
// Talos does, loads and validates every config with machinery for the node's mode, and runs
// a real etcd member (the etcd server library) with certificates from the config's etcd CA.
// Control-plane nodes run the real kube-apiserver and kube-controller-manager and serve
// trustd; workers join by trustd and kubelet TLS bootstrapping; a kubelet stand-in registers
// every Node and the mirror Pods of the static control-plane pods. Faults (power, etcd
// crash, partition, slow boot) are available on demand. See docs/sim.md.
//
// It is not a Talos node: there is no kernel, no disks, no container runtime, no workloads.
// Tests and the talon CLI use it; the providers never import it, they talk to it through
// the Talos API like to any node.
package sim
