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
	"fmt"

	"github.com/spf13/pflag"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1alpha3 "github.com/talon-capi/talon/api/controlplane/v1alpha3"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/controlplane/reconcilers/kubernetescluster"
	"github.com/talon-capi/talon/controlplane/reconcilers/taloscontrolplane"
	"github.com/talon-capi/talon/controlplane/reconcilers/talosetcdbackup"
	"github.com/talon-capi/talon/controlplane/webhooks"
	"github.com/talon-capi/talon/internal/manager"
)

// Provider returns the control-plane provider's part of a Talon manager.
func Provider() manager.Provider {
	return manager.Provider{
		Name: "talon-control-plane-manager",
		// The control plane creates and reads the bootstrap provider's TalosConfigs, and reads
		// bare-metal hosts to apply their configs as the boot service serves them.
		// It also builds vitistack.io KubernetesClusters, when --kubernetes-cluster-class is set.
		AddToScheme:      []func(*runtime.Scheme) error{controlplanev1.AddToScheme, controlplanev1alpha3.AddToScheme, bootstrapv1.AddToScheme, infrav1.AddToScheme, vitiv1.AddToScheme},
		SetupReconcilers: Reconcilers,
		SetupWebhooks:    Webhooks,
		AddFlags: func(fs *pflag.FlagSet) {
			fs.IntVar(&extensionPort, "runtime-extension-port", DefaultExtensionPort,
				"Port Cluster API's in-place update hooks for worker Machines are served on (HTTPS, with the webhook "+
					"certificate of --webhook-cert-dir); 0 serves none.")
			fs.StringVar(&kubernetesClusterClass, "kubernetes-cluster-class", DefaultKubernetesClusterClass,
				"Build vitistack.io KubernetesClusters as Clusters of this ClusterClass (\"name\" in the KubernetesCluster's namespace, "+
					"or \"namespace/name\"; a KubernetesCluster's talon.dev/cluster-class annotation overrides it), when their CRD "+
					"(out/kubernetescluster.yaml) is installed as the manager starts; empty builds none (docs/kubernetescluster.md).")
		},
		Validate: func() error {
			if extensionPort < 0 || extensionPort > 65535 {
				return fmt.Errorf("--runtime-extension-port must be a port number or 0, got %d", extensionPort)
			}
			return nil
		},
	}
}

// extensionPort is the --runtime-extension-port of the provider's manager; 0 (no hooks
// served) where Reconcilers runs without the command line, as in tests.
var extensionPort int

// kubernetesClusterClass is the --kubernetes-cluster-class of the provider's manager: empty
// (no KubernetesCluster controller) where Reconcilers runs without the command line.
var kubernetesClusterClass string

// DefaultKubernetesClusterClass is the ClusterClass KubernetesClusters are built with unless
// told otherwise: Talon's Docker class.
const DefaultKubernetesClusterClass = "talos-docker"

// DefaultExtensionPort is where the control-plane manager serves Cluster API's in-place
// update hooks unless told otherwise; the shipped ExtensionConfig names it.
const DefaultExtensionPort = 9444

// Reconcilers registers the TalosControlPlane, TalosEtcdBackup and TalosEtcdBackupSchedule
// reconcilers with mgr, and the KubernetesCluster reconciler (setupKubernetesClusters).
func Reconcilers(ctx context.Context, mgr ctrl.Manager, opts *manager.Options) error {
	cache, err := manager.NewClusterCache(ctx, mgr, "talon-control-plane-manager", opts)
	if err != nil {
		return err
	}
	r := &taloscontrolplane.Reconciler{
		Client: mgr.GetClient(), TalosClients: talosclient.NewFactory(), ClusterCache: cache, WatchFilterValue: opts.WatchFilter,
		Events: mgr.GetEventRecorder("talon-control-plane-manager"),
	}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: opts.Concurrency}); err != nil {
		return err
	}
	backups := &talosetcdbackup.Reconciler{Client: mgr.GetClient(), TalosClients: talosclient.NewFactory(), Events: mgr.GetEventRecorder("talon-control-plane-manager")}
	if err := backups.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: opts.Concurrency}); err != nil {
		return err
	}
	schedules := &talosetcdbackup.ScheduleReconciler{Client: mgr.GetClient(), Events: mgr.GetEventRecorder("talon-control-plane-manager")}
	if err := schedules.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: opts.Concurrency}); err != nil {
		return err
	}
	if err := setupKubernetesClusters(ctx, mgr, opts); err != nil {
		return err
	}
	if extensionPort == 0 {
		return nil
	}
	return Extension(mgr, r, extensionPort, opts.WebhookCertDir)
}

