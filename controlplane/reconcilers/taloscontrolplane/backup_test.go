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

package taloscontrolplane_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/etcdbackup"
	"github.com/talon-capi/talon/controlplane/reconcilers/talosetcdbackup"
	"github.com/talon-capi/talon/test/envtest"
	testmetrics "github.com/talon-capi/talon/test/metrics"
	"github.com/talon-capi/talon/test/s3server"
)

// TestEtcdBackupAndRestore backs up a simulated cluster's etcd holding 1,000 ConfigMaps to
// a real S3 server (and on a schedule every 10 seconds that keeps 3), deletes the cluster, and restores a new cluster from the backup: every
// ConfigMap is there. The object in the bucket is a real etcd snapshot with the SHA-256 the
// status records; an encrypted one is not a snapshot without its key; a snapshot that was
// tampered with is refused at restore. Wrong credentials, a missing bucket, a missing
// Secret, an unreachable store and a cluster whose only member is down each leave a
// condition that says what to fix, and no object.
func TestEtcdBackupAndRestore(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.74.")
	startProviders(t, env, infra)
	srv := s3server.Start(t, "127.0.74.200", "backups")
	ns := env.NewNamespace(t, "backup")
	tcp := newCluster(t, env, infra, ns, "backup", 1)
	waitForMembership(t, env, tcp, 1)
	kube := workloadClient(t, env, tcp)

	const keys = 1000
	start := time.Now()
	writeConfigMaps(t, kube, keys)
	t.Logf("Wrote %d ConfigMaps in %s", keys, time.Since(start).Round(time.Second))
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
		StringData: map[string]string{"accessKeyID": s3server.AccessKeyID, "secretAccessKey": s3server.SecretAccessKey}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wrong", Namespace: ns},
		StringData: map[string]string{"accessKeyID": s3server.AccessKeyID, "secretAccessKey": "not-the-secret"}})).To(Succeed())
	identity, err := age.GenerateX25519Identity()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: ns},
		StringData: map[string]string{"identity": identity.String()}})).To(Succeed())
	storage := controlplanev1.EtcdBackupStorage{S3: controlplanev1.S3Storage{Endpoint: srv.Endpoint, Bucket: "backups", Prefix: "talon", CredentialsSecretName: "s3"}}
	// The schedule runs every 10 seconds from now on, while the backups below are taken; its
	// five runs are checked after them. (A five-field cron schedule's next time is checked by
	// talosetcdbackup's TestScheduleRetention.)
	scheduled := storage
	scheduled.S3.Prefix = "scheduled"
	schedule := &controlplanev1.TalosEtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "often", Namespace: ns},
		Spec: controlplanev1.TalosEtcdBackupScheduleSpec{ClusterName: "backup", Schedule: "@every 10s", Storage: scheduled,
			Retention: controlplanev1.EtcdBackupRetention{Count: ptr.To[int32](3)}}}
	g.Expect(env.Client.Create(ctx, schedule)).To(Succeed())
	scheduleStart := time.Now()

	t.Log("A backup in clear is a snapshot of etcd with every ConfigMap")
	start = time.Now()
	plain := backUp(t, env, ns, "plain", storage)
	t.Logf("Backed up %d bytes in %s", *plain.Status.Size, time.Since(start).Round(time.Millisecond))
	g.Expect(plain.Status.Key).To(MatchRegexp(`^talon/` + ns + `/backup/\d{8}T\d{6}Z-plain\.db$`))
	g.Expect(plain.Status.Member).To(Equal("127.0.74.1"))
	g.Expect(plain.Status.TalosVersion).NotTo(BeEmpty())
	g.Expect(plain.Status.KubernetesVersion).To(Equal(tcp.Spec.Version))
	g.Expect(plain.Status.Attempts).To(BeEquivalentTo(1))
	object := filepath.Join(srv.Dir, "backups", plain.Status.Key)
	data, err := os.ReadFile(object)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain.Status.Size).To(HaveValue(BeEquivalentTo(len(data))))
	sum := sha256.Sum256(data)
	g.Expect(plain.Status.SHA256).To(Equal(hex.EncodeToString(sum[:])))
	g.Expect(snapshotConfigMaps(t, object, "default")).To(HaveLen(keys), "the snapshot holds every ConfigMap written")
	t.Log("The manager's metrics say when the cluster's last backup succeeded, how long it took and how big it is")
	series := map[string]string{"namespace": ns, "cluster": "backup"}
	g.Eventually(func(g Gomega) {
		g.Expect(metricValue("talon_etcd_backup_last_success_timestamp_seconds", series)).To(
			And(BeNumerically("==", plain.Status.CompletionTime.Unix()), BeNumerically(">=", start.Truncate(time.Second).Unix())))
		g.Expect(metricValue("talon_etcd_backup_last_size_bytes", series)).To(BeNumerically("==", *plain.Status.Size))
		g.Expect(metricValue("talon_etcd_backup_last_duration_seconds", series)).To(BeNumerically(">", 0))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	t.Log("An encrypted backup is not a snapshot without its key")
	encrypted := storage
	encrypted.Encryption = &controlplanev1.EtcdBackupEncryption{KeySecretName: "key"}
	sealed := backUp(t, env, ns, "sealed", encrypted)
	g.Expect(sealed.Status.Encrypted).To(BeTrue())
	g.Expect(sealed.Status.Key).To(HaveSuffix(".db.age"))
	sealedPath := filepath.Join(srv.Dir, "backups", sealed.Status.Key)
	sealedData, err := os.ReadFile(sealedPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(sealedData[:21])).To(Equal("age-encryption.org/v1"))
	g.Expect(bolt.Open(sealedPath, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})).Error().
		To(HaveOccurred(), "the encrypted object does not open as etcd's database")

	t.Log("Bad input: each backup says what to fix")
	bad := func(name string, mutate func(*controlplanev1.EtcdBackupStorage)) {
		s := storage
		mutate(&s)
		g.Expect(env.Client.Create(ctx, &controlplanev1.TalosEtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: controlplanev1.TalosEtcdBackupSpec{ClusterName: "backup", Storage: s}})).To(Succeed())
	}
	bad("wrong-credentials", func(s *controlplanev1.EtcdBackupStorage) { s.S3.CredentialsSecretName = "wrong" })
	bad("missing-bucket", func(s *controlplanev1.EtcdBackupStorage) { s.S3.Bucket = "nope" })
	bad("missing-secret", func(s *controlplanev1.EtcdBackupStorage) { s.S3.CredentialsSecretName = "absent" })
	bad("unreachable", func(s *controlplanev1.EtcdBackupStorage) { s.S3.Endpoint = "http://127.0.74.201:9" })
	waitBackup(t, env, ns, "wrong-credentials", controlplanev1.EtcdBackupFailed, "CredentialsRejected", "refused the credentials")
	g.Expect(metricValue("talon_etcd_backup_failures_total", map[string]string{"namespace": ns, "cluster": "backup", "reason": "CredentialsRejected"})).
		To(BeNumerically(">=", 1), "the failure is counted by its reason")
	waitBackup(t, env, ns, "missing-bucket", controlplanev1.EtcdBackupFailed, "BucketNotFound", `bucket "nope" does not exist`)
	waitBackup(t, env, ns, "missing-secret", controlplanev1.EtcdBackupPending, etcdbackup.SecretNotFoundReason, "Secret "+ns+"/absent does not exist")
	unreachable := waitBackup(t, env, ns, "unreachable", controlplanev1.EtcdBackupPending, "StoreUnreachable", "cannot reach http://127.0.74.201:9")
	g.Expect(unreachable.Status.Attempts).To(BeEquivalentTo(1), "an unreachable store is tried again in a while, not at once")

	t.Log("A schedule every 10 seconds that keeps 3 keeps exactly the newest 3 after 5 runs, and deletes only its own objects")
	runs := map[string]bool{}
	g.Eventually(func(g Gomega) {
		for _, b := range scheduleBackups(t, env, ns, "often") {
			if b.Status.Phase == controlplanev1.EtcdBackupSucceeded {
				runs[b.Name] = true
			}
		}
		g.Expect(runs).To(HaveLen(5))
	}, 3*time.Minute, time.Second).Should(Succeed())
	patchObject(t, env, schedule, func() { schedule.Spec.Suspend = true })
	g.Eventually(func(g Gomega) {
		backups := scheduleBackups(t, env, ns, "often")
		names, keys := make([]string, 0, len(backups)), make([]string, 0, len(backups))
		for _, b := range backups {
			g.Expect(b.Status.Phase).To(Equal(controlplanev1.EtcdBackupSucceeded), b.Name)
			runs[b.Name] = true
			names, keys = append(names, b.Name), append(keys, b.Status.Key)
		}
		newest := slices.Sorted(maps.Keys(runs))
		g.Expect(names).To(ConsistOf(newest[len(newest)-3:]), "the newest 3 of the runs %v are kept", newest)
		var stored []string
		for o := range srv.Client.ListObjects(ctx, "backups", minio.ListObjectsOptions{Prefix: "scheduled/", Recursive: true}) {
			g.Expect(o.Err).NotTo(HaveOccurred())
			stored = append(stored, o.Key)
		}
		g.Expect(stored).To(ConsistOf(keys), "the bucket holds the kept backups' objects, no more")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(schedule), schedule)).To(Succeed())
		g.Expect(schedule.Status.LastSuccessfulBackup).To(Equal(newest[len(newest)-1]))
		g.Expect(schedule.Status.NextScheduleTime).To(BeNil(), "suspended")
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
	t.Logf("%d scheduled runs in %s, 3 kept", len(runs), time.Since(scheduleStart).Round(time.Second))

	t.Log("A cluster whose only etcd member is down has nothing to back up from")
	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(infra.node(machines[0].Spec.InfrastructureRef.Name).CrashEtcd()).To(Succeed())
	bad("member-down", func(*controlplanev1.EtcdBackupStorage) {})
	down := waitBackup(t, env, ns, "member-down", controlplanev1.EtcdBackupPending, talosetcdbackup.NoHealthyMemberReason, "127.0.74.1")
	g.Expect(down.Status.Attempts).To(BeZero(), "no upload started")

	objects := []string{}
	for o := range srv.Client.ListObjects(ctx, "backups", minio.ListObjectsOptions{Prefix: "talon/", Recursive: true}) {
		g.Expect(o.Err).NotTo(HaveOccurred())
		objects = append(objects, o.Key)
	}
	g.Expect(objects).To(ConsistOf(plain.Status.Key, sealed.Status.Key), "only the backups that succeeded left objects, and the schedule pruned none of them")

	t.Log("The cluster is deleted; the backups stay")
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "backup", Namespace: ns}}
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
	},
		3*time.Minute, time.Second).Should(BeTrue(), "the cluster is deleted")

	t.Log("A snapshot changed in the bucket is refused at restore, and nothing is bootstrapped from it")
	_, err = srv.Client.PutObject(ctx, "backups", "talon/tampered.db", bytes.NewReader(data[:len(data)/2]), int64(len(data)/2), minio.PutObjectOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	recordBackup(t, env, ns, "tampered", storage, controlplanev1.TalosEtcdBackupStatus{Key: "talon/tampered.db", SHA256: plain.Status.SHA256})
	restored := newCluster(t, env, infra, ns, "restored", 1, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.RestoreFrom = &controlplanev1.EtcdRestoreSource{BackupName: "tampered"}
	})
	waitRestoreRefused(t, env, restored, "the snapshot of TalosEtcdBackup tampered is not the one that was backed up")

	t.Log("The encrypted backup with another key is refused at restore")
	other, err := age.GenerateX25519Identity()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other-key", Namespace: ns},
		StringData: map[string]string{"identity": other.String()}})).To(Succeed())
	otherKey := encrypted
	otherKey.Encryption = &controlplanev1.EtcdBackupEncryption{KeySecretName: "other-key"}
	recordBackup(t, env, ns, "wrong-key", otherKey, controlplanev1.TalosEtcdBackupStatus{Key: sealed.Status.Key, SHA256: sealed.Status.SHA256, Encrypted: true})
	patchObject(t, env, restored, func() { restored.Spec.RestoreFrom = &controlplanev1.EtcdRestoreSource{BackupName: "wrong-key"} })
	waitRestoreRefused(t, env, restored, "the snapshot of TalosEtcdBackup wrong-key cannot be decrypted with the key in its storage's key Secret")

	t.Log("The new cluster restores the encrypted backup: every ConfigMap is there")
	start = time.Now()
	patchObject(t, env, restored, func() { restored.Spec.RestoreFrom = &controlplanev1.EtcdRestoreSource{BackupName: "sealed"} })
	waitForMembership(t, env, restored, 1)
	t.Logf("Restored in %s", time.Since(start).Round(time.Second))
	restoredKube := workloadClient(t, env, restored)
	names := map[string]bool{}
	g.Expect(pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return restoredKube.CoreV1().ConfigMaps("default").List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{Limit: 1000}, func(o runtime.Object) error {
		if name := o.(*corev1.ConfigMap).Name; strings.HasPrefix(name, "key-") {
			names[name] = true
		}
		return nil
	})).To(Succeed())
	g.Expect(names).To(HaveLen(keys), "every ConfigMap written before the backup is in the restored cluster")
}

