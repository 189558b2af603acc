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

package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	capicontrollerutil "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/infrastructure/internal/infra"
	"github.com/talon-capi/talon/internal/record"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=talosdockerclusters;talosdockerclusters/status;talosdockerclusters/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=talosdockermachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// clusterFinalizer holds a TalosDockerCluster until its load balancer and network are gone.
const clusterFinalizer = "talosdockercluster.infrastructure.cluster.x-k8s.io"

// converging and retryConflict: see the infra package.
const (
	converging    = infra.Converging
	retryConflict = infra.RetryConflict
)

// ClusterReconciler provisions a TalosDockerCluster: the cluster network and the load
// balancer that serves the control-plane endpoint in front of the control-plane nodes.
type ClusterReconciler struct {
	Client  client.Client
	Runtime runtime.Runtime
	// LoadBalancerImage runs `talon lb` when a TalosDockerCluster names no image.
	LoadBalancerImage string
	// WatchFilterValue limits reconciliation to objects labelled with it.
	WatchFilterValue string
	// Events records the load balancer's changes; optional.
	Events events.EventRecorder
}

// SetupWithManager registers the reconciler with mgr.
func (r *ClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.Runtime == nil {
		return errors.New("talosdockercluster reconciler needs a Client and a Runtime")
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "talosdockercluster")
	err := capicontrollerutil.NewControllerManagedBy(mgr, log).
		For(&infrav1.TalosDockerCluster{}, builder.WithPredicates(predicates.ResourceIsNotExternallyManaged(mgr.GetScheme(), log))).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("TalosDockerCluster"), mgr.GetClient(), &infrav1.TalosDockerCluster{})),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		// Control-plane nodes come and go with their TalosDockerMachines: the load balancer follows.
		Watches(&infrav1.TalosDockerMachine{}, handler.EnqueueRequestsFromMapFunc(r.machineToCluster)).
		Complete(ctx, r)
	if err != nil {
		return fmt.Errorf("failed to set up the talosdockercluster controller: %w", err)
	}
	return nil
}

// machineToCluster maps a TalosDockerMachine to the TalosDockerCluster of its Cluster.
func (r *ClusterReconciler) machineToCluster(ctx context.Context, o client.Object) []ctrl.Request {
	name, ok := o.GetLabels()[clusterv1.ClusterNameLabel]
	if !ok {
		return nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: name}, cluster); err != nil {
		return nil
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != "TalosDockerCluster" || ref.APIGroup != infrav1.GroupVersion.Group {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}}
}

// Reconcile brings one TalosDockerCluster closer to its spec.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	dc := &infrav1.TalosDockerCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, dc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if annotations.IsExternallyManaged(dc) {
		// Someone else provides the network and endpoint (cluster.x-k8s.io/managed-by).
		ctrl.LoggerFrom(ctx).V(4).Info("The TalosDockerCluster is managed by someone else")
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, dc.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if cluster == nil {
		if !dc.DeletionTimestamp.IsZero() {
			return r.deleteOrphan(ctx, dc)
		}
		ctrl.LoggerFrom(ctx).V(4).Info("Waiting for the Cluster to own the TalosDockerCluster")
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster)))
	patchHelper, err := patch.NewHelper(dc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, dc); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	defer func() {
		dc.Status.ObservedGeneration = dc.Generation
		reterr = errors.Join(reterr, infra.PatchReady(ctx, patchHelper, "TalosDockerCluster", dc,
			infrav1.NetworkReadyCondition, infrav1.LoadBalancerAvailableCondition))
	}()

	key := runtime.Cluster{Namespace: cluster.Namespace, Name: cluster.Name}
	if !dc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, key, dc)
	}
	if controllerutil.AddFinalizer(dc, clusterFinalizer) {
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, key, dc)
}

// NetworkName is the Docker network of a cluster unless its TalosDockerCluster names one.
func NetworkName(cluster runtime.Cluster) string {
	return "talon-" + cluster.Namespace + "-" + cluster.Name
}

