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

package taloscontrolplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	capicontrollerutil "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
)

// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=taloscontrolplanes;taloscontrolplanes/status;taloscontrolplanes/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=talosconfigs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=*,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="events.k8s.io",resources=events,verbs=create;patch

// finalizer holds a TalosControlPlane until its Machines are gone.
const finalizer = "controlplane.cluster.x-k8s.io/taloscontrolplane"

// converging is how soon a step that waits for the cluster (a node to answer, a member to
// be promoted, a Machine to go) is looked at again; Machine events usually come sooner.
const converging = 2 * time.Second

// unhealthyRecheck is how soon a control plane whose etcd or components are unhealthy is
// looked at again without an event.
const unhealthyRecheck = 20 * time.Second

// Reconciler creates, scales, rolls out and deletes the control-plane Machines of a
// TalosControlPlane without losing etcd quorum.
type Reconciler struct {
	Client client.Client
	// TalosClients connects to the Talos API of the control-plane nodes.
	TalosClients talosclient.Factory
	// ClusterCache reaches the workload clusters: their Nodes and mirror Pods tell the
	// health of the control-plane components, and Node events wake the reconciler.
	ClusterCache clustercache.ClusterCache
	// WatchFilterValue limits reconciliation to objects labelled with it.
	WatchFilterValue string
	// Events records what the control plane did to etcd and its Machines; optional.
	Events events.EventRecorder

	controller capicontrollerutil.Controller
	learners   learnerClock
	// workerInstalls are the Talos installers running for worker nodes' in-place updates.
	workerInstalls installJobs
}

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.TalosClients == nil || r.ClusterCache == nil {
		return errors.New("taloscontrolplane reconciler needs a Client, TalosClients and a ClusterCache")
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "taloscontrolplane")
	c, err := capicontrollerutil.NewControllerManagedBy(mgr, log).
		For(&controlplanev1.TalosControlPlane{}).
		Owns(&clusterv1.Machine{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToControlPlane),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		// A (re)connection to a workload cluster: its Nodes can be watched and read now.
		WatchesRawSource(r.ClusterCache.GetClusterSource("taloscontrolplane", clusterToControlPlane)).
		Build(ctx, r)
	if err != nil {
		return fmt.Errorf("failed to set up the taloscontrolplane controller: %w", err)
	}
	r.controller = c
	return nil
}

// watchNodes makes the workload cluster's Node events reconcile its TalosControlPlane: a
// node that registers, turns Ready or goes away changes what the control plane may do.
func (r *Reconciler) watchNodes(ctx context.Context, s *scope) error {
	tcp := client.ObjectKeyFromObject(s.tcp)
	return r.ClusterCache.Watch(ctx, client.ObjectKeyFromObject(s.cluster), clustercache.NewWatcher(clustercache.WatcherOptions{
		Name: "taloscontrolplane-watchNodes", Watcher: r.controller, Kind: &corev1.Node{},
		EventHandler: handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
			return []ctrl.Request{{NamespacedName: tcp}}
		}),
	}))
}

// clusterToControlPlane maps a Cluster to its TalosControlPlane.
func clusterToControlPlane(_ context.Context, o client.Object) []ctrl.Request {
	cluster, ok := o.(*clusterv1.Cluster)
	if !ok || cluster.Spec.ControlPlaneRef.Kind != "TalosControlPlane" || cluster.Spec.ControlPlaneRef.APIGroup != controlplanev1.GroupVersion.Group {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Spec.ControlPlaneRef.Name}}}
}

// Reconcile brings one control plane closer to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	tcp := &controlplanev1.TalosControlPlane{}
	if err := r.Client.Get(ctx, req.NamespacedName, tcp); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, tcp.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, err
	}
	if cluster == nil {
		log.V(4).Info("Waiting for the Cluster to own the TalosControlPlane")
		return ctrl.Result{}, nil
	}
	log = log.WithValues("Cluster", klog.KObj(cluster))
	ctx = ctrl.LoggerInto(ctx, log)

	patchHelper, err := patch.NewHelper(tcp, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, tcp); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}

	s, err := r.observe(ctx, cluster, tcp)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		operations := conditionsTrueSince(tcp)
		updateStatus(s)
		if err := patchHelper.Patch(ctx, tcp, patch.WithOwnedConditions{Conditions: ownedConditions}); err != nil {
			reterr = errors.Join(reterr, fmt.Errorf("failed to patch TalosControlPlane %s: %w", klog.KObj(tcp), err))
		} else {
			// Once the conditions that end them are stored, so that each is counted once.
			observeEndedOperations(tcp, operations)
		}
		if controllerutil.ContainsFinalizer(tcp, finalizer) {
			recordEtcdMetrics(s)
		} else {
			forgetEtcdMetrics(cluster.Namespace, cluster.Name)
		}
		reterr = errors.Join(reterr, r.patchMachineConditions(ctx, s))
	}()

	if !tcp.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(tcp, finalizer) {
		// Persist the finalizer before anything is created.
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, s)
}

