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

package talosetcdbackup_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/controlplane/reconcilers/talosetcdbackup"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/s3server"
)

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(m))
}

// TestScheduleRetention runs the schedule reconciler against a real S3 server with backups
// a schedule made earlier (their records written as the backup controller writes them):
// maxAge prunes the backups older than it, record and object, but never the newest success,
// however old, nor one that a control plane not yet initialized names in restoreFrom; a store that refuses a prune leaves the schedule not Ready with PruneFailed,
// the backup marked and its object in place, and once the store accepts the credentials the
// prune is finished without anyone touching the schedule. A backup that never finishes makes
// the schedule skip the next ones and say so in its Ready condition.
func TestScheduleRetention(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	srv := s3server.Start(t, "127.0.76.200", "backups")
	env.StartManager(t, envtest.ManagerOptions{Setup: func(_ context.Context, mgr ctrl.Manager) error {
		return (&talosetcdbackup.ScheduleReconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, controller.Options{})
	}})
	ns := env.NewNamespace(t, "retention")
	for name, secret := range map[string]string{"s3": s3server.SecretAccessKey, "rotated": "not-yet"} {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			StringData: map[string]string{"accessKeyID": s3server.AccessKeyID, "secretAccessKey": secret}})).To(Succeed())
	}
	storage := controlplanev1.EtcdBackupStorage{S3: controlplanev1.S3Storage{Endpoint: srv.Endpoint, Bucket: "backups", Prefix: "aged", CredentialsSecretName: "s3"}}

	t.Log("maxAge 1h prunes the backups older than an hour, except the newest and one a new control plane is about to restore")
	restoring := &controlplanev1.TalosControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "restoring", Namespace: ns}, Spec: controlplanev1.TalosControlPlaneSpec{
		Replicas: ptr.To[int32](1), Version: "v1.36.3",
		MachineTemplate: controlplanev1.TalosControlPlaneMachineTemplate{Spec: controlplanev1.TalosControlPlaneMachineTemplateSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerMachineTemplate", Name: "restoring"},
		}},
		ControlPlaneConfig: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane},
		RestoreFrom:        &controlplanev1.EtcdRestoreSource{BackupName: "aged-2"},
	}}
	g.Expect(env.Client.Create(ctx, restoring)).To(Succeed())
	aged := schedule(t, env, ns, "aged", storage, controlplanev1.EtcdBackupRetention{Count: ptr.To[int32](10), MaxAge: &metav1.Duration{Duration: time.Hour}})
	oldest := storedBackup(t, env, srv, aged, "aged-1", 3*time.Hour)
	older := storedBackup(t, env, srv, aged, "aged-2", 2*time.Hour)
	newest := storedBackup(t, env, srv, aged, "aged-3", 90*time.Minute)
	g.Eventually(func(g Gomega) {
		g.Expect(backupNames(t, env, ns)).To(ConsistOf("aged-2", "aged-3"))
		g.Expect(objects(t, srv, "aged/")).To(ConsistOf(older, newest))
	}, time.Minute, 250*time.Millisecond).Should(Succeed(), "%s pruned, %s kept for a restore, %s kept as the newest success", oldest, older, newest)
	t.Log("Once that control plane is initialized, the next prune takes the backup it restored")
	restoring.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	g.Expect(env.Client.Status().Update(ctx, restoring)).To(Succeed())
	patch := client.MergeFrom(aged.DeepCopy())
	aged.Spec.Retention.MaxAge = &metav1.Duration{Duration: 59 * time.Minute}
	g.Expect(env.Client.Patch(ctx, aged, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(backupNames(t, env, ns)).To(ConsistOf("aged-3"))
		g.Expect(objects(t, srv, "aged/")).To(ConsistOf(newest))
	}, time.Minute, 250*time.Millisecond).Should(Succeed())

	t.Log("A store that refuses the prune: PruneFailed, the backup marked, its object kept; it finishes once the store accepts")
	refused := storage
	refused.S3.Prefix, refused.S3.CredentialsSecretName = "refused", "rotated"
	counted := schedule(t, env, ns, "counted", refused, controlplanev1.EtcdBackupRetention{Count: ptr.To[int32](1)})
	first := storedBackup(t, env, srv, counted, "counted-1", 2*time.Minute)
	second := storedBackup(t, env, srv, counted, "counted-2", time.Minute)
	g.Eventually(func(g Gomega) {
		expectNotReady(g, env, counted, talosetcdbackup.PruneFailedReason, ContainSubstring("refused the credentials"))
		b := &controlplanev1.TalosEtcdBackup{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "counted-1"}, b)).To(Succeed())
		g.Expect(b.Annotations).To(HaveKey(controlplanev1.PruneAnnotation), "marked before its object is deleted")
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(objects(t, srv, "refused/")).To(ConsistOf(first, second), "no object deleted")
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rotated"}, secret)).To(Succeed())
	secret.Data["secretAccessKey"] = []byte(s3server.SecretAccessKey)
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "counted-1"}, &controlplanev1.TalosEtcdBackup{}))).To(BeTrue())
		g.Expect(objects(t, srv, "refused/")).To(ConsistOf(second))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(counted), counted)).To(Succeed())
		g.Expect(conditions.Get(counted, clusterv1.ReadyCondition).Reason).NotTo(Equal(talosetcdbackup.PruneFailedReason))
	}, 2*time.Minute, time.Second).Should(Succeed())
	t.Logf("The prune was retried and finished %s after the credentials were fixed", time.Since(start).Round(time.Second))

	t.Log("A five-field cron schedule is due at its next time: 04:30 on the first of January")
	yearly := &controlplanev1.TalosEtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "yearly", Namespace: ns},
		Spec: controlplanev1.TalosEtcdBackupScheduleSpec{ClusterName: "gone", Schedule: "30 4 1 1 *", Storage: storage}}
	g.Expect(env.Client.Create(ctx, yearly)).To(Succeed())
	created := yearly.CreationTimestamp.In(time.Local)
	want := time.Date(created.Year(), time.January, 1, 4, 30, 0, 0, time.Local)
	if !want.After(created) {
		want = want.AddDate(1, 0, 0)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(yearly), yearly)).To(Succeed())
		g.Expect(yearly.Status.NextScheduleTime).NotTo(BeNil())
		g.Expect(yearly.Status.NextScheduleTime.Time).To(BeTemporally("==", want))
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, yearly)).To(Succeed())

	t.Log("A backup that never finishes (no backup controller runs here) makes the next ones skipped, and the schedule says so")
	stuck := &controlplanev1.TalosEtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: ns},
		Spec: controlplanev1.TalosEtcdBackupScheduleSpec{ClusterName: "gone", Schedule: "@every 2s", Storage: storage}}
	g.Expect(env.Client.Create(ctx, stuck)).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectNotReady(g, env, stuck, talosetcdbackup.BackupSkippedReason,
			MatchRegexp(`^The backup due at \S+ was skipped: stuck-\d+, created \S+, has not finished \(it has not started\)$`))
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(backupNames(t, env, ns)).To(ConsistOf("aged-3", "counted-2", HavePrefix("stuck-")), "one backup of the stuck schedule, none piled up behind it")
}

