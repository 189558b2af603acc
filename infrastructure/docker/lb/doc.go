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

// Package lb is the control-plane endpoint of a Talos cluster whose nodes are containers: a
// TCP load balancer that forwards each of its ports (kube-apiserver on 6443, trustd on 50001)
// to the same port of a healthy control-plane node. `talon lb` runs it in the load-balancer
// container of the Docker infrastructure provider, and the simulator's tests run it in
// process.
//
// It is not a proxy of any protocol: it does not terminate TLS, look into requests or keep
// sessions on one backend; it only chooses, per connection, where the bytes go.
package lb
