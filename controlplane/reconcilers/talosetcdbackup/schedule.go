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
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/etcdbackup"
	"github.com/talon-capi/talon/internal/record"
)

// The reasons of a schedule's Ready condition.
const (
	// ScheduledReason: backups are taken on schedule and the last one did not fail.
	ScheduledReason = "Scheduled"
	// SuspendedReason: spec.suspend stops new backups.
	SuspendedReason = "Suspended"
	// InvalidScheduleReason: spec.schedule is not a cron expression.
	InvalidScheduleReason = "InvalidSchedule"
	// LastBackupFailedReason: the newest backup of the schedule failed.
	LastBackupFailedReason = "LastBackupFailed"
	// PruneFailedReason: retention could not delete an object.
	PruneFailedReason = "PruneFailed"
	// BackupSkippedReason: a backup was due while the previous one had not finished.
	BackupSkippedReason = "BackupSkipped"
)

// defaultRetention is how many successful backups a schedule keeps unless told.
const defaultRetention = 24

// keptFailures is how many failed backups a schedule keeps, to show what went wrong.
const keptFailures = 3

// ScheduleReconciler takes the backups of TalosEtcdBackupSchedules when they are due and
// deletes those the retention does not keep.
type ScheduleReconciler struct {
	Client client.Client
	// Events records backups started, skipped and pruned; optional.
	Events events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=talosetcdbackupschedules;talosetcdbackupschedules/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=talosetcdbackups,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=taloscontrolplanes,verbs=get;list;watch

// SetupWithManager registers the reconciler with mgr.
func (r *ScheduleReconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return errors.New("talosetcdbackupschedule reconciler needs a Client")
	}
	err := ctrl.NewControllerManagedBy(mgr).
		// Only spec changes: its own status writes must not wake the schedule.
		For(&controlplanev1.TalosEtcdBackupSchedule{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&controlplanev1.TalosEtcdBackup{}).
		WithOptions(options).
		Complete(r)
	if err != nil {
		return fmt.Errorf("failed to set up the talosetcdbackupschedule controller: %w", err)
	}
	return nil
}

func (r *ScheduleReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile takes a backup when one is due (recording the due time first, so that no time
// is backed up twice), prunes what the retention does not keep, and reports.
func (r *ScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &controlplanev1.TalosEtcdBackupSchedule{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := s.DeepCopy()
	schedule, err := cron.ParseStandard(s.Spec.Schedule)
	if err != nil {
		s.Status.NextScheduleTime = nil
		setScheduleReady(s, metav1.ConditionFalse, InvalidScheduleReason,
			fmt.Sprintf("spec.schedule %q is not a cron expression (minute hour day-of-month month day-of-week, or @hourly, @every 30m): %v", s.Spec.Schedule, err))
		return ctrl.Result{}, r.patch(ctx, s, before)
	}
	backups, err := r.backups(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}

	now := r.now()
	var next *metav1.Time
	if !s.Spec.Suspend {
		last := s.CreationTimestamp.Time
		if s.Status.LastScheduleTime != nil {
			last = s.Status.LastScheduleTime.Time
		}
		due := schedule.Next(last)
		if !now.Before(due) {
			// Missed times (the manager was down) are not made up for: only the latest is taken.
			for n := schedule.Next(due); !n.After(now); n = schedule.Next(n) {
				due = n
			}
			// The record comes first: this time is never backed up again.
			s.Status.LastScheduleTime = &metav1.Time{Time: due}
			if err := r.patch(ctx, s, before); err != nil {
				return ctrl.Result{}, err
			}
			before = s.DeepCopy()
			if err := r.takeBackup(ctx, s, backups, due); err != nil {
				return ctrl.Result{}, err
			}
			due = schedule.Next(due)
		}
		next = &metav1.Time{Time: due}
	}
	ready := report(s, backups)
	if s.Spec.Suspend {
		ready = metav1.Condition{Status: metav1.ConditionTrue, Reason: SuspendedReason, Message: "spec.suspend stops new backups"}
	}
	s.Status.NextScheduleTime = next
	result := ctrl.Result{}
	if next != nil {
		result.RequeueAfter = next.Sub(now)
	}
	// Pruning comes after the backup: a store that refuses deletes must not stop backups.
	if err := r.prune(ctx, s, backups); err != nil {
		var storeErr *etcdbackup.Error
		message := err.Error()
		if errors.As(err, &storeErr) {
			message = storeErr.Message
		}
		ready = metav1.Condition{Status: metav1.ConditionFalse, Reason: PruneFailedReason, Message: "Retention could not delete a backup's object, retrying in a minute: " + message}
		if result.RequeueAfter == 0 || result.RequeueAfter > waitInterval {
			result.RequeueAfter = waitInterval
		}
	}
	setScheduleReady(s, ready.Status, ready.Reason, ready.Message)
	return result, r.patch(ctx, s, before)
}

// takeBackup creates the backup due at due, unless one of the schedule is still running.
func (r *ScheduleReconciler) takeBackup(ctx context.Context, s *controlplanev1.TalosEtcdBackupSchedule, backups []controlplanev1.TalosEtcdBackup, due time.Time) error {
	if i := slices.IndexFunc(backups, func(b controlplanev1.TalosEtcdBackup) bool { return !finished(&b) }); i >= 0 {
		record.Event(r.Events, s, corev1.EventTypeWarning, "BackupSkipped", "Schedule", "Skipped the backup due at %s: %s has not finished", due.UTC().Format(time.RFC3339), backups[i].Name)
		return nil
	}
	b := &controlplanev1.TalosEtcdBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", s.Name, due.Unix()), Namespace: s.Namespace,
			Labels: map[string]string{controlplanev1.EtcdBackupScheduleLabel: s.Name, clusterv1.ClusterNameLabel: s.Spec.ClusterName},
		},
		Spec: controlplanev1.TalosEtcdBackupSpec{ClusterName: s.Spec.ClusterName, Storage: s.Spec.Storage},
	}
	if err := controllerutil.SetControllerReference(s, b, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	record.Event(r.Events, s, corev1.EventTypeNormal, "BackupCreated", "Schedule", "Created TalosEtcdBackup %s, due at %s", b.Name, due.UTC().Format(time.RFC3339))
	return nil
}

// backups are the schedule's backups, newest first.
func (r *ScheduleReconciler) backups(ctx context.Context, s *controlplanev1.TalosEtcdBackupSchedule) ([]controlplanev1.TalosEtcdBackup, error) {
	list := &controlplanev1.TalosEtcdBackupList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{controlplanev1.EtcdBackupScheduleLabel: s.Name}); err != nil {
		return nil, err
	}
	// Only the backups this schedule made: a label can be copied, an owner's UID cannot.
	backups := slices.DeleteFunc(list.Items, func(b controlplanev1.TalosEtcdBackup) bool { return !metav1.IsControlledBy(&b, s) })
	slices.SortFunc(backups, func(a, b controlplanev1.TalosEtcdBackup) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(b.Name, a.Name))
	})
	return backups, nil
}

