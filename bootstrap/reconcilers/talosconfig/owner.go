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
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// configOwner is what the reconciler needs to know of the Machine or MachinePool that owns
// a TalosConfig.
type configOwner struct {
	kind string
	name string
	// clusterName is the owner's spec.clusterName.
	clusterName string
	// version is the Kubernetes version the owner asks for.
	version string
	// infrastructureRef is the owner's infrastructure machine (or machine pool).
	infrastructureRef clusterv1.ContractVersionedObjectReference
	// perMachine is false for MachinePools, whose config is shared by many nodes.
	perMachine bool
}

// getConfigOwner returns the Machine or MachinePool that owns config, or nil if none does yet.
func getConfigOwner(ctx context.Context, c client.Client, config *bootstrapv1.TalosConfig) (*configOwner, error) {
	for _, ref := range config.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != clusterv1.GroupVersion.Group {
			continue
		}
		key := client.ObjectKey{Namespace: config.Namespace, Name: ref.Name}
		switch ref.Kind {
		case "Machine":
			m := &clusterv1.Machine{}
			if err := c.Get(ctx, key, m); err != nil {
				return nil, fmt.Errorf("failed to get owner Machine %s: %w", ref.Name, err)
			}
			return &configOwner{
				kind: ref.Kind, name: m.Name, clusterName: m.Spec.ClusterName, version: m.Spec.Version,
				infrastructureRef: m.Spec.InfrastructureRef, perMachine: true,
			}, nil
		case "MachinePool":
			mp := &clusterv1.MachinePool{}
			if err := c.Get(ctx, key, mp); err != nil {
				return nil, fmt.Errorf("failed to get owner MachinePool %s: %w", ref.Name, err)
			}
			return &configOwner{
				kind: ref.Kind, name: mp.Name, clusterName: mp.Spec.ClusterName, version: mp.Spec.Template.Spec.Version,
				infrastructureRef: mp.Spec.Template.Spec.InfrastructureRef, perMachine: false,
			}, nil
		}
	}
	return nil, nil
}
