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

package metal

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	capicontrollerutil "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/internal/infra"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=talosmetalclusters;talosmetalclusters/status,verbs=get;list;watch;update;patch

// defaultAPIServerPort is the port of a VIP endpoint whose port is not set.
const defaultAPIServerPort = 6443

// ClusterReconciler provisions a TalosMetalCluster: its endpoint is the user's (a Talos VIP
// or an external load balancer), so it is provisioned as soon as the endpoint is set.
type ClusterReconciler struct {
	Client client.Client
	// WatchFilterValue limits reconciliation to objects labelled with it.
	WatchFilterValue string
}

// SetupWithManager registers the reconciler with mgr.
func (r *ClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return errors.New("talosmetalcluster reconciler needs a Client")
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "talosmetalcluster")
	_, err := capicontrollerutil.NewControllerManagedBy(mgr, log).
		For(&infrav1.TalosMetalCluster{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		// A Cluster unpaused (at the end of clusterctl move, on the target) wakes its
		// TalosMetalCluster, which then marks itself provisioned again.
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("TalosMetalCluster"), mgr.GetClient(), &infrav1.TalosMetalCluster{})),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Build(ctx, r)
	if err != nil {
		return fmt.Errorf("failed to set up the talosmetalcluster controller: %w", err)
	}
	return nil
}

// Reconcile marks a TalosMetalCluster provisioned once it has an endpoint.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	mc := &infrav1.TalosMetalCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if annotations.IsExternallyManaged(mc) {
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, mc.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if cluster == nil || !mc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster)))
	patchHelper, err := patch.NewHelper(mc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, mc); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	defer func() {
		mc.Status.ObservedGeneration = mc.Generation
		reterr = errors.Join(reterr, infra.PatchReady(ctx, patchHelper, "TalosMetalCluster", mc, infrav1.ControlPlaneEndpointSetCondition))
	}()
	if vip := mc.Spec.ControlPlaneVIP; vip != nil && mc.Spec.ControlPlaneEndpoint.Host == "" {
		// The VIP is the endpoint unless the user names another (a DNS name of it).
		mc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: vip.Address, Port: cmp.Or(mc.Spec.ControlPlaneEndpoint.Port, defaultAPIServerPort)}
	}
	endpoint := mc.Spec.ControlPlaneEndpoint
	if endpoint.Host == "" || endpoint.Port == 0 {
		infra.SetFalsef(mc, infrav1.ControlPlaneEndpointSetCondition, infrav1.WaitingForControlPlaneEndpointReason,
			"Set spec.controlPlaneEndpoint to the address of your load balancer, or spec.controlPlaneVIP to a shared address the control-plane nodes hold")
		return ctrl.Result{}, nil
	}
	infra.SetTruef(mc, infrav1.ControlPlaneEndpointSetCondition, "The control-plane endpoint is %s:%d", endpoint.Host, endpoint.Port)
	mc.Status.Initialization.Provisioned = ptr.To(true)
	return ctrl.Result{}, nil
}