// report puts the newest success and failure in the schedule's status, and says what its
// Ready condition is: False when a backup was skipped because the one before had not
// finished, or when the newest finished backup failed.
func report(s *controlplanev1.TalosEtcdBackupSchedule, backups []controlplanev1.TalosEtcdBackup) metav1.Condition {
	lastFinished := slices.IndexFunc(backups, func(b controlplanev1.TalosEtcdBackup) bool { return finished(&b) })
	ready, reason, message := metav1.ConditionTrue, ScheduledReason, "Backups are taken on schedule"
	for i, b := range backups {
		switch b.Status.Phase {
		case controlplanev1.EtcdBackupSucceeded:
			if s.Status.LastSuccessTime == nil || b.Status.CompletionTime.After(s.Status.LastSuccessTime.Time) {
				s.Status.LastSuccessfulBackup, s.Status.LastSuccessTime = b.Name, b.Status.CompletionTime
			}
		case controlplanev1.EtcdBackupFailed:
			failure := ""
			if c := conditions.Get(&b, clusterv1.ReadyCondition); c != nil {
				failure = c.Message
			}
			if s.Status.LastFailureTime == nil || b.Status.CompletionTime.After(s.Status.LastFailureTime.Time) {
				s.Status.LastFailedBackup, s.Status.LastFailureTime, s.Status.LastFailureMessage = b.Name, b.Status.CompletionTime, failure
			}
			if i == lastFinished {
				ready, reason, message = metav1.ConditionFalse, LastBackupFailedReason, fmt.Sprintf("The last backup, %s, failed: %s", b.Name, failure)
			}
		}
	}
	// A due time recorded after an unfinished backup was created was skipped for it.
	running := slices.IndexFunc(backups, func(b controlplanev1.TalosEtcdBackup) bool { return !finished(&b) })
	if running < 0 || s.Status.LastScheduleTime == nil || !s.Status.LastScheduleTime.After(backups[running].CreationTimestamp.Time) {
		return metav1.Condition{Status: ready, Reason: reason, Message: message}
	}
	b := &backups[running]
	waiting := "it has not started"
	if c := conditions.Get(b, clusterv1.ReadyCondition); c != nil {
		waiting = c.Reason + ": " + c.Message
	}
	return metav1.Condition{Status: metav1.ConditionFalse, Reason: BackupSkippedReason, Message: fmt.Sprintf(
		"The backup due at %s was skipped: %s, created %s, has not finished (%s)",
		s.Status.LastScheduleTime.UTC().Format(time.RFC3339), b.Name, b.CreationTimestamp.UTC().Format(time.RFC3339), waiting)}
}

