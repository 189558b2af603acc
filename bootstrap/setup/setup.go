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

package setup

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	bootstrapv1alpha3 "github.com/talon-capi/talon/api/bootstrap/v1alpha3"
	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/reconcilers/clientconfig"
	"github.com/talon-capi/talon/bootstrap/reconcilers/talosconfig"
	"github.com/talon-capi/talon/bootstrap/webhooks"
	"github.com/talon-capi/talon/internal/imagefactory"
	"github.com/talon-capi/talon/internal/manager"
)

// Provider returns the bootstrap provider's part of a Talon manager.
func Provider() manager.Provider {
	return manager.Provider{
		Name:             "talon-bootstrap-manager",
		AddToScheme:      []func(*runtime.Scheme) error{bootstrapv1.AddToScheme, bootstrapv1alpha3.AddToScheme},
		SetupReconcilers: Reconcilers,
		SetupWebhooks:    Webhooks,
	}
}

// Reconcilers registers the TalosConfig reconciler and the talosconfig Secret reconciler.
func Reconcilers(ctx context.Context, mgr ctrl.Manager, opts *manager.Options) error {
	options := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	return errors.Join(
		(&talosconfig.Reconciler{Client: mgr.GetClient(), WatchFilterValue: opts.WatchFilter, Namespace: opts.Namespace,
			ImageFactory: &imagefactory.Client{URL: opts.ImageFactoryURL},
			Events:       mgr.GetEventRecorder("talon-bootstrap-manager")}).SetupWithManager(ctx, mgr, options),
		(&clientconfig.Reconciler{Client: mgr.GetClient(), WatchFilterValue: opts.WatchFilter}).SetupWithManager(ctx, mgr, options),
	)
}

// Webhooks registers the validating webhooks of TalosConfig and TalosConfigTemplate.
func Webhooks(mgr ctrl.Manager) error {
	return errors.Join(
		(&webhooks.TalosConfig{}).SetupWebhookWithManager(mgr),
		(&webhooks.TalosConfigTemplate{}).SetupWebhookWithManager(mgr),
	)
}