// reconcileNormal creates, initializes, scales and rolls out.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	orphansDue, err := r.deleteOrphans(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if orphansDue > 0 {
		s.lookAgain(orphansDue)
	}
	if s.initialized() && s.etcd != nil {
		// A control plane initialized before Talon kept the record (or by another provider,
		// whose cluster Talon took over) gets it now.
		if err := r.recordEtcdCluster(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if s.initialized() {
		// Before releasing: a dead orphan member may be what keeps a removal from being safe.
		result, learnersDue := r.removeOrphanMembers(ctx, s)
		if !result.IsZero() {
			return result, nil
		}
		if learnersDue > 0 {
			s.lookAgain(learnersDue)
		}
	}
	if result, err := r.releaseMachines(ctx, s); err != nil || !result.IsZero() {
		return result, err
	}
	if result, err := r.reconcileRemediation(ctx, s); err != nil || !result.IsZero() {
		return result, err
	}
	result, err := r.reconcileMachines(ctx, s)
	if healthy, _ := s.etcdHealth(); s.initialized() && (!healthy || s.componentsErr != nil || len(s.componentProblems()) > 0) {
		// Pods and etcd health send no events: look again while something is wrong, so that
		// the conditions a MachineHealthCheck may watch stay current.
		s.lookAgain(unhealthyRecheck)
	}
	if s.due > 0 && (result.RequeueAfter == 0 || s.due < result.RequeueAfter) {
		result.RequeueAfter = s.due
	}
	return result, err
}

// reconcileMachines creates, initializes, scales and rolls out.
func (r *Reconciler) reconcileMachines(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if !ptr.Deref(s.cluster.Status.Initialization.InfrastructureProvisioned, false) {
		s.waiting = fmt.Sprintf("Waiting for the infrastructure of Cluster %s to be provisioned", s.cluster.Name)
		return ctrl.Result{}, nil
	}
	if s.cluster.Spec.ControlPlaneEndpoint.IsValid() {
		if err := r.reconcileKubeconfig(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if s.bundle == nil {
		// The bootstrap provider creates the bundle when it renders the first config.
		if len(s.machines) == 0 {
			return r.createMachine(ctx, s)
		}
		s.waiting = fmt.Sprintf("Waiting for the secrets bundle of Cluster %s (Secret %s), created with the first machine config",
			s.cluster.Name, clustersecrets.BundleSecretName(s.cluster.Name))
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	if !s.initialized() {
		return r.reconcileInitialization(ctx, s)
	}
	desired := int(ptr.Deref(s.tcp.Spec.Replicas, 1))
	current := len(s.active())
	outdated := s.toReplace()
	maxSurge := int(ptr.Deref(s.tcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge, 1))
	rolling := len(outdated) > 0 && s.tcp.Spec.Rollout.Strategy.Type != controlplanev1.OnDeleteStrategyType
	switch {
	case len(s.deleting()) > 0:
		// One change at a time: wait for the Machine that is going.
		s.waiting = fmt.Sprintf("Waiting for Machine %s to be deleted", s.deleting()[0].Name)
		return ctrl.Result{RequeueAfter: converging}, nil
	case current < desired:
		return r.scaleUp(ctx, s)
	case current > desired:
		return r.scaleDown(ctx, s)
	case rolling && maxSurge > 0:
		log.Info("Rolling out: adding an up-to-date Machine first", "outdated", len(outdated))
		return r.scaleUp(ctx, s)
	case rolling:
		if desired < 3 {
			s.waiting = "Rollout with maxSurge 0 needs at least 3 replicas: removing a Machine first would leave etcd without a spare member"
			return ctrl.Result{}, nil
		}
		log.Info("Rolling out: removing an outdated Machine first", "outdated", len(outdated))
		return r.scaleDown(ctx, s)
	}
	if s.tcp.Spec.Rollout.Strategy.Type == controlplanev1.InPlaceStrategyType {
		result, err := r.reconcileUpdates(ctx, s, s.toUpdate())
		if err != nil || !result.IsZero() {
			return result, err
		}
		if len(s.outdated()) == 0 {
			if err := r.reconcileManifests(ctx, s); err != nil {
				// Tried again soon; the Machines' metadata is carried over meanwhile.
				log.Error(err, "Failed to sync the bootstrap manifests into the workload cluster")
				s.lookAgain(unhealthyRecheck)
			}
		}
	}
	return r.reconcileInPlace(ctx, s)
}

// reconcileDelete removes the Machines newest first, keeping etcd consistent until the
// last, and releases the TalosControlPlane when none is left.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	if len(s.machines) == 0 {
		controllerutil.RemoveFinalizer(s.tcp, finalizer)
		return ctrl.Result{}, nil
	}
	if result, err := r.releaseMachines(ctx, s); err != nil || !result.IsZero() {
		return result, err
	}
	if len(s.deleting()) > 0 {
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	active := s.active()
	newest := slices.MaxFunc(active, func(a, b *clusterv1.Machine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	// Each Machine's member leaves etcd once its Node is drained (releaseMachines), so etcd
	// stays a healthy cluster of the remaining members until the last.
	return ctrl.Result{RequeueAfter: converging}, r.deleteMachine(ctx, newest)
}