// prune deletes the backups the retention does not keep: the successful ones beyond the
// count or older than maxAge (never the newest), and failed ones beyond the few kept to
// show what went wrong. Each is marked first (PruneAnnotation), then its object is deleted
// from the store, then the backup: a prune a restart interrupted is finished, never undone.
func (r *ScheduleReconciler) prune(ctx context.Context, s *controlplanev1.TalosEtcdBackupSchedule, backups []controlplanev1.TalosEtcdBackup) error {
	keep := int(defaultRetention)
	if s.Spec.Retention.Count != nil {
		keep = int(*s.Spec.Retention.Count)
	}
	now := r.now()
	restoring, err := r.restoreSources(ctx, s.Namespace)
	if err != nil {
		return err
	}
	succeeded, failed := 0, 0
	for i := range backups {
		b := &backups[i]
		marked := b.Annotations[controlplanev1.PruneAnnotation] != ""
		prune := marked
		switch b.Status.Phase {
		case controlplanev1.EtcdBackupSucceeded:
			succeeded++
			tooOld := s.Spec.Retention.MaxAge != nil && b.Status.CompletionTime != nil && now.Sub(b.Status.CompletionTime.Time) > s.Spec.Retention.MaxAge.Duration
			prune = prune || succeeded > keep || (succeeded > 1 && tooOld)
		case controlplanev1.EtcdBackupFailed:
			failed++
			prune = prune || failed > keptFailures
		}
		// A control plane about to restore this backup keeps it until it has (a prune already
		// begun is finished: its object may be gone).
		if !prune || (!marked && restoring[b.Name]) {
			continue
		}
		if err := r.pruneOne(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// restoreSources are the backups that control planes of namespace not yet initialized name
// in spec.restoreFrom: they will be read when those control planes bootstrap.
func (r *ScheduleReconciler) restoreSources(ctx context.Context, namespace string) (map[string]bool, error) {
	tcps := &controlplanev1.TalosControlPlaneList{}
	if err := r.Client.List(ctx, tcps, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	sources := map[string]bool{}
	for _, tcp := range tcps.Items {
		if tcp.Spec.RestoreFrom != nil && !ptr.Deref(tcp.Status.Initialization.ControlPlaneInitialized, false) {
			sources[tcp.Spec.RestoreFrom.BackupName] = true
		}
	}
	return sources, nil
}

// pruneOne marks b for deletion, deletes its object, then b.
func (r *ScheduleReconciler) pruneOne(ctx context.Context, b *controlplanev1.TalosEtcdBackup) error {
	if b.Annotations[controlplanev1.PruneAnnotation] == "" {
		patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if b.Annotations == nil {
			b.Annotations = map[string]string{}
		}
		b.Annotations[controlplanev1.PruneAnnotation] = r.now().UTC().Format(time.RFC3339)
		if err := r.Client.Patch(ctx, b, patch); err != nil {
			return err
		}
	}
	// Only a backup that succeeded has an object: a failed upload was aborted.
	if b.Status.Key != "" && b.Status.Phase == controlplanev1.EtcdBackupSucceeded {
		store, _, err := etcdbackup.OpenStorage(ctx, r.Client, b.Namespace, b.Spec.Storage)
		if err != nil {
			return err
		}
		if err := store.Delete(ctx, b.Status.Key); err != nil {
			return err
		}
	}
	if err := client.IgnoreNotFound(r.Client.Delete(ctx, b)); err != nil {
		return err
	}
	record.Event(r.Events, b, corev1.EventTypeNormal, "BackupPruned", "Prune", "Deleted %s and its object %q: the schedule's retention does not keep it", b.Name, b.Status.Key)
	return nil
}

// patch writes the schedule's status, refusing to overwrite a change made since it was read.
func (r *ScheduleReconciler) patch(ctx context.Context, s, before *controlplanev1.TalosEtcdBackupSchedule) error {
	return r.Client.Status().Patch(ctx, s, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func setScheduleReady(s *controlplanev1.TalosEtcdBackupSchedule, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(s, metav1.Condition{Type: clusterv1.ReadyCondition, Status: status, Reason: reason, Message: message, ObservedGeneration: s.Generation})
}
