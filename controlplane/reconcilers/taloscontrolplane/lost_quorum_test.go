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
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/s3server"
)

// TestLostQuorumRestoredFromBackup destroys two of the three control-plane nodes of a
// cluster that a schedule backs up, and brings the cluster back by the procedure of
// docs/backup.md ("A cluster that lost quorum"): the old Cluster is paused and its last node
// powered off, a new cluster at an endpoint of its own, with the old cluster's secrets bundle
// and CA, restores the schedule's latest backup, clients move to it, and the old cluster is
// deleted. Every ConfigMap written before that backup is in the new cluster and none written
// after it; the old cluster's kubeconfig and a workload's service-account token work at the
// new endpoint; the old cluster, whose etcd has no quorum, is deleted to the last Machine.
func TestLostQuorumRestoredFromBackup(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.75.")
	disks := map[string]string{} // the state directory of each node, by address
	infra.options = func(o *sim.Options) { disks[o.Address] = o.StateDir }
	startProviders(t, env, infra)
	srv := s3server.Start(t, "127.0.75.200", "backups")
	ns := env.NewNamespace(t, "quorum")
	start := time.Now()
	old := newCluster(t, env, infra, ns, "old", 3)
	waitForMembership(t, env, old, 3)
	kube := workloadClient(t, env, old)
	t.Logf("3 control-plane nodes ready in %s", time.Since(start).Round(time.Second))

	const keys = 300
	writeConfigMaps(t, kube, keys)
	t.Log("A workload's service account gets a token, as a Pod's projected token")
	_, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	token, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "app", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(serviceAccountOf(t, env, old, token.Status.Token)).To(Equal("system:serviceaccount:default:app"))

	t.Log("A schedule backs the cluster up every 10 seconds")
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
		StringData: map[string]string{"accessKeyID": s3server.AccessKeyID, "secretAccessKey": s3server.SecretAccessKey}})).To(Succeed())
	schedule := &controlplanev1.TalosEtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "old-often", Namespace: ns},
		Spec: controlplanev1.TalosEtcdBackupScheduleSpec{ClusterName: "old", Schedule: "@every 10s",
			Storage:   controlplanev1.EtcdBackupStorage{S3: controlplanev1.S3Storage{Endpoint: srv.Endpoint, Bucket: "backups", Prefix: "talon", CredentialsSecretName: "s3"}},
			Retention: controlplanev1.EtcdBackupRetention{Count: ptr.To[int32](3)}}}
	g.Expect(env.Client.Create(ctx, schedule)).To(Succeed())
	// The second success: the one observed the moment it is recorded, so that the next is
	// about 10 seconds away.
	latest := nextScheduledBackup(t, env, schedule, nextScheduledBackup(t, env, schedule, ""))
	lateStart := time.Now()
	t.Logf("Backup %s succeeded; 20 more ConfigMaps are written after it", latest)
	for i := range 20 {
		g.Expect(write(ctx, kube, fmt.Sprintf("late-%02d", i))).To(Succeed())
	}

	t.Log("Two of the three control-plane nodes are destroyed: powered off, their disks wiped")
	machines, err := controlPlaneMachines(ctx, env, old)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(HaveLen(3))
	slices.SortFunc(machines, func(a, b clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	oldAddresses := map[string]bool{}
	for _, m := range machines {
		oldAddresses[m.Status.Addresses[0].Address] = true
	}
	for _, m := range machines[:2] {
		n := infra.node(m.Spec.InfrastructureRef.Name)
		n.PowerOff()
		infra.mu.Lock()
		disk := disks[n.Address()]
		infra.mu.Unlock()
		g.Expect(os.RemoveAll(disk)).To(Succeed())
	}
	t.Logf("Destroyed the nodes of %s and %s %s after backup %s was recorded", machines[0].Name, machines[1].Name,
		time.Since(lateStart).Round(100*time.Millisecond), latest)

	t.Log("Quorum is lost: for 15 seconds, no write through the cluster endpoint succeeds")
	// Not one write: the first after a member goes may fail while its connection is reset or
	// a new leader is elected, with quorum intact.
	g.Consistently(func() error { return write(ctx, kube, "after-the-loss") }, 15*time.Second, time.Second).
		Should(HaveOccurred(), "one etcd member of three accepts no write")

	t.Log("Step 1: the latest backup, as the schedule's status names it, is the one before the late writes")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(schedule), schedule)).To(Succeed())
	g.Expect(schedule.Status.LastSuccessfulBackup).To(Equal(latest), "no backup succeeded after the late writes")

	t.Log("Step 2: the old Cluster is paused and its remaining control-plane node powered off")
	oldCluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns}}
	patchObject(t, env, oldCluster, func() { oldCluster.Spec.Paused = ptr.To(true) })
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(old), old)).To(Succeed())
		g.Expect(conditions.IsTrue(old, clusterv1.PausedCondition)).To(BeTrue(), "the TalosControlPlane says it is paused")
	}, time.Minute, time.Second).Should(Succeed())
	// The survivor shares the identity the new cluster reuses (its etcd trusts the same CA),
	// and a joining node of the new cluster looks for etcd peers at the control-plane Nodes
	// restored from the backup, the old ones included: left running, the survivor answers it,
	// without quorum.
	infra.node(machines[2].Spec.InfrastructureRef.Name).PowerOff()

	t.Log("Step 3: the old cluster's secrets bundle and CA are copied under the new cluster's name")
	for _, name := range []func(string) string{clustersecrets.BundleSecretName, clustersecrets.CASecretName} {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name("old")}, s)).To(Succeed())
		g.Expect(env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name("restored"), Namespace: ns,
				Labels: map[string]string{clusterv1.ClusterNameLabel: "restored", "clusterctl.cluster.x-k8s.io/move": ""}},
			Type: s.Type, Data: s.Data,
		})).To(Succeed())
	}
	t.Log("Step 4: the new cluster, at an endpoint of its own, restores the latest backup")
	// A load balancer over the nodes to come, as an infrastructure provider gives every new
	// cluster; the nodes of the old cluster are not behind it.
	endpoint := clusterv1.APIEndpoint{Host: "127.0.75.253", Port: 6443}
	lb := simtest.NewLoadBalancer(t, endpoint.Host, 6443, 50001)
	var backends []string
	for i := 1; i <= 12; i++ {
		if address := fmt.Sprintf("127.0.75.%d", i); !oldAddresses[address] {
			backends = append(backends, address)
		}
	}
	lb.SetBackends(backends...)
	// Tokens name the endpoint of the cluster that issued them: the old one stays the issuer.
	issuer := fmt.Sprintf("apiVersion: v1alpha1\nkind: KubeAPIServerConfig\nextraArgs:\n  service-account-issuer: https://%s\n", infra.endpoint())
	start = time.Now()
	restored := newClusterAt(t, env, endpoint, ns, "restored", 3, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.RestoreFrom = &controlplanev1.EtcdRestoreSource{BackupName: latest}
		tcp.Spec.ControlPlaneConfig.StrategicPatches = []string{issuer}
	})
	waitForMembership(t, env, restored, 3)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(restored), restored)).To(Succeed())
		g.Expect(conditions.IsTrue(restored, controlplanev1.AvailableCondition)).To(BeTrue(), "%v", restored.Status.Conditions)
	}, time.Minute, time.Second).Should(Succeed())
	t.Logf("The new cluster restored %s and is Available with 3 control-plane nodes %s after it was created", latest, time.Since(start).Round(time.Second))
	restoredKube := workloadClient(t, env, restored)
	list, err := restoredKube.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var before, late []string
	for _, cm := range list.Items {
		switch {
		case strings.HasPrefix(cm.Name, "key-"):
			before = append(before, cm.Name)
		case strings.HasPrefix(cm.Name, "late-"):
			late = append(late, cm.Name)
		}
	}
	g.Expect(before).To(HaveLen(keys), "every ConfigMap written before the backup is in the new cluster")
	g.Expect(late).To(BeEmpty(), "the ConfigMaps written after the latest backup are lost")
	g.Expect(write(ctx, restoredKube, "after-the-restore")).To(Succeed(), "the new cluster takes writes")

	t.Log("Step 5: clients move: the old kubeconfig, pointed at the new endpoint, and the workload's token are accepted")
	oldKubeconfig, err := kubeconfig.FromSecret(ctx, env.Client, client.ObjectKeyFromObject(oldCluster))
	g.Expect(err).NotTo(HaveOccurred())
	newKubeconfig, err := kubeconfig.FromSecret(ctx, env.Client, client.ObjectKeyFromObject(restored))
	g.Expect(err).NotTo(HaveOccurred())
	moved, err := clientcmd.Load(oldKubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	fresh, err := clientcmd.Load(newKubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved.Clusters).To(HaveLen(1))
	g.Expect(fresh.Clusters).To(HaveLen(1))
	for _, c := range moved.Clusters {
		for _, f := range fresh.Clusters {
			g.Expect(f.CertificateAuthorityData).To(Equal(c.CertificateAuthorityData), "the new kubeconfig trusts the old CA")
		}
		c.Server = "https://" + endpoint.String()
	}
	config, err := clientcmd.NewDefaultClientConfig(*moved, nil).ClientConfig()
	g.Expect(err).NotTo(HaveOccurred())
	movedKube, err := kubernetes.NewForConfig(config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(movedKube.CoreV1().ConfigMaps("default").Get(ctx, "key-00000", metav1.GetOptions{})).Error().NotTo(HaveOccurred(),
		"the old kubeconfig, pointed at the new endpoint, is accepted")
	g.Expect(serviceAccountOf(t, env, restored, token.Status.Token)).To(Equal("system:serviceaccount:default:app"),
		"the token the old cluster issued is accepted by the new one")

	t.Log("Step 6: the old cluster is deleted, and unpaused: Cluster API deletes no paused Cluster")
	start = time.Now()
	g.Expect(env.Client.Delete(ctx, oldCluster)).To(Succeed())
	patchObject(t, env, oldCluster, func() { oldCluster.Spec.Paused = ptr.To(false) })
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(oldCluster), oldCluster)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Cluster old is still there (%v): TalosControlPlane: %s", err, deletionState(t, env, old))
	}, 5*time.Minute, time.Second).Should(Succeed())
	machines, err = controlPlaneMachines(ctx, env, old)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(BeEmpty())
	t.Logf("The old cluster was deleted in %s", time.Since(start).Round(time.Second))
	g.Expect(write(ctx, restoredKube, "after-the-deletion")).To(Succeed(), "the new cluster is untouched")
}

