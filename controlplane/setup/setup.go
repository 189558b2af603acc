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

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1alpha3 "github.com/talon-capi/talon/api/controlplane/v1alpha3"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/controlplane/reconcilers/taloscontrolplane"
	"github.com/talon-capi/talon/controlplane/webhooks"
	"github.com/talon-capi/talon/internal/manager"
)

// Provider returns the control-plane provider's part of a Talon manager.
func Provider() manager.Provider {
	return manager.Provider{
		Name: "talon-control-plane-manager",
		// The control plane creates and reads the bootstrap provider's TalosConfigs.
		AddToScheme:      []func(*runtime.Scheme) error{controlplanev1.AddToScheme, controlplanev1alpha3.AddToScheme, bootstrapv1.AddToScheme},
		SetupReconcilers: Reconcilers,
		SetupWebhooks:    Webhooks,
	}
}

// Reconcilers registers the TalosControlPlane reconciler with mgr.
func Reconcilers(ctx context.Context, mgr ctrl.Manager, opts *manager.Options) error {
	cache, err := manager.NewClusterCache(ctx, mgr, "talon-control-plane-manager", opts)
	if err != nil {
		return err
	}
	return (&taloscontrolplane.Reconciler{
		Client: mgr.GetClient(), TalosClients: talosclient.NewFactory(), ClusterCache: cache, WatchFilterValue: opts.WatchFilter,
		Events: mgr.GetEventRecorder("talon-control-plane-manager"),
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: opts.Concurrency})
}

// Webhooks registers the validating webhooks of TalosControlPlane and TalosControlPlaneTemplate.
func Webhooks(mgr ctrl.Manager) error {
	return errors.Join(
		(&webhooks.TalosControlPlane{}).SetupWebhookWithManager(mgr),
		(&webhooks.TalosControlPlaneTemplate{}).SetupWebhookWithManager(mgr),
	)
}