// expectNotReady expects the schedule's Ready condition False with reason and a message that
// matches message.
func expectNotReady(g Gomega, env *envtest.Environment, s *controlplanev1.TalosEtcdBackupSchedule, reason string, message types.GomegaMatcher) {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(s), s)).To(Succeed())
	ready := conditions.Get(s, clusterv1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(reason))
	g.Expect(ready.Message).To(message)
}

// schedule creates a suspended schedule (it takes no backup of its own) with retention.
func schedule(tb testing.TB, env *envtest.Environment, ns, name string, storage controlplanev1.EtcdBackupStorage,
	retention controlplanev1.EtcdBackupRetention) *controlplanev1.TalosEtcdBackupSchedule {
	tb.Helper()
	s := &controlplanev1.TalosEtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: controlplanev1.TalosEtcdBackupScheduleSpec{ClusterName: "gone", Schedule: "@hourly", Suspend: true, Storage: storage, Retention: retention}}
	NewWithT(tb).Expect(env.Client.Create(tb.Context(), s)).To(Succeed())
	return s
}

// storedBackup puts an object into the store and the record of a backup of s that wrote it
// and completed age ago, as the backup controller leaves it; it returns the object's key.
func storedBackup(tb testing.TB, env *envtest.Environment, srv *s3server.Server, s *controlplanev1.TalosEtcdBackupSchedule, name string, age time.Duration) string {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	key := s.Spec.Storage.S3.Prefix + "/" + name + ".db"
	_, err := srv.Client.PutObject(ctx, "backups", key, bytes.NewReader([]byte(name)), int64(len(name)), minio.PutObjectOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	b := &controlplanev1.TalosEtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: map[string]string{controlplanev1.EtcdBackupScheduleLabel: s.Name}},
		Spec:       controlplanev1.TalosEtcdBackupSpec{ClusterName: s.Spec.ClusterName, Storage: s.Spec.Storage},
	}
	g.Expect(controllerutil.SetControllerReference(s, b, env.Client.Scheme())).To(Succeed())
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	completed := metav1.NewTime(time.Now().Add(-age))
	b.Status = controlplanev1.TalosEtcdBackupStatus{Phase: controlplanev1.EtcdBackupSucceeded, Key: key, CompletionTime: &completed}
	g.Expect(env.Client.Status().Update(ctx, b)).To(Succeed())
	return key
}

// backupNames are the names of the backups in ns.
func backupNames(tb testing.TB, env *envtest.Environment, ns string) []string {
	tb.Helper()
	list := &controlplanev1.TalosEtcdBackupList{}
	NewWithT(tb).Expect(env.Client.List(tb.Context(), list, client.InNamespace(ns))).To(Succeed())
	names := make([]string, 0, len(list.Items))
	for _, b := range list.Items {
		names = append(names, b.Name)
	}
	return names
}

// objects are the keys under prefix in the test bucket.
func objects(tb testing.TB, srv *s3server.Server, prefix string) []string {
	tb.Helper()
	var keys []string
	for o := range srv.Client.ListObjects(tb.Context(), "backups", minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		NewWithT(tb).Expect(o.Err).NotTo(HaveOccurred())
		keys = append(keys, o.Key)
	}
	return keys
}