// nextScheduledBackup waits until the schedule's status names a last successful backup
// other than previous, and returns it.
func nextScheduledBackup(tb testing.TB, env *envtest.Environment, schedule *controlplanev1.TalosEtcdBackupSchedule, previous string) string {
	tb.Helper()
	NewWithT(tb).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(tb.Context(), client.ObjectKeyFromObject(schedule), schedule)).To(Succeed())
		g.Expect(schedule.Status.LastSuccessfulBackup).NotTo(Or(BeEmpty(), Equal(previous)))
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	return schedule.Status.LastSuccessfulBackup
}

// serviceAccountOf is who the workload cluster of tcp says token authenticates, or the
// error it answers.
func serviceAccountOf(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane, token string) string {
	tb.Helper()
	g := NewWithT(tb)
	data, err := kubeconfig.FromSecret(tb.Context(), env.Client, client.ObjectKeyFromObject(tcp))
	g.Expect(err).NotTo(HaveOccurred())
	config, err := clientcmd.RESTConfigFromKubeConfig(data)
	g.Expect(err).NotTo(HaveOccurred())
	config = rest.AnonymousClientConfig(config)
	config.BearerToken = token
	kube, err := kubernetes.NewForConfig(config)
	g.Expect(err).NotTo(HaveOccurred())
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(tb.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return err.Error()
	}
	return review.Status.UserInfo.Username
}

