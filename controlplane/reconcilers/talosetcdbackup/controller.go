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

package talosetcdbackup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
	"github.com/talon-capi/talon/controlplane/pkg/etcdbackup"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/internal/record"
)

// The reasons of a backup's Ready condition, besides the store's (etcdbackup.Error).
const (
	// StoredReason: the snapshot is complete in the store.
	StoredReason = "Stored"
	// UploadingReason: a snapshot is being streamed to the store.
	UploadingReason = "Uploading"
	// ClusterNotFoundReason: spec.clusterName names no Cluster in the namespace.
	ClusterNotFoundReason = "ClusterNotFound"
	// NotTalosControlPlaneReason: the Cluster's control plane is not a TalosControlPlane.
	NotTalosControlPlaneReason = "NotTalosControlPlane"
	// WaitingForControlPlaneReason: the control plane is not initialized yet.
	WaitingForControlPlaneReason = "WaitingForControlPlane"
	// NoHealthyMemberReason: no etcd member answered healthy through the Talos API.
	NoHealthyMemberReason = "NoHealthyMember"
	// SnapshotFailedReason: the node's snapshot stream broke off.
	SnapshotFailedReason = "SnapshotFailed"
	// RetryingReason: something else failed (reading the cluster's secrets, the API server).
	RetryingReason = "Retrying"
)

// MaxAttempts is how many uploads a backup starts before it fails for good on errors that
// a retry could fix (an unreachable store, a stream that broke off).
const MaxAttempts = 3

// waitInterval is how long a backup that waits for something outside Talon (a Secret, a
// store, a healthy member) waits before it looks again: long enough not to hammer a store.
const waitInterval = time.Minute

// uploadTimeout bounds one upload; the Talos client bounds the snapshot stream the same.
const uploadTimeout = 10 * time.Minute

// Reconciler takes TalosEtcdBackups.
type Reconciler struct {
	Client       client.Client
	TalosClients talosclient.Factory
	// Events records backups that succeeded or failed; optional.
	Events events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=talosetcdbackups;talosetcdbackups/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=taloscontrolplanes,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.TalosClients == nil {
		return errors.New("talosetcdbackup reconciler needs a Client and TalosClients")
	}
	err := ctrl.NewControllerManagedBy(mgr).
		// Only spec changes: the reconciler's own status writes must not start another
		// attempt at once (a backup that waits looks again after waitInterval).
		For(&controlplanev1.TalosEtcdBackup{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A control plane that becomes initialized lets its waiting backups start.
		Watches(&controlplanev1.TalosControlPlane{}, handler.EnqueueRequestsFromMapFunc(r.backupsOfControlPlane)).
		WithOptions(options).
		Complete(r)
	if err != nil {
		return fmt.Errorf("failed to set up the talosetcdbackup controller: %w", err)
	}
	return nil
}

// backupsOfControlPlane maps a TalosControlPlane to the unfinished backups of its cluster.
func (r *Reconciler) backupsOfControlPlane(ctx context.Context, o client.Object) []ctrl.Request {
	cluster := o.GetLabels()[clusterv1.ClusterNameLabel]
	if cluster == "" {
		return nil
	}
	list := &controlplanev1.TalosEtcdBackupList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var requests []ctrl.Request
	for _, b := range list.Items {
		if b.Spec.ClusterName == cluster && !finished(&b) {
			requests = append(requests, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&b)})
		}
	}
	return requests
}