// metricValue is the value of the gauge or counter name with exactly labels in the registry
// the manager serves at /metrics; an error when there is no such series.
func metricValue(name string, labels map[string]string) (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	return testmetrics.Value(families, name, labels)
}

// recordBackup makes by hand the record of a backup that succeeded with status (its cluster
// is gone: the controller says so meanwhile, hence the retries).
func recordBackup(tb testing.TB, env *envtest.Environment, ns, name string, storage controlplanev1.EtcdBackupStorage, status controlplanev1.TalosEtcdBackupStatus) {
	tb.Helper()
	ctx := tb.Context()
	b := &controlplanev1.TalosEtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: controlplanev1.TalosEtcdBackupSpec{ClusterName: "gone", Storage: storage}}
	g := NewWithT(tb)
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	status.Phase = controlplanev1.EtcdBackupSucceeded
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Status = status
		return env.Client.Status().Update(ctx, b)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

// waitRestoreRefused waits until the control plane says its restore is refused with
// message, and checks that nothing was bootstrapped.
func waitRestoreRefused(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane, message string) {
	tb.Helper()
	g := NewWithT(tb)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(tb.Context(), client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		initialized := conditions.Get(tcp, controlplanev1.InitializedCondition)
		g.Expect(initialized).NotTo(BeNil())
		g.Expect(initialized.Message).To(ContainSubstring(message))
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(ptr.Deref(tcp.Status.Initialization.ControlPlaneInitialized, false)).To(BeFalse(), "nothing was bootstrapped")
}

// scheduleBackups are the backups the schedule name made.
func scheduleBackups(tb testing.TB, env *envtest.Environment, ns, name string) []controlplanev1.TalosEtcdBackup {
	tb.Helper()
	list := &controlplanev1.TalosEtcdBackupList{}
	NewWithT(tb).Expect(env.Client.List(tb.Context(), list, client.InNamespace(ns),
		client.MatchingLabels{controlplanev1.EtcdBackupScheduleLabel: name})).To(Succeed())
	return list.Items
}

// backUp creates a backup of cluster "backup" and waits for it to succeed.
func backUp(tb testing.TB, env *envtest.Environment, ns, name string, storage controlplanev1.EtcdBackupStorage) *controlplanev1.TalosEtcdBackup {
	tb.Helper()
	NewWithT(tb).Expect(env.Client.Create(tb.Context(), &controlplanev1.TalosEtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: controlplanev1.TalosEtcdBackupSpec{ClusterName: "backup", Storage: storage}})).To(Succeed())
	return waitBackup(tb, env, ns, name, controlplanev1.EtcdBackupSucceeded, talosetcdbackup.StoredReason, "SHA-256")
}

