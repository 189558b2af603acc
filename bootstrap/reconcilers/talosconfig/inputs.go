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

package talosconfig

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// containerMachineKinds are infrastructure machine kinds whose nodes run in containers.
var containerMachineKinds = map[string]bool{
	"TalosDockerMachine":         true,
	"TalosDockerMachineTemplate": true,
}

// clusterInput is what the machine configs of cluster share, with the Kubernetes version
// of the owner.
func clusterInput(cluster *clusterv1.Cluster, owner *configOwner) configgen.Cluster {
	network := cluster.Spec.ClusterNetwork
	return configgen.Cluster{
		Name:              cluster.Name,
		Endpoint:          configgen.Endpoint{Host: cluster.Spec.ControlPlaneEndpoint.Host, Port: cluster.Spec.ControlPlaneEndpoint.Port},
		KubernetesVersion: owner.version,
		PodCIDRs:          network.Pods.CIDRBlocks,
		ServiceCIDRs:      network.Services.CIDRBlocks,
		DNSDomain:         network.ServiceDomain,
	}
}

// machineInput is what is particular to the owner's config.
func machineInput(config *bootstrapv1.TalosConfig, owner *configOwner) configgen.Machine {
	m := configgen.Machine{Spec: config.Spec, Mode: configgen.ModeMetal}
	if containerMachineKinds[owner.infrastructureRef.Kind] {
		m.Mode = configgen.ModeContainer
	}
	// A MachinePool's config is shared by all its nodes: they cannot share a hostname.
	if owner.perMachine {
		switch config.Spec.Hostname.Source {
		case bootstrapv1.HostnameSourceMachineName:
			m.Hostname = owner.name
		case bootstrapv1.HostnameSourceInfrastructureName:
			m.Hostname = owner.infrastructureRef.Name
		}
	}
	return m
}