// setupKubernetesClusters registers the KubernetesCluster reconciler when
// --kubernetes-cluster-class names a class and the KubernetesCluster CRD is installed: the
// CRD is an optional component, and the manager runs the same without it.
func setupKubernetesClusters(ctx context.Context, mgr ctrl.Manager, opts *manager.Options) error {
	if kubernetesClusterClass == "" {
		return nil
	}
	kind := vitiv1.GroupVersion.WithKind("KubernetesCluster")
	if _, err := mgr.GetRESTMapper().RESTMapping(kind.GroupKind(), kind.Version); meta.IsNoMatchError(err) {
		ctrl.LoggerFrom(ctx).Info("The KubernetesCluster CRD is not installed, so KubernetesClusters are not built: apply out/kubernetescluster.yaml and restart this manager to build them")
		return nil
	} else if err != nil {
		return fmt.Errorf("failed to find the KubernetesCluster CRD: %w", err)
	}
	r := &kubernetescluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Class: kubernetesClusterClass, Events: mgr.GetEventRecorder("talon-control-plane-manager")}
	return r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: opts.Concurrency})
}

// Extension serves r's answers to Cluster API's in-place update hooks (CanUpdateMachineSet,
// CanUpdateMachine, UpdateMachine) on port, with the certificate in certDir, as the runtime
// extension an ExtensionConfig registers with Cluster API's core manager.
func Extension(mgr ctrl.Manager, r *taloscontrolplane.Reconciler, port int, certDir string) error {
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return err
	}
	srv, err := server.New(server.Options{Catalog: catalog, Port: port, CertDir: certDir})
	if err != nil {
		return err
	}
	// Cluster API allows 30s at most; an UpdateMachine call takes one step of a node.
	timeout := ptr.To[int32](30)
	fail := ptr.To(runtimehooksv1.FailurePolicyFail)
	if err := errors.Join(
		srv.AddExtensionHandler(server.ExtensionHandler{Hook: runtimehooksv1.CanUpdateMachineSet, Name: "can-update-machineset",
			HandlerFunc: r.CanUpdateMachineSet, TimeoutSeconds: timeout, FailurePolicy: fail}),
		srv.AddExtensionHandler(server.ExtensionHandler{Hook: runtimehooksv1.CanUpdateMachine, Name: "can-update-machine",
			HandlerFunc: r.CanUpdateMachine, TimeoutSeconds: timeout, FailurePolicy: fail}),
		srv.AddExtensionHandler(server.ExtensionHandler{Hook: runtimehooksv1.UpdateMachine, Name: "update-machine",
			HandlerFunc: r.UpdateMachine, TimeoutSeconds: timeout, FailurePolicy: fail}),
	); err != nil {
		return err
	}
	return mgr.Add(srv)
}

// Webhooks registers the webhooks of TalosControlPlane and TalosControlPlaneTemplate, and
// KubernetesCluster's, served whether or not its controller runs.
func Webhooks(mgr ctrl.Manager) error {
	return errors.Join(
		(&webhooks.TalosControlPlane{}).SetupWebhookWithManager(mgr),
		(&webhooks.TalosControlPlaneTemplate{}).SetupWebhookWithManager(mgr),
		(&webhooks.KubernetesCluster{}).SetupWebhookWithManager(mgr),
	)
}
