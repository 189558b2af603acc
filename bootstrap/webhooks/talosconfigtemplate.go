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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"sigs.k8s.io/cluster-api/util/topology"

	bootstrapv1alpha3 "github.com/talon-capi/talon/api/bootstrap/v1alpha3"
	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-bootstrap-cluster-x-k8s-io-v1beta1-talosconfigtemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=bootstrap.cluster.x-k8s.io,resources=talosconfigtemplates,versions=v1beta1,name=validation.talosconfigtemplate.bootstrap.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// TalosConfigTemplate validates TalosConfigTemplates and pins the contract of new ones.
type TalosConfigTemplate struct{}

var (
	_ admission.Validator[*bootstrapv1.TalosConfigTemplate] = &TalosConfigTemplate{}
	_ admission.Defaulter[*bootstrapv1.TalosConfigTemplate] = &TalosConfigTemplate{}
)

// SetupWebhookWithManager registers the webhook with mgr.
func (w *TalosConfigTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &bootstrapv1.TalosConfigTemplate{}).WithValidator(w).WithDefaulter(w).
		WithConverter(conversion.NewHubSpokeConverter(&bootstrapv1.TalosConfigTemplate{}, conversion.NewSpokeConverter(&bootstrapv1alpha3.TalosConfigTemplate{},
			func(_ context.Context, hub *bootstrapv1.TalosConfigTemplate, spoke *bootstrapv1alpha3.TalosConfigTemplate) error {
				return bootstrapv1alpha3.ConvertTalosConfigTemplateFromHub(hub, spoke)
			},
			func(_ context.Context, spoke *bootstrapv1alpha3.TalosConfigTemplate, hub *bootstrapv1.TalosConfigTemplate) error {
				return bootstrapv1alpha3.ConvertTalosConfigTemplateToHub(spoke, hub)
			}))).
		Complete()
}

// ValidateCreate refuses a template whose TalosConfigs could not render.
func (w *TalosConfigTemplate) ValidateCreate(ctx context.Context, t *bootstrapv1.TalosConfigTemplate) (admission.Warnings, error) {
	return w.validate(ctx, t)
}

// ValidateUpdate refuses a template whose TalosConfigs could not render, and a Talos
// version its nodes' version does not upgrade to directly.
func (w *TalosConfigTemplate) ValidateUpdate(ctx context.Context, oldT, t *bootstrapv1.TalosConfigTemplate) (admission.Warnings, error) {
	if err := configgen.CheckTalosUpgrade(oldT.Spec.Template.Spec.TalosVersion, t.Spec.Template.Spec.TalosVersion); err != nil {
		return nil, invalid("TalosConfigTemplate", t.Name, field.ErrorList{field.Forbidden(field.NewPath("spec", "template", "spec", "talosVersion"), err.Error())})
	}
	return w.validate(ctx, t)
}

// ValidateDelete allows every deletion.
func (w *TalosConfigTemplate) ValidateDelete(context.Context, *bootstrapv1.TalosConfigTemplate) (admission.Warnings, error) {
	return nil, nil
}

func (w *TalosConfigTemplate) validate(ctx context.Context, t *bootstrapv1.TalosConfigTemplate) (admission.Warnings, error) {
	if dryRun, err := IsTopologyDryRun(ctx, t); err != nil || dryRun {
		return nil, err
	}
	return nil, invalid("TalosConfigTemplate", t.Name, ValidateSpec(t.Spec.Template.Spec, field.NewPath("spec", "template", "spec")))
}

// IsTopologyDryRun reports whether the admission request in ctx is a ClusterClass dry run
// of obj. The topology controller dry-runs partial templates while it computes a Cluster's
// desired state, so template webhooks let those through; the real object is validated when
// it is written.
func IsTopologyDryRun(ctx context.Context, obj metav1.Object) (bool, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return false, apierrors.NewBadRequest(fmt.Sprintf("expected an admission request in the context: %v", err))
	}
	return topology.IsDryRunRequest(req, obj), nil
}