// waitBackup waits until a backup is in phase with its Ready condition's reason and message.
func waitBackup(tb testing.TB, env *envtest.Environment, ns, name string, phase controlplanev1.EtcdBackupPhase, reason, message string) *controlplanev1.TalosEtcdBackup {
	tb.Helper()
	b := &controlplanev1.TalosEtcdBackup{}
	NewWithT(tb).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(tb.Context(), client.ObjectKey{Namespace: ns, Name: name}, b)).To(Succeed())
		ready := conditions.Get(b, clusterv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(b.Status.Phase).To(Equal(phase), "%s: %s", ready.Reason, ready.Message)
		g.Expect(ready.Reason).To(Equal(reason), ready.Message)
		g.Expect(ready.Message).To(ContainSubstring(message))
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed(), "backup %s", name)
	return b
}

// writeConfigMaps writes n ConfigMaps into the default namespace, 16 at a time.
// createConfigMap creates cm, again when the connection was lost before the API server
// answered: the load balancer shuts the connections to a kube-apiserver whose readiness check
// fails while others pass (as HAProxy's on-marked-down shutdown-sessions does), which a
// member catching up or a busy machine can cause for a moment, and client-go retries no
// POST. A retry that finds the ConfigMap the lost attempt made is done; an answer from the
// API server is final.
func createConfigMap(ctx context.Context, kube kubernetes.Interface, cm *corev1.ConfigMap) error {
	for attempt := 1; ; attempt++ {
		_, err := kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		var status apierrors.APIStatus
		switch {
		case err == nil, attempt > 1 && apierrors.IsAlreadyExists(err):
			return nil
		case errors.As(err, &status), !utilnet.IsProbableEOF(err), attempt == 3:
			return err
		}
	}
}