func finished(b *controlplanev1.TalosEtcdBackup) bool {
	return b.Status.Phase == controlplanev1.EtcdBackupSucceeded || b.Status.Phase == controlplanev1.EtcdBackupFailed
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// waiting is a backup that cannot start now, with why: a condition reason and message.
type waiting struct {
	reason, message string
	// permanent waits are failures: nothing Talon does will change them.
	permanent bool
}

func (w *waiting) Error() string { return w.message }

// Reconcile takes the backup once: it records the object key and the attempt, streams the
// snapshot, then records the result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &controlplanev1.TalosEtcdBackup{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if finished(b) || !b.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// An attempt that failed is followed by the next one no sooner than waitInterval after
	// it started, however often other events (its control plane's) wake the backup.
	if b.Status.Phase == controlplanev1.EtcdBackupPending && b.Status.StartTime != nil {
		if wait := b.Status.StartTime.Add(waitInterval).Sub(r.now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	before := b.DeepCopy()
	t, err := r.target(ctx, b)
	if err != nil {
		return r.wait(ctx, b, before, err)
	}
	defer t.close()

	// The record comes first: the key the snapshot goes to and that an attempt started.
	// A manager that dies in the middle leaves an aborted (invisible) multipart upload, and
	// the next one starts another attempt under the same key.
	if b.Status.Key == "" {
		b.Status.Key = objectKey(b, t.encrypted)
	}
	start := metav1.NewTime(r.now())
	b.Status.Phase = controlplanev1.EtcdBackupRunning
	b.Status.StartTime = &start
	b.Status.Attempts++
	b.Status.Encrypted = t.encrypted
	b.Status.Member = t.member
	b.Status.TalosVersion = t.talosVersion
	b.Status.KubernetesVersion = t.tcp.Spec.Version
	setReady(b, metav1.ConditionFalse, UploadingReason, fmt.Sprintf("Streaming the etcd snapshot of %s to %s", t.member, b.Status.Key))
	if err := r.patch(ctx, b, before); err != nil {
		return ctrl.Result{}, err
	}
	before = b.DeepCopy()

	uploadCtx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	written, err := r.upload(uploadCtx, t, b.Status.Key)
	if err != nil {
		return r.wait(ctx, b, before, err)
	}
	end := metav1.NewTime(r.now())
	b.Status.Phase = controlplanev1.EtcdBackupSucceeded
	b.Status.CompletionTime = &end
	b.Status.Size = &written.Size
	b.Status.SHA256 = written.SHA256
	setReady(b, metav1.ConditionTrue, StoredReason, fmt.Sprintf("%d bytes in %s, SHA-256 %s", written.Size, b.Status.Key, written.SHA256))
	if err := r.patch(ctx, b, before); err != nil {
		return ctrl.Result{}, err
	}
	labels := []string{b.Namespace, b.Spec.ClusterName}
	lastSuccess.WithLabelValues(labels...).Set(float64(end.Unix()))
	lastDuration.WithLabelValues(labels...).Set(end.Sub(start.Time).Seconds())
	lastSize.WithLabelValues(labels...).Set(float64(written.Size))
	record.Event(r.Events, b, corev1.EventTypeNormal, "BackupSucceeded", "Backup", "Stored %d bytes of %s's etcd (member on %s) in %s", written.Size, b.Spec.ClusterName, t.member, b.Status.Key)
	return ctrl.Result{}, nil
}

// upload streams the member's snapshot to key.
func (r *Reconciler) upload(ctx context.Context, t *target, key string) (etcdbackup.Written, error) {
	snapshot, err := t.node.EtcdSnapshot(ctx)
	if err != nil {
		return etcdbackup.Written{}, &waiting{reason: SnapshotFailedReason, message: fmt.Sprintf("%s did not start a snapshot: %v", t.member, err)}
	}
	defer func() { _ = snapshot.Close() }()
	src := &etcdbackup.RecordingReader{R: snapshot}
	written, err := t.store.Put(ctx, key, src, t.key)
	if err != nil && src.Err != nil {
		return written, &waiting{reason: SnapshotFailedReason, message: fmt.Sprintf("the snapshot stream from %s broke off: %v", t.member, src.Err)}
	}
	return written, err
}

// wait records why the backup is not done: Pending, to look again in a while, or Failed
// when retrying cannot help or the attempts are used up.
func (r *Reconciler) wait(ctx context.Context, b, before *controlplanev1.TalosEtcdBackup, err error) (ctrl.Result, error) {
	w := &waiting{reason: RetryingReason, message: err.Error()}
	var storeErr *etcdbackup.Error
	switch {
	case errors.As(err, &w):
	case errors.As(err, &storeErr):
		w = &waiting{reason: storeErr.Reason, message: storeErr.Message, permanent: storeErr.Permanent}
	case apierrors.IsConflict(err) || ctx.Err() != nil:
		return ctrl.Result{}, err
	}
	uploaded := b.Status.Phase == controlplanev1.EtcdBackupRunning
	if uploaded {
		failures.WithLabelValues(b.Namespace, b.Spec.ClusterName, w.reason).Inc()
	}
	if w.permanent || (uploaded && b.Status.Attempts >= MaxAttempts) {
		end := metav1.NewTime(r.now())
		b.Status.Phase = controlplanev1.EtcdBackupFailed
		b.Status.CompletionTime = &end
		message := w.message
		if !w.permanent {
			message = fmt.Sprintf("%s (attempt %d of %d; the backup is not retried: create a new one)", message, b.Status.Attempts, MaxAttempts)
		}
		setReady(b, metav1.ConditionFalse, w.reason, message)
		record.Event(r.Events, b, corev1.EventTypeWarning, "BackupFailed", "Backup", "%s", message)
		return ctrl.Result{}, r.patch(ctx, b, before)
	}
	b.Status.Phase = controlplanev1.EtcdBackupPending
	setReady(b, metav1.ConditionFalse, w.reason, w.message)
	ctrl.LoggerFrom(ctx).Info("Backup waits", "reason", w.reason, "message", w.message)
	return ctrl.Result{RequeueAfter: waitInterval}, r.patch(ctx, b, before)
}

// patch writes the backup's status, refusing to overwrite a change made since it was read.
func (r *Reconciler) patch(ctx context.Context, b, before *controlplanev1.TalosEtcdBackup) error {
	return r.Client.Status().Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func setReady(b *controlplanev1.TalosEtcdBackup, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(b, metav1.Condition{Type: clusterv1.ReadyCondition, Status: status, Reason: reason, Message: message, ObservedGeneration: b.Generation})
}

// objectKey is where a backup's snapshot goes: <prefix><namespace>/<cluster>/<time>-<name>.db,
// with .age when encrypted. The time is the backup's creation, so the key sorts by age.
func objectKey(b *controlplanev1.TalosEtcdBackup, encrypted bool) string {
	prefix := b.Spec.Storage.S3.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	key := fmt.Sprintf("%s%s/%s/%s-%s.db", prefix, b.Namespace, b.Spec.ClusterName, b.CreationTimestamp.UTC().Format("20060102T150405Z"), b.Name)
	if encrypted {
		key += ".age"
	}
	return key
}

// target is what a backup needs to run: the control plane, a member's node, the store.
type target struct {
	tcp          *controlplanev1.TalosControlPlane
	node         talosclient.Client
	member       string
	talosVersion string
	store        *etcdbackup.Store
	key          etcdbackup.Key
	encrypted    bool
}

func (t *target) close() { _ = t.node.Close() }

// target finds everything the backup needs, or says what it waits for.
func (r *Reconciler) target(ctx context.Context, b *controlplanev1.TalosEtcdBackup) (*target, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &waiting{reason: ClusterNotFoundReason, message: fmt.Sprintf("Cluster %s/%s does not exist", b.Namespace, b.Spec.ClusterName)}
		}
		return nil, err
	}
	ref := cluster.Spec.ControlPlaneRef
	if ref.Kind != "TalosControlPlane" || ref.APIGroup != controlplanev1.GroupVersion.Group {
		return nil, &waiting{reason: NotTalosControlPlaneReason, permanent: true,
			message: fmt.Sprintf("the control plane of Cluster %s is a %s, not a TalosControlPlane: Talon backs up only the etcd of the clusters it runs", cluster.Name, ref.Kind)}
	}
	tcp := &controlplanev1.TalosControlPlane{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: ref.Name}, tcp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &waiting{reason: WaitingForControlPlaneReason, message: fmt.Sprintf("TalosControlPlane %s does not exist yet", ref.Name)}
		}
		return nil, err
	}
	if tcp.Status.Initialization.ControlPlaneInitialized == nil || !*tcp.Status.Initialization.ControlPlaneInitialized {
		return nil, &waiting{reason: WaitingForControlPlaneReason, message: fmt.Sprintf("TalosControlPlane %s is not initialized yet: etcd has nothing to back up", tcp.Name)}
	}
	store, key, err := etcdbackup.OpenStorage(ctx, r.Client, b.Namespace, b.Spec.Storage)
	if err != nil {
		return nil, err
	}
	bundle, err := clustersecrets.Get(ctx, r.Client, cluster)
	if err != nil {
		return nil, fmt.Errorf("failed to read the secrets of Cluster %s: %w", cluster.Name, err)
	}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(b.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		return nil, err
	}
	t, err := r.pickMember(ctx, bundle, machines.Items)
	if err != nil {
		return nil, err
	}
	t.tcp, t.store, t.key, t.encrypted = tcp, store, key, !key.IsZero()
	return t, nil
}

