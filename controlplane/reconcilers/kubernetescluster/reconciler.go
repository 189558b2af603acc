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

package kubernetescluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
	"github.com/talon-capi/talon/controlplane/pkg/kubernetescluster"
	"github.com/talon-capi/talon/internal/record"
)

// Reasons a KubernetesCluster waits for a person, on its Ready condition.
const (
	// ReasonNoClusterClass: no ClusterClass is named, or the one named does not exist.
	ReasonNoClusterClass = "ClusterClassNotFound"
	// ReasonBadAnnotation: an annotation of the KubernetesCluster cannot be read.
	ReasonBadAnnotation = "InvalidAnnotation"
	// ReasonVersionUnresolved: the version names a minor the class has no patch of.
	ReasonVersionUnresolved = "VersionUnresolved"
	// ReasonClusterRefused: Cluster API refused the Cluster (its webhooks, the class's
	// variable schemas).
	ReasonClusterRefused = "ClusterRefused"
	// ReasonClusterNameTaken: a Cluster of the KubernetesCluster's name exists and is not its.
	ReasonClusterNameTaken = "ClusterNameTaken"
	// ReasonClusterForbidden: the API server forbade the control-plane manager to write the
	// Cluster for something other than what it holds (its RBAC, a quota, a namespace being
	// deleted). Nothing in the KubernetesCluster fixes it, and nothing the controller watches
	// changes when it is fixed, so the write is retried with backoff meanwhile.
	ReasonClusterForbidden = "ClusterForbidden"
	// ReasonClusterMissing: the Cluster the KubernetesCluster created (its
	// vitiv1.ClusterCreatedAnnotation) is not there. During clusterctl move it comes after the
	// KubernetesCluster; otherwise it was deleted while the control-plane manager was not
	// running, and a person removes the annotation to have a new one made.
	ReasonClusterMissing = "ClusterMissing"
)

// manager names the controller in events and in status.state.lastUpdatedBy.
const manager = "talon-control-plane-manager"

// Reconciler builds each KubernetesCluster as a Cluster of a ClusterClass, follows its spec
// and reports its state.
type Reconciler struct {
	Client client.Client
	// APIReader reads from the API server, past Client's cache; Client when nil.
	APIReader client.Reader
	// Class is the ClusterClass of KubernetesClusters without the vitiv1.ClusterClassAnnotation
	// ("name" in the KubernetesCluster's namespace, or "namespace/name").
	Class string
	// Events records Clusters created and deleted; optional.
	Events events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=vitistack.io,resources=kubernetesclusters;kubernetesclusters/status;kubernetesclusters/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusterclasses;machinedeployments;machines,verbs=get;list;watch

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return errors.New("kubernetescluster reconciler needs a Client")
	}
	byClusterName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[clusterv1.ClusterNameLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	})
	err := ctrl.NewControllerManagedBy(mgr).
		Named("kubernetescluster").
		// Its own status writes do not wake it: spec and annotation changes do.
		For(&vitiv1.KubernetesCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// Its own Cluster, and one of its name it did not make (deleting that one lets it
		// build its own).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		})).
		Watches(&clusterv1.MachineDeployment{}, byClusterName).
		Watches(&clusterv1.Machine{}, byClusterName).
		// A ClusterClass applied after the KubernetesClusters that wait for it.
		Watches(&clusterv1.ClusterClass{}, handler.EnqueueRequestsFromMapFunc(r.waitingForClass), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(options).
		Complete(r)
	if err != nil {
		return fmt.Errorf("failed to set up the kubernetescluster controller: %w", err)
	}
	return nil
}

// waitingForClass returns the KubernetesClusters that wait for a person.
func (r *Reconciler) waitingForClass(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &vitiv1.KubernetesClusterList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	var requests []reconcile.Request
	for _, kc := range list.Items {
		if kc.Status.Phase == vitiv1.PhaseFailed {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&kc)})
		}
	}
	return requests
}

func (r *Reconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now())
	}
	return metav1.Now()
}