// deletionState says what holds a control plane's deletion: its conditions and Machines.
func deletionState(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane) string {
	tb.Helper()
	if err := env.Client.Get(tb.Context(), client.ObjectKeyFromObject(tcp), tcp); err != nil {
		return err.Error()
	}
	state := conditionSummary(tcp.Status.Conditions)
	machines, _ := controlPlaneMachines(tb.Context(), env, tcp)
	for _, m := range machines {
		state += fmt.Sprintf("\n  Machine %s: %s", m.Name, deletingMessage(&m))
	}
	return state
}

// newClusterAt is newCluster for a cluster whose endpoint is a load balancer other than the
// simulated infrastructure's.
func newClusterAt(tb testing.TB, env *envtest.Environment, endpoint clusterv1.APIEndpoint, ns, name string, replicas int32,
	mutate func(*controlplanev1.TalosControlPlane)) *controlplanev1.TalosControlPlane {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	infraCluster := &infrav1.TalosDockerCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.TalosDockerClusterSpec{ControlPlaneEndpoint: endpoint}}
	g.Expect(env.Client.Create(ctx, infraCluster)).To(Succeed())
	infraCluster.Status.Initialization.Provisioned = ptr.To(true)
	g.Expect(env.Client.Status().Update(ctx, infraCluster)).To(Succeed())
	template := &infrav1.TalosDockerMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name + "-cp", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, template)).To(Succeed())
	tcp := &controlplanev1.TalosControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: controlplanev1.TalosControlPlaneSpec{
			Replicas: ptr.To(replicas),
			Version:  simtest.KubernetesVersion,
			MachineTemplate: controlplanev1.TalosControlPlaneMachineTemplate{Spec: controlplanev1.TalosControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerMachineTemplate", Name: template.Name},
			}},
			ControlPlaneConfig: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane},
		},
	}
	mutate(tcp)
	g.Expect(env.Client.Create(ctx, tcp)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerCluster", Name: name},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "TalosControlPlane", Name: name},
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
			},
		},
	})).To(Succeed())
	return tcp
}