// pickMember asks each control-plane node's etcd member how it is through the Talos API and
// picks a healthy voting one, a follower when there is one: a snapshot costs its member
// disk and network, which the leader needs most.
func (r *Reconciler) pickMember(ctx context.Context, bundle *secrets.Bundle, machines []clusterv1.Machine) (*target, error) {
	type candidate struct {
		node     talosclient.Client
		address  string
		follower bool
	}
	var (
		mu         sync.Mutex
		candidates []candidate
		problems   []string
		wg         sync.WaitGroup
	)
	for i := range machines {
		m := &machines[i]
		address := controlplane.MachineAddress(m)
		if address == "" || !m.DeletionTimestamp.IsZero() {
			continue
		}
		wg.Go(func() {
			problem := ""
			node, err := r.TalosClients.New(ctx, bundle, address)
			if err == nil {
				var st talosclient.MemberStatus
				callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				st, err = node.EtcdStatus(callCtx)
				cancel()
				switch {
				case err != nil:
					problem = fmt.Sprintf("%s: %v", address, err)
				case len(st.Errors) > 0:
					problem = fmt.Sprintf("%s: %s", address, strings.Join(st.Errors, "; "))
				}
				mu.Lock()
				defer mu.Unlock()
				if problem == "" {
					candidates = append(candidates, candidate{node: node, address: address, follower: st.ID != st.Leader})
					return
				}
				_ = node.Close()
			} else {
				mu.Lock()
				defer mu.Unlock()
				problem = fmt.Sprintf("%s: %v", address, err)
			}
			problems = append(problems, problem)
		})
	}
	wg.Wait()
	if len(candidates) == 0 {
		message := "no control-plane Machine has an address yet"
		if len(problems) > 0 {
			message = "no etcd member answers healthy through the Talos API: " + strings.Join(problems, "; ")
		}
		return nil, &waiting{reason: NoHealthyMemberReason, message: message}
	}
	best := 0
	for i, c := range candidates {
		if c.follower && !candidates[best].follower || (c.follower == candidates[best].follower && c.address < candidates[best].address) {
			best = i
		}
	}
	for i, c := range candidates {
		if i != best {
			_ = c.node.Close()
		}
	}
	chosen := candidates[best]
	version, err := chosen.node.Version(ctx)
	if err != nil {
		version = ""
	}
	return &target{node: chosen.node, member: chosen.address, talosVersion: version}, nil
}