func writeConfigMaps(tb testing.TB, kube kubernetes.Interface, n int) {
	tb.Helper()
	// kube-apiserver makes the default namespace a moment after it starts to serve.
	NewWithT(tb).Eventually(func() error {
		_, err := kube.CoreV1().Namespaces().Get(tb.Context(), "default", metav1.GetOptions{})
		return err
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs <- createConfigMap(tb.Context(), kube, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("key-%05d", i), Namespace: "default"}, Data: map[string]string{"i": fmt.Sprint(i)}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		NewWithT(tb).Expect(err).NotTo(HaveOccurred())
	}
}

// snapshotConfigMaps reads an etcd snapshot as etcd's own database (bbolt, its "key"
// bucket of revisions) and lists the ConfigMaps of namespace it holds.
func snapshotConfigMaps(tb testing.TB, path, namespace string) []string {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		tb.Fatalf("%s is not an etcd database: %v", path, err)
	}
	defer func() { _ = db.Close() }()
	prefix := "/registry/configmaps/" + namespace + "/key-"
	seen := map[string]bool{}
	err = db.View(func(tx *bolt.Tx) error {
		bucket := tx.Bucket([]byte("key"))
		if bucket == nil {
			return fmt.Errorf("%s has no key bucket", path)
		}
		return bucket.ForEach(func(_, v []byte) error {
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return err
			}
			if strings.HasPrefix(string(kv.Key), prefix) {
				seen[strings.TrimPrefix(string(kv.Key), prefix)] = true
			}
			return nil
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	return names
}