// Reconcile creates or updates the KubernetesCluster's Cluster, or deletes it with the
// KubernetesCluster, and reports the cluster's state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kc := &vitiv1.KubernetesCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, kc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := kc.DeepCopy()
	if _, moving := kc.Annotations[clusterctlv1.DeleteForMoveAnnotation]; moving {
		// clusterctl move copied it, with its Cluster, to another management cluster and is
		// deleting it here. Its patch replaced every annotation, the record among them: nothing
		// is made from it any more.
		if kc.DeletionTimestamp.IsZero() || !controllerutil.RemoveFinalizer(kc, vitiv1.Finalizer) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.Client.Patch(ctx, kc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}
	if !kc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, kc, before)
	}
	// The finalizer is recorded before the Cluster exists, so that no Cluster outlives its
	// KubernetesCluster.
	if controllerutil.AddFinalizer(kc, vitiv1.Finalizer) {
		if err := r.Client.Patch(ctx, kc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err
		}
		before = kc.DeepCopy()
	}
	observed, reason, err := r.apply(ctx, kc)
	// apply may have written the record of the Cluster's creation: the status patch carries
	// the status alone.
	before.ObjectMeta = *kc.ObjectMeta.DeepCopy()
	switch {
	case reason != "":
		kubernetescluster.SetFailed(kc, reason, err.Error(), r.now(), manager)
		if reason == ReasonClusterForbidden {
			// Retried with backoff: no event comes when the manager's role is fixed.
			if patchErr := r.patchStatus(ctx, kc, before); patchErr != nil {
				return ctrl.Result{}, patchErr
			}
			return ctrl.Result{}, err
		}
	case err != nil:
		return ctrl.Result{}, err
	default:
		kubernetescluster.SetStatus(kc, observed, r.now(), manager)
	}
	return ctrl.Result{}, r.patchStatus(ctx, kc, before)
}

