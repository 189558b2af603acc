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

package clientconfig

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	capicontrollerutil "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/predicates"

	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
)

// DefaultTTL is the validity of a talosconfig client certificate.
const DefaultTTL = 365 * 24 * time.Hour

// Reconciler keeps each Talon cluster's talosconfig Secret current.
type Reconciler struct {
	// Client reads Secrets from the API server.
	Client client.Client
	// TTL is the validity of issued client certificates; DefaultTTL when zero.
	TTL time.Duration
	// WatchFilterValue limits reconciliation to objects labelled with it.
	WatchFilterValue string
	// Now is the clock certificates are issued by; time.Now when nil.
	Now func() time.Time
}

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return errors.New("clientconfig reconciler needs a Client")
	}
	if r.TTL == 0 {
		r.TTL = DefaultTTL
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "talosconfig-secret")
	err := capicontrollerutil.NewControllerManagedBy(mgr, log).
		For(&clusterv1.Cluster{}).
		Named("talosconfig-secret").
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(controlPlaneMachineToCluster)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(bundleSecretToCluster)).
		Complete(ctx, r)
	if err != nil {
		return fmt.Errorf("failed to set up the talosconfig Secret controller: %w", err)
	}
	return nil
}

// Reconcile writes or refreshes one Cluster's talosconfig.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !cluster.DeletionTimestamp.IsZero() || annotations.IsPaused(cluster, cluster) {
		return ctrl.Result{}, nil
	}
	bundle, err := clustersecrets.Get(ctx, r.Client, cluster)
	if apierrors.IsNotFound(err) {
		// Not a Talon cluster yet: the first TalosConfig creates the bundle, whose Secret
		// event brings the Cluster back here.
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	endpoints, err := r.endpoints(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	renewIn, err := clustersecrets.EnsureTalosconfig(ctx, r.Client, cluster, bundle, endpoints, r.Now(), r.TTL)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to write the talosconfig of Cluster %s: %w", klog.KObj(cluster), err)
	}
	return ctrl.Result{RequeueAfter: max(renewIn, time.Minute)}, nil
}

// endpoints are the addresses of the cluster's control-plane Machines (external first), or
// the control-plane endpoint host while no Machine has an address.
func (r *Reconciler) endpoints(ctx context.Context, cluster *clusterv1.Cluster) ([]string, error) {
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(cluster.Namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel:         cluster.Name,
		clusterv1.MachineControlPlaneLabel: "",
	}); err != nil {
		return nil, fmt.Errorf("failed to list control-plane Machines: %w", err)
	}
	var endpoints []string
	for _, m := range machines.Items {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		if address := preferredAddress(m.Status.Addresses); address != "" && !slices.Contains(endpoints, address) {
			endpoints = append(endpoints, address)
		}
	}
	slices.Sort(endpoints)
	if len(endpoints) == 0 && cluster.Spec.ControlPlaneEndpoint.Host != "" {
		endpoints = []string{cluster.Spec.ControlPlaneEndpoint.Host}
	}
	return endpoints, nil
}

func preferredAddress(addresses clusterv1.MachineAddresses) string {
	for _, t := range []clusterv1.MachineAddressType{clusterv1.MachineExternalIP, clusterv1.MachineInternalIP} {
		for _, a := range addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

func controlPlaneMachineToCluster(_ context.Context, o client.Object) []ctrl.Request {
	labels := o.GetLabels()
	if _, ok := labels[clusterv1.MachineControlPlaneLabel]; !ok || labels[clusterv1.ClusterNameLabel] == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: labels[clusterv1.ClusterNameLabel]}}}
}

// bundleSecretToCluster maps the bundle Secret (created: write the talosconfig) and the
// talosconfig Secret (edited or deleted: restore it) to their Cluster.
func bundleSecretToCluster(_ context.Context, o client.Object) []ctrl.Request {
	cluster := o.GetLabels()[clusterv1.ClusterNameLabel]
	if cluster == "" || (o.GetName() != clustersecrets.BundleSecretName(cluster) && o.GetName() != clustersecrets.TalosconfigSecretName(cluster)) {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: cluster}}}
}
