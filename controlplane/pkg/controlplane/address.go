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

package controlplane

import clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

// MachineAddress is the address the Talos API of a Machine's node answers on: its first
// internal IP, else external IP, internal DNS name, external DNS name; empty before the
// infrastructure provider reports one.
func MachineAddress(m *clusterv1.Machine) string {
	for _, t := range []clusterv1.MachineAddressType{clusterv1.MachineInternalIP, clusterv1.MachineExternalIP, clusterv1.MachineInternalDNS, clusterv1.MachineExternalDNS} {
		for _, a := range m.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}
