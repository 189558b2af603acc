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

package quickstart

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
)

// fakeEtcd is an EtcdLister that lists what it holds.
type fakeEtcd struct {
	list []EtcdMember
	err  error
}

func (m fakeEtcd) EtcdMembers(context.Context) ([]EtcdMember, error) { return m.list, m.err }

func workloadNode(name, ip string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.36.3", OSImage: "Talos (v1.13.3)"},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "KubeletNotReady", Message: "container runtime network not ready"}},
		},
	}
}

func TestGather(t *testing.T) {
	g := NewWithT(t)
	backup := func(name, cluster string, phase controlplanev1.EtcdBackupPhase, completed time.Time) *controlplanev1.TalosEtcdBackup {
		return &controlplanev1.TalosEtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: controlplanev1.TalosEtcdBackupSpec{ClusterName: cluster},
			Status: controlplanev1.TalosEtcdBackupStatus{Phase: phase, CompletionTime: &metav1.Time{Time: completed}, Size: ptr.To[int64](3817504),
				Key: "talon/default/" + cluster + "/20261126T210000Z-" + name + ".db"}}
	}
	at := time.Date(2026, 11, 26, 21, 0, 3, 0, time.UTC)
	mgmt := fake.NewClientBuilder().WithScheme(fixtureScheme).WithObjects(readyCluster()...).WithObjects(
		backup("demo-hourly-1795723200", "demo", controlplanev1.EtcdBackupSucceeded, at.Add(-time.Hour)),
		backup("demo-hourly-1795726800", "demo", controlplanev1.EtcdBackupSucceeded, at),
		backup("demo-hourly-1795730400", "demo", controlplanev1.EtcdBackupFailed, at.Add(time.Hour)),
		backup("other-hourly-1795730400", "other", controlplanev1.EtcdBackupSucceeded, at.Add(time.Hour)),
	).Build()
	workload := fake.NewClientBuilder().WithScheme(fixtureScheme).WithObjects(
		workloadNode("demo-md-0-bbbb6", "172.18.0.6", corev1.ConditionFalse),
		workloadNode("demo-control-plane-abcd4", "172.18.0.4", corev1.ConditionTrue),
		workloadNode("demo-md-0-aaaa5", "172.18.0.5", corev1.ConditionTrue),
	).Build()
	etcd := fakeEtcd{list: []EtcdMember{
		{ID: 0x8e9e05c52164694d, Name: "demo-control-plane-abcd4", PeerURLs: []string{"https://172.18.0.4:2380"}, Healthy: true},
		{ID: 0x1a2b, Name: "demo-control-plane-abcd7", PeerURLs: []string{"https://172.18.0.7:2380"}, Learner: true, Healthy: true},
	}}

	h, err := Gather(t.Context(), mgmt, workload, etcd, "default", "demo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.Ready).To(BeFalse(), "a Node is not Ready and a member is a learner")
	g.Expect(strings.Split(h.String(), "\n")).To(Equal([]string{
		"Cluster default/demo  Ready  endpoint 172.18.0.2:6443",
		"Kubernetes v1.36.3  kubelets v1.36.3  Talos v1.13.3",
		"Last etcd backup demo-hourly-1795726800 at 2026-11-26T21:00:03Z, 3817504 bytes in talon/default/demo/20261126T210000Z-demo-hourly-1795726800.db",
		"",
		"MACHINE                   ROLE           PHASE    READY  NODE                      ADDRESS     VERSION",
		"demo-control-plane-abcd4  control-plane  Running  yes    demo-control-plane-abcd4  172.18.0.4  v1.36.3",
		"demo-md-0-aaaa5           worker         Running  yes    demo-md-0-aaaa5           172.18.0.5  v1.36.3",
		"demo-md-0-bbbb6           worker         Running  yes    demo-md-0-bbbb6           172.18.0.6  v1.36.3",
		"",
		"NODE                      READY  KUBELET  INTERNAL-IP  TALOS",
		"demo-control-plane-abcd4  yes    v1.36.3  172.18.0.4   v1.13.3",
		"demo-md-0-aaaa5           yes    v1.36.3  172.18.0.5   v1.13.3",
		"demo-md-0-bbbb6           no     v1.36.3  172.18.0.6   v1.13.3",
		"",
		"ETCD MEMBER               ID                PEER URLS                ROLE     HEALTH",
		"demo-control-plane-abcd4  8e9e05c52164694d  https://172.18.0.4:2380  voter    healthy",
		"demo-control-plane-abcd7  0000000000001a2b  https://172.18.0.7:2380  learner  healthy",
		"",
		"Problems:",
		"  Node demo-md-0-bbbb6 is not Ready (KubeletNotReady): container runtime network not ready",
		"  etcd member demo-control-plane-abcd7 is still a learner",
		"",
	}))
}

