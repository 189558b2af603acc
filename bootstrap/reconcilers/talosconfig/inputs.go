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
	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// machineInput is what is particular to the owner's config.
func machineInput(config *bootstrapv1.TalosConfig, owner *configOwner) configgen.Machine {
	m := configgen.Machine{Spec: config.Spec, Mode: configgen.ModeFor(owner.infrastructureRef.Kind)}
	// A MachinePool's config is shared by all its nodes: they cannot share a hostname.
	if owner.perMachine {
		m.Hostname = configgen.Hostname(config.Spec.Hostname.Source, owner.name, owner.infrastructureRef.Name)
	}
	return m
}
