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
	"fmt"
	"strings"

	"github.com/blang/semver/v4"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1alpha3 "github.com/talon-capi/talon/api/bootstrap/v1alpha3"
	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-bootstrap-cluster-x-k8s-io-v1beta1-talosconfig,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=bootstrap.cluster.x-k8s.io,resources=talosconfigs,versions=v1beta1,name=validation.talosconfig.bootstrap.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// TalosConfig validates TalosConfigs.
type TalosConfig struct{}

var _ admission.Validator[*bootstrapv1.TalosConfig] = &TalosConfig{}

// SetupWebhookWithManager registers the webhook with mgr, and the conversion of Sidero's
// CABPT v1alpha3 TalosConfigs (docs/sidero.md).
func (w *TalosConfig) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &bootstrapv1.TalosConfig{}).WithValidator(w).
		WithConverter(conversion.NewHubSpokeConverter(&bootstrapv1.TalosConfig{}, conversion.NewSpokeConverter(&bootstrapv1alpha3.TalosConfig{},
			func(_ context.Context, hub *bootstrapv1.TalosConfig, spoke *bootstrapv1alpha3.TalosConfig) error {
				return bootstrapv1alpha3.ConvertTalosConfigFromHub(hub, spoke)
			},
			func(_ context.Context, spoke *bootstrapv1alpha3.TalosConfig, hub *bootstrapv1.TalosConfig) error {
				return bootstrapv1alpha3.ConvertTalosConfigToHub(spoke, hub)
			}))).
		Complete()
}

// ValidateCreate refuses a spec no node could get a valid config from.
func (w *TalosConfig) ValidateCreate(_ context.Context, c *bootstrapv1.TalosConfig) (admission.Warnings, error) {
	return nil, invalid("TalosConfig", c.Name, ValidateSpec(c.Spec, field.NewPath("spec")))
}

// ValidateUpdate also keeps the spec as it is once the data Secret exists, unless the
// TalosConfig's owner is updating its node in place (InPlaceUpdateAnnotation, set in an
// earlier update, or Cluster API's UpdateInProgressAnnotation, set with the new spec): then
// the new spec must render, as a new one would.
func (w *TalosConfig) ValidateUpdate(_ context.Context, oldC, newC *bootstrapv1.TalosConfig) (admission.Warnings, error) {
	// Metadata changes (owner references, labels, clusterctl move) never depend on the spec.
	if equality.Semantic.DeepEqual(oldC.Spec, newC.Spec) {
		return nil, nil
	}
	// Marked before the spec changes (its owner marks it first, then changes the spec): a
	// single update cannot both mark a TalosConfig and rewrite its config.
	_, wasMarked := oldC.Annotations[bootstrapv1.InPlaceUpdateAnnotation]
	_, marked := newC.Annotations[bootstrapv1.InPlaceUpdateAnnotation]
	// Cluster API's in-place update of a worker writes the new spec together with its own
	// mark (a MachineSet taking over the Machine); Talon's extension then has it rendered.
	// Whoever may write TalosConfigs may set that mark too: the rule guards against
	// mistakes, not against writers with that right.
	_, updating := newC.Annotations[clusterv1.UpdateInProgressAnnotation]
	inPlace := (wasMarked && marked) || updating
	if ptr.Deref(oldC.Status.Initialization.DataSecretCreated, false) && !inPlace {
		return nil, invalid("TalosConfig", newC.Name, field.ErrorList{field.Forbidden(field.NewPath("spec"),
			"the machine config is already written to the bootstrap data Secret and is not rewritten; "+
				"change the TalosConfigTemplate or the control plane's controlPlaneConfig to roll out new Machines instead")})
	}
	return nil, invalid("TalosConfig", newC.Name, ValidateSpec(newC.Spec, field.NewPath("spec")))
}

// ValidateDelete allows every deletion.
func (w *TalosConfig) ValidateDelete(context.Context, *bootstrapv1.TalosConfig) (admission.Warnings, error) {
	return nil, nil
}

// ValidateSpec reports the fields of a TalosConfig spec at path that keep it from
// rendering. The control plane's webhook applies it to controlPlaneConfig.
func ValidateSpec(spec bootstrapv1.TalosConfigSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := configgen.ParseContract(spec.TalosVersion); err != nil {
		errs = append(errs, field.Invalid(path.Child("talosVersion"), spec.TalosVersion, err.Error()))
	}
	switch spec.GenerateType {
	case bootstrapv1.GenerateTypeNone:
		if spec.Data == "" {
			errs = append(errs, field.Required(path.Child("data"), "generateType none uses spec.data as the complete machine config"))
		}
		if len(spec.ConfigPatches) > 0 || len(spec.StrategicPatches) > 0 {
			errs = append(errs, field.Forbidden(path.Child("generateType"), "patches apply to generated configs; with generateType none, put the final config in spec.data"))
		}
	default:
		if spec.Data != "" {
			errs = append(errs, field.Forbidden(path.Child("data"), fmt.Sprintf("data is used only with generateType none, not %q", spec.GenerateType)))
		}
	}
	errs = append(errs, validateImageFactory(spec, path.Child("imageFactory"))...)
	if len(errs) > 0 {
		return errs
	}
	if err := configgen.Check(spec); err != nil {
		errs = append(errs, field.Invalid(path, "", err.Error()))
	}
	return errs
}

// validateImageFactory checks what can be checked without asking the factory: the release
// must run configs of the spec's contract, and a complete config has nothing to build.
func validateImageFactory(spec bootstrapv1.TalosConfigSpec, path *field.Path) field.ErrorList {
	if spec.ImageFactory.IsZero() {
		return nil
	}
	if spec.GenerateType == bootstrapv1.GenerateTypeNone {
		return field.ErrorList{field.Forbidden(path, "with generateType none, spec.data is the complete config: set the installer image in it")}
	}
	if spec.ImageFactory.Version == "" {
		return nil
	}
	release, err := semver.ParseTolerant(strings.TrimPrefix(spec.ImageFactory.Version, "v"))
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("version"), spec.ImageFactory.Version, "must be a Talos release like v1.14.1")}
	}
	contract, err := configgen.ParseContract(spec.TalosVersion)
	if err == nil && (release.Major < uint64(contract.Major) || (release.Major == uint64(contract.Major) && release.Minor < uint64(contract.Minor))) {
		return field.ErrorList{field.Invalid(path.Child("version"), spec.ImageFactory.Version, fmt.Sprintf(
			"Talos %s is older than the config contract %s: its nodes would refuse the config; install %s or later, or lower talosVersion",
			spec.ImageFactory.Version, contract, contract))}
	}
	return nil
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(bootstrapv1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