// apply makes the Cluster what the KubernetesCluster asks for and reads it back with its
// MachineDeployments and Machines. A refusal a person must act on comes with its reason.
func (r *Reconciler) apply(ctx context.Context, kc *vitiv1.KubernetesCluster) (kubernetescluster.Observed, string, error) {
	classRef, err := kubernetescluster.Class(kc, r.Class)
	if err != nil {
		return kubernetescluster.Observed{}, ReasonNoClusterClass, err
	}
	variables, err := kubernetescluster.Variables(kc)
	if err != nil {
		return kubernetescluster.Observed{}, ReasonBadAnnotation, err
	}
	class := &clusterv1.ClusterClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: classRef.Namespace, Name: classRef.Name}, class); apierrors.IsNotFound(err) {
		return kubernetescluster.Observed{}, ReasonNoClusterClass, fmt.Errorf(
			"ClusterClass %s/%s does not exist: apply it (templates/clusterclass-talos-docker.yaml or clusterclass-talos-metal.yaml), or name another in the %s annotation",
			classRef.Namespace, classRef.Name, vitiv1.ClusterClassAnnotation)
	} else if err != nil {
		return kubernetescluster.Observed{}, "", err
	}
	version, err := kubernetescluster.ResolveVersion(kc.Spec.Topology.Version, class.Spec.KubernetesVersions)
	if err != nil {
		return kubernetescluster.Observed{}, ReasonVersionUnresolved, err
	}
	in := kubernetescluster.Inputs{Class: classRef, Version: version, Variables: variables}

	cluster := &clusterv1.Cluster{}
	paused := false
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(kc), cluster)
	if apierrors.IsNotFound(err) && kc.Annotations[vitiv1.ClusterCreatedAnnotation] != "" {
		// The cache may not hold yet a Cluster created a moment ago: the API server knows.
		err = r.reader().Get(ctx, client.ObjectKeyFromObject(kc), cluster)
	}
	switch {
	case apierrors.IsNotFound(err):
		if created := kc.Annotations[vitiv1.ClusterCreatedAnnotation]; created != "" {
			return kubernetescluster.Observed{}, ReasonClusterMissing, fmt.Errorf(
				"cluster %s, which this KubernetesCluster created at %s, is not there: clusterctl move brings it after the KubernetesCluster, so wait while a move runs; "+
					"if it was deleted while the control-plane manager was not running, or its creation failed in a way the API server could not tell, remove the %s annotation and a new Cluster is made",
				kc.Name, created, vitiv1.ClusterCreatedAnnotation)
		}
		if cluster, err = kubernetescluster.Cluster(kc, in); err != nil {
			return kubernetescluster.Observed{}, "", err
		}
		if err := controllerutil.SetControllerReference(kc, cluster, r.Client.Scheme()); err != nil {
			return kubernetescluster.Observed{}, "", err
		}
		// Recorded before the Cluster exists: a KubernetesCluster that clusterctl move brings
		// to another management cluster before its Cluster, or that the move is deleting
		// after its Cluster, must not make a second one.
		if err := r.recordCreated(ctx, kc, r.now().UTC().Format(time.RFC3339)); err != nil {
			return kubernetescluster.Observed{}, "", err
		}
		if err := r.Client.Create(ctx, cluster); err != nil {
			if r.storedNothing(ctx, kc, err) {
				if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return r.dropRecord(ctx, kc) }); err != nil {
					return kubernetescluster.Observed{}, "", err
				}
			}
			return kubernetescluster.Observed{}, refusal(err), refused(cluster, err)
		}
		record.Event(r.Events, kc, corev1.EventTypeNormal, "ClusterCreated", "Create", "Created Cluster %s of ClusterClass %s/%s, Kubernetes %s", cluster.Name, classRef.Namespace, classRef.Name, version)
	case err != nil:
		return kubernetescluster.Observed{}, "", err
	case !metav1.IsControlledBy(cluster, kc):
		return kubernetescluster.Observed{}, ReasonClusterNameTaken, fmt.Errorf(
			"a Cluster named %s exists in %s that this KubernetesCluster did not create; it is left alone: delete it, or give the KubernetesCluster another name", cluster.Name, cluster.Namespace)
	case !cluster.DeletionTimestamp.IsZero():
		if _, moving := cluster.Annotations[clusterctlv1.DeleteForMoveAnnotation]; moving {
			// clusterctl move copied it to another management cluster: the KubernetesCluster
			// follows it there and is deleted here next.
			return kubernetescluster.Observed{}, "", fmt.Errorf("cluster %s is being moved to another management cluster by clusterctl move", cluster.Name)
		}
		// A Cluster deleted from under its KubernetesCluster is made again once it is gone.
		if err := r.recordCreated(ctx, kc, ""); err != nil {
			return kubernetescluster.Observed{}, "", err
		}
		return kubernetescluster.Observed{}, "", fmt.Errorf("cluster %s is being deleted; it is created again once gone", cluster.Name)
	default:
		// A Cluster made before the record was kept is recorded when seen.
		if err := r.recordCreated(ctx, kc, cmp.Or(kc.Annotations[vitiv1.ClusterCreatedAnnotation], cluster.CreationTimestamp.UTC().Format(time.RFC3339))); err != nil {
			return kubernetescluster.Observed{}, "", err
		}
		old := cluster.DeepCopy()
		if err := kubernetescluster.Update(cluster, kc, in); err != nil {
			return kubernetescluster.Observed{}, "", err
		}
		switch {
		case equality.Semantic.DeepEqual(old, cluster):
		case ptr.Deref(old.Spec.Paused, false):
			// A paused Cluster (clusterctl move pauses it) is left as it is until resumed.
			paused, cluster = true, old
		default:
			if err := r.Client.Patch(ctx, cluster, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{})); err != nil {
				return kubernetescluster.Observed{}, refusal(err), refused(cluster, err)
			}
		}
	}

	observed := kubernetescluster.Observed{Cluster: cluster, Version: version, Paused: paused}
	mds := &clusterv1.MachineDeploymentList{}
	machines := &clusterv1.MachineList{}
	inCluster := []client.ListOption{client.InNamespace(kc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}}
	if err := r.Client.List(ctx, mds, inCluster...); err != nil {
		return observed, "", err
	}
	if err := r.Client.List(ctx, machines, inCluster...); err != nil {
		return observed, "", err
	}
	observed.MachineDeployments, observed.Machines = mds.Items, machines.Items
	return observed, "", nil
}

// refusal is why the API server refused to take the Cluster: ReasonClusterRefused for what
// it holds (a validation, a webhook's or an admission policy's denial), ReasonClusterForbidden
// for what the manager may do (RBAC, quotas); empty for errors worth a retry alone.
func refusal(err error) string {
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return ReasonClusterRefused
	case apierrors.IsForbidden(err):
		// The API server words a webhook's denial `admission webhook "<name>" denied the
		// request: ...` and an admission policy's `... denied request: ...`; both answer 403
		// unless they say otherwise, like an RBAC refusal.
		if msg := err.Error(); strings.Contains(msg, "denied the request") || strings.Contains(msg, "denied request") {
			return ReasonClusterRefused
		}
		return ReasonClusterForbidden
	}
	return ""
}

