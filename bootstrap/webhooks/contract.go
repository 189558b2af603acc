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

package webhooks

import (
	"context"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// +kubebuilder:webhook:verbs=create,path=/mutate-bootstrap-cluster-x-k8s-io-v1beta1-talosconfigtemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=bootstrap.cluster.x-k8s.io,resources=talosconfigtemplates,versions=v1beta1,name=default.talosconfigtemplate.bootstrap.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// PinContract records, in a spec created without one, the Talos version contract Talon
// renders for by default today. A later Talon whose default is newer then never changes what
// the object's nodes get: the contract moves only when a person changes it. Objects made
// before contracts were recorded keep an empty talosVersion, which means
// configgen.UnpinnedContract.
func PinContract(spec *bootstrapv1.TalosConfigSpec) {
	if spec.TalosVersion == "" {
		spec.TalosVersion = configgen.DefaultTalosVersion()
	}
}

// Default pins the contract of a TalosConfigTemplate being created.
func (w *TalosConfigTemplate) Default(_ context.Context, t *bootstrapv1.TalosConfigTemplate) error {
	PinContract(&t.Spec.Template.Spec)
	return nil
}