// LoadBalancerName is the name of a cluster's load balancer container.
func LoadBalancerName(cluster runtime.Cluster) string {
	return cluster.Name + "-lb"
}

func (r *ClusterReconciler) reconcileNormal(ctx context.Context, key runtime.Cluster, dc *infrav1.TalosDockerCluster) (ctrl.Result, error) {
	spec := runtime.NetworkSpec{Name: dc.Spec.Network.Name, MTU: int(dc.Spec.Network.MTU)}
	if spec.Name == "" {
		spec.Name = NetworkName(key)
	}
	if dc.Spec.Network.Subnet != "" {
		subnet, err := netip.ParsePrefix(dc.Spec.Network.Subnet)
		if err != nil {
			// The webhook refuses this; it can only come from objects written around it.
			infra.SetFalsef(dc, infrav1.NetworkReadyCondition, infrav1.ProvisioningFailedReason, "spec.network.subnet %q is not a CIDR: %v", dc.Spec.Network.Subnet, err)
			return ctrl.Result{}, nil
		}
		spec.Subnet = subnet
	}
	network, err := r.Runtime.EnsureNetwork(ctx, key, spec)
	if err != nil {
		return failed(dc, infrav1.NetworkReadyCondition, "Cannot create network "+spec.Name, err)
	}
	dc.Status.Network = infrav1.DockerNetworkStatus{Name: network.Name, Subnet: network.Subnet.String()}
	infra.SetTruef(dc, infrav1.NetworkReadyCondition, "Network %s has subnet %s", network.Name, network.Subnet)

	image := dc.Spec.LoadBalancer.Image
	if image == "" {
		image = r.LoadBalancerImage
	}
	lb, err := r.Runtime.EnsureLoadBalancer(ctx, runtime.LoadBalancerSpec{
		Cluster: key, Name: LoadBalancerName(key), Image: image, Network: network.Name,
		Address: runtime.LoadBalancerAddress(network.Subnet), HostPort: int(dc.Spec.LoadBalancer.HostPort),
	})
	if err != nil {
		return failed(dc, infrav1.LoadBalancerAvailableCondition, "Cannot start load balancer "+LoadBalancerName(key), err)
	}
	nodes, err := r.Runtime.Nodes(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	var backends []netip.Addr
	result := ctrl.Result{}
	for _, n := range nodes {
		switch {
		case n.Role != runtime.RoleControlPlane:
		case n.Address.IsValid():
			backends = append(backends, n.Address)
		default:
			// A container Docker has not given its address yet joins once it has one.
			result.RequeueAfter = converging
		}
	}
	slices.SortFunc(backends, netip.Addr.Compare)
	current := slices.Clone(lb.Backends)
	slices.SortFunc(current, netip.Addr.Compare)
	if !slices.Equal(backends, current) {
		if err := r.Runtime.SetBackends(ctx, key, backends); err != nil {
			return failed(dc, infrav1.LoadBalancerAvailableCondition, "Cannot update load balancer "+lb.Name, err)
		}
		record.Event(r.Events, dc, corev1.EventTypeNormal, "LoadBalancerBackendsChanged", "SetBackends",
			"Load balancer %s sends %s:%d to the control-plane nodes %v (was %v)", lb.Name, lb.Address, runtime.APIServerPort, backends, current)
	}
	dc.Status.LoadBalancer = infrav1.DockerLoadBalancerStatus{Address: lb.Address.String(), HostPort: int32(lb.HostPort)}
	for _, b := range backends {
		dc.Status.LoadBalancer.Backends = append(dc.Status.LoadBalancer.Backends, b.String())
	}
	if len(backends) == 0 {
		infra.SetTruef(dc, infrav1.LoadBalancerAvailableCondition, "Load balancer %s serves %s:%d; no control-plane node yet", lb.Name, lb.Address, runtime.APIServerPort)
	} else {
		infra.SetTruef(dc, infrav1.LoadBalancerAvailableCondition, "Load balancer %s serves %s:%d for %d control-plane nodes", lb.Name, lb.Address, runtime.APIServerPort, len(backends))
	}

	if !dc.Spec.ControlPlaneEndpoint.IsValid() {
		dc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: lb.Address.String(), Port: runtime.APIServerPort}
	}
	dc.Status.FailureDomains = dc.Spec.FailureDomains
	dc.Status.Initialization.Provisioned = ptr.To(true)
	return result, nil
}