// reader reads past the cache.
func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// storedNothing tells whether the create of kc's Cluster that returned err stored nothing:
// the API server answered and did not take it (or another object holds the name), or, after
// a timeout, a server error (an unreachable webhook) or no answer, it finds no such Cluster.
func (r *Reconciler) storedNothing(ctx context.Context, kc *vitiv1.KubernetesCluster, err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) &&
		!apierrors.IsInternalError(err) && !apierrors.IsUnexpectedServerError(err) {
		return true
	}
	return apierrors.IsNotFound(r.reader().Get(ctx, client.ObjectKeyFromObject(kc), &clusterv1.Cluster{}))
}

// dropRecord removes the record of the Cluster's creation from kc, reading kc again first
// when it is stale.
func (r *Reconciler) dropRecord(ctx context.Context, kc *vitiv1.KubernetesCluster) error {
	err := r.recordCreated(ctx, kc, "")
	if apierrors.IsConflict(err) {
		if getErr := r.reader().Get(ctx, client.ObjectKeyFromObject(kc), kc); getErr != nil {
			return getErr
		}
	}
	return err
}

// recordCreated writes value (the time the Cluster was created) into the KubernetesCluster's
// vitiv1.ClusterCreatedAnnotation, or removes it when value is empty, unless it already says so.
func (r *Reconciler) recordCreated(ctx context.Context, kc *vitiv1.KubernetesCluster, value string) error {
	if kc.Annotations[vitiv1.ClusterCreatedAnnotation] == value {
		return nil
	}
	before := kc.DeepCopy()
	if value == "" {
		delete(kc.Annotations, vitiv1.ClusterCreatedAnnotation)
	} else {
		metav1.SetMetaDataAnnotation(&kc.ObjectMeta, vitiv1.ClusterCreatedAnnotation, value)
	}
	if err := r.Client.Patch(ctx, kc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		*kc = *before
		return fmt.Errorf("failed to record on KubernetesCluster %s whether its Cluster was created: %w", kc.Name, err)
	}
	return nil
}

// refused is err with what a person can do about it.
func refused(cluster *clusterv1.Cluster, err error) error {
	switch refusal(err) {
	case ReasonClusterRefused:
		return fmt.Errorf("cluster API refused Cluster %s: %w; change the KubernetesCluster (or its ClusterClass) to fix it", cluster.Name, err)
	case ReasonClusterForbidden:
		return fmt.Errorf("the control-plane manager may not write Cluster %s: %w; check its RBAC (re-apply the control-plane provider's components) and the namespace's quotas: it retries meanwhile", cluster.Name, err)
	}
	return err
}

// delete deletes the KubernetesCluster's Cluster, waits until it is gone (its Machines, and
// so its nodes, go first), then lets the KubernetesCluster go.
func (r *Reconciler) delete(ctx context.Context, kc, before *vitiv1.KubernetesCluster) error {
	if !controllerutil.ContainsFinalizer(kc, vitiv1.Finalizer) {
		return nil
	}
	cluster := &clusterv1.Cluster{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(kc), cluster)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil && metav1.IsControlledBy(cluster, kc) {
		if cluster.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, cluster); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			record.Event(r.Events, kc, corev1.EventTypeNormal, "ClusterDeleting", "Delete", "Deleting Cluster %s and its nodes", cluster.Name)
		}
		kubernetescluster.SetDeleting(kc, fmt.Sprintf("deleting Cluster %s and its nodes", cluster.Name), r.now(), manager)
		return r.patchStatus(ctx, kc, before)
	}
	controllerutil.RemoveFinalizer(kc, vitiv1.Finalizer)
	return r.Client.Patch(ctx, kc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// patchStatus writes the status when it changed.
func (r *Reconciler) patchStatus(ctx context.Context, kc, before *vitiv1.KubernetesCluster) error {
	if equality.Semantic.DeepEqual(before.Status, kc.Status) {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, kc, client.MergeFrom(before)))
}