// TestGatherReports: what the workload cluster or etcd do not answer is a problem, not an
// error; without them the status is the management cluster's.
func TestGatherReports(t *testing.T) {
	mgmt := fake.NewClientBuilder().WithScheme(fixtureScheme).WithObjects(readyCluster()...).Build()
	allReady := fake.NewClientBuilder().WithScheme(fixtureScheme).WithObjects(
		workloadNode("demo-control-plane-abcd4", "172.18.0.4", corev1.ConditionTrue),
		workloadNode("demo-md-0-aaaa5", "172.18.0.5", corev1.ConditionTrue),
		workloadNode("demo-md-0-bbbb6", "172.18.0.6", corev1.ConditionTrue),
	).Build()
	healthy := fakeEtcd{list: []EtcdMember{{ID: 1, Name: "demo-control-plane-abcd4", Healthy: true}}}
	tests := []struct {
		name     string
		workload client.Reader
		etcd     EtcdLister
		problems []string
	}{
		{name: "everything answers", workload: allReady, etcd: healthy},
		{name: "management cluster only"},
		{
			name: "etcd does not answer", workload: allReady, etcd: fakeEtcd{err: errors.New("connection refused")},
			problems: []string{"The etcd members could not be listed: connection refused"},
		},
		{
			name: "etcd member unhealthy", etcd: fakeEtcd{list: []EtcdMember{{ID: 1, Name: "demo-control-plane-abcd4", Problem: "it knows no leader"}}},
			problems: []string{"etcd member demo-control-plane-abcd4 is not healthy: it knows no leader"},
		},
		{
			name: "workload cluster does not answer",
			workload: fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return errors.New("connection refused")
				},
			}).Build(),
			problems: []string{"The workload cluster's Nodes could not be listed: connection refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h, err := Gather(t.Context(), mgmt, tt.workload, tt.etcd, "default", "demo")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h.Problems).To(Equal(tt.problems))
			g.Expect(h.Ready).To(Equal(tt.problems == nil))
			g.Expect(h.String()).To(ContainSubstring("MACHINE"))
			g.Expect(h.String()).To(ContainSubstring("No etcd backup (docs/backup.md)\n"))
			g.Expect(strings.Contains(h.String(), "\nNODE ")).To(Equal(tt.workload == allReady))
		})
	}

	_, err := Gather(t.Context(), mgmt, nil, nil, "default", "absent")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`failed to get Cluster default/absent`)))

	t.Run("backups cannot be listed", func(t *testing.T) {
		g := NewWithT(t)
		forbidden := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*controlplanev1.TalosEtcdBackupList); ok {
				return errors.New("talosetcdbackups is forbidden")
			}
			return c.List(ctx, list, opts...)
		}}
		mgmt := fake.NewClientBuilder().WithScheme(fixtureScheme).WithObjects(readyCluster()...).WithInterceptorFuncs(forbidden).Build()
		h, err := Gather(t.Context(), mgmt, allReady, healthy, "default", "demo")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(h.Ready).To(BeTrue(), "backups do not make a cluster ready or not")
		g.Expect(h.String()).To(ContainSubstring("Etcd backups unknown: failed to list the etcd backups of default/demo: talosetcdbackups is forbidden\n"))
		g.Expect(h.String()).NotTo(ContainSubstring("No etcd backup"), "not knowing is not having none")
	})
}

// TestTalosEtcdLister lists the member of a simulated control-plane node through the Talos
// API with a talosconfig from the cluster's bundle, read from its Secret as talon status does.
func TestTalosEtcdLister(t *testing.T) {
	g := NewWithT(t)
	const address = "127.0.83.1"
	n, err := sim.NewNode(sim.Options{Address: address, StateDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Start(t.Context(), simtest.Render(t, bootstrapv1.GenerateTypeControlPlane, "cp-0", address))).To(Succeed())
	t.Cleanup(n.Stop)
	g.Expect(simtest.Client(t, simtest.Bundle(), address).Bootstrap(t.Context(), &machine.BootstrapRequest{})).To(Succeed())

	tc, err := configgen.NewTalosconfig(simtest.Bundle(), "sim", []string{address}, time.Now(), time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: clustersecrets.TalosconfigSecretName("sim")},
		Data:       map[string][]byte{clustersecrets.TalosconfigKey: tc.Data},
	}
	talosconfig, err := Talosconfig(t.Context(), fake.NewClientBuilder().WithObjects(secret).Build(), "default", "sim")
	g.Expect(err).NotTo(HaveOccurred())
	lister, err := NewTalosEtcdLister(talosconfig, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		list, err := lister.EtcdMembers(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list).To(ConsistOf(And(
			HaveField("Name", "cp-0"), HaveField("Learner", false), HaveField("Healthy", true),
			HaveField("PeerURLs", ConsistOf("https://"+address+":2380")))))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	t.Log("A node that does not answer is an error, not a hang")
	lister, err = NewTalosEtcdLister(talosconfig, []string{"127.0.83.2"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = lister.EtcdMembers(t.Context())
	g.Expect(err).To(MatchError(ContainSubstring("no node listed the etcd members")))
}
