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
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/internal/imagefactory"
)

// imageFactoryRetry is how soon a TalosConfig asks an unavailable Image Factory again.
const imageFactoryRetry = 20 * time.Second

// resolveImageFactory resolves the schematic of a node of mode that installs from an Image
// Factory installer (configgen.UsesImageFactory), or returns nothing for one that does not.
func (r *Reconciler) resolveImageFactory(ctx context.Context, spec bootstrapv1.TalosConfigSpec, mode configgen.Mode) (bootstrapv1.ImageFactoryStatus, error) {
	if !configgen.UsesImageFactory(spec, mode) {
		return bootstrapv1.ImageFactoryStatus{}, nil
	}
	release, err := configgen.FactoryRelease(spec)
	if err != nil {
		return bootstrapv1.ImageFactoryStatus{}, err
	}
	client := r.ImageFactory
	if client == nil {
		client = &imagefactory.Client{URL: imagefactory.DefaultURL}
	}
	resolved, err := client.Resolve(ctx, schematicOf(spec.ImageFactory), release, ptr.Deref(spec.ImageFactory.SecureBoot, false))
	if err != nil {
		return bootstrapv1.ImageFactoryStatus{}, err
	}
	return bootstrapv1.ImageFactoryStatus{SchematicID: resolved.SchematicID, Installer: resolved.Installer, Version: release, URL: client.URL}, nil
}

// schematicOf is the Image Factory schematic spec asks for.
func schematicOf(spec bootstrapv1.ImageFactorySpec) imagefactory.Schematic {
	s := imagefactory.Schematic{Customization: imagefactory.Customization{
		ExtraKernelArgs: spec.ExtraKernelArgs,
		Bootloader:      spec.Bootloader,
	}}
	if len(spec.Extensions) > 0 {
		s.Customization.SystemExtensions = &imagefactory.SystemExtensions{OfficialExtensions: spec.Extensions}
	}
	if spec.Overlay != (bootstrapv1.ImageFactoryOverlay{}) {
		s.Overlay = &imagefactory.Overlay{Image: spec.Overlay.Image, Name: spec.Overlay.Name}
	}
	return s
}

// imageFactoryFailed reports why the schematic could not be resolved. An unavailable factory
// is asked again soon; anything else waits for the spec to change.
func imageFactoryFailed(ctx context.Context, config *bootstrapv1.TalosConfig, err error) ctrl.Result {
	var unknown *imagefactory.UnknownExtensionsError
	var rejected *imagefactory.RejectedError
	switch {
	case errors.As(err, &unknown), errors.As(err, &rejected):
		setFalse(config, bootstrapv1.ImageFactoryRejectedReason, err.Error()+"; fix spec.imageFactory")
		ctrl.LoggerFrom(ctx).Info("Image Factory refused the schematic", "reason", err.Error())
		return ctrl.Result{}
	case imagefactory.IsUnavailable(err):
		setFalse(config, bootstrapv1.ImageFactoryUnavailableReason, err.Error()+"; asking again")
		ctrl.LoggerFrom(ctx).Info("Image Factory is unavailable", "reason", err.Error())
		return ctrl.Result{RequeueAfter: imageFactoryRetry}
	default:
		setFalse(config, bootstrapv1.InvalidConfigReason, err.Error())
		return ctrl.Result{}
	}
}

// imageFactoryAnnotations records status on the data Secret; never nil.
func imageFactoryAnnotations(s bootstrapv1.ImageFactoryStatus) map[string]string {
	if s == (bootstrapv1.ImageFactoryStatus{}) {
		return map[string]string{}
	}
	return map[string]string{
		bootstrapv1.ImageFactorySchematicAnnotation: s.SchematicID, bootstrapv1.ImageFactoryInstallerAnnotation: s.Installer,
		bootstrapv1.ImageFactoryVersionAnnotation: s.Version, bootstrapv1.ImageFactoryURLAnnotation: s.URL,
	}
}

// imageFactoryFromSecret reads what imageFactoryAnnotations recorded.
func imageFactoryFromSecret(s *corev1.Secret) bootstrapv1.ImageFactoryStatus {
	return bootstrapv1.ImageFactoryStatus{
		SchematicID: s.Annotations[bootstrapv1.ImageFactorySchematicAnnotation],
		Installer:   s.Annotations[bootstrapv1.ImageFactoryInstallerAnnotation],
		Version:     s.Annotations[bootstrapv1.ImageFactoryVersionAnnotation],
		URL:         s.Annotations[bootstrapv1.ImageFactoryURLAnnotation],
	}
}