// reconcileDelete removes the load balancer and the network once the cluster's last node
// is gone (Cluster API deletes the Machines first).
func (r *ClusterReconciler) reconcileDelete(ctx context.Context, key runtime.Cluster, dc *infrav1.TalosDockerCluster) (ctrl.Result, error) {
	nodes, err := r.Runtime.Nodes(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(nodes) > 0 {
		infra.SetFalsef(dc, infrav1.LoadBalancerAvailableCondition, infrav1.DeletingReason,
			"Waiting for %d nodes to be deleted before the load balancer and network go (first: %s)", len(nodes), nodes[0].Name)
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	if err := r.Runtime.DeleteLoadBalancer(ctx, key); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to delete the load balancer of cluster %s: %w", key, err)
	}
	if err := r.Runtime.DeleteNetwork(ctx, key); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to delete the network of cluster %s: %w", key, err)
	}
	record.Event(r.Events, dc, corev1.EventTypeNormal, "LoadBalancerDeleted", "Delete", "Deleted load balancer %s and the cluster's network", LoadBalancerName(key))
	controllerutil.RemoveFinalizer(dc, clusterFinalizer)
	return ctrl.Result{}, nil
}

// deleteOrphan removes everything of a TalosDockerCluster whose Cluster is gone (its
// nodes too: no Machine is left to remove them), then releases it.
func (r *ClusterReconciler) deleteOrphan(ctx context.Context, dc *infrav1.TalosDockerCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(dc, clusterFinalizer) {
		return ctrl.Result{}, nil
	}
	name := dc.Labels[clusterv1.ClusterNameLabel]
	for _, ref := range dc.OwnerReferences {
		if ref.Kind == "Cluster" {
			name = ref.Name
		}
	}
	if name != "" {
		key := runtime.Cluster{Namespace: dc.Namespace, Name: name}
		nodes, err := r.Runtime.Nodes(ctx, key)
		if err != nil {
			return ctrl.Result{}, err
		}
		for _, n := range nodes {
			if err := r.Runtime.DeleteNode(ctx, key, n.Machine); err != nil {
				return ctrl.Result{}, fmt.Errorf("failed to delete node %s of cluster %s: %w", n.Name, key, err)
			}
		}
		if err := errors.Join(r.Runtime.DeleteLoadBalancer(ctx, key), r.Runtime.DeleteNetwork(ctx, key)); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to delete the load balancer and network of cluster %s: %w", key, err)
		}
	}
	patch := client.MergeFrom(dc.DeepCopy())
	controllerutil.RemoveFinalizer(dc, clusterFinalizer)
	return ctrl.Result{}, r.Client.Patch(ctx, dc, patch)
}

// failed records err on condition: a conflict is the user's to resolve and is retried
// slowly; anything else is returned for the controller's backoff.
func failed(obj conditions.Setter, condition, doing string, err error) (ctrl.Result, error) {
	if errors.Is(err, runtime.ErrConflict) {
		infra.SetFalsef(obj, condition, infrav1.ConflictReason, "%s: %v", doing, err)
		return ctrl.Result{RequeueAfter: retryConflict}, nil
	}
	infra.SetFalsef(obj, condition, infrav1.ProvisioningFailedReason, "%s: %v", doing, err)
	return ctrl.Result{}, fmt.Errorf("%s: %w", doing, err)
}
