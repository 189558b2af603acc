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
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/test/envtest"
)

// etcdMembers lists the etcd members through the Talos API of any control-plane node.
func etcdMembers(ctx context.Context, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane, machines []clusterv1.Machine) ([]string, error) {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: tcp.Name, Namespace: tcp.Namespace}}
	bundle, err := clustersecrets.Get(ctx, env.Client, cluster)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for _, m := range machines {
		if len(m.Status.Addresses) == 0 || !m.DeletionTimestamp.IsZero() {
			continue
		}
		c, err := talosclient.NewFactory().New(ctx, bundle, m.Status.Addresses[0].Address)
		if err != nil {
			lastErr = err
			continue
		}
		members, err := c.EtcdMembers(ctx)
		_ = c.Close()
		if err != nil {
			lastErr = err
			continue
		}
		names := make([]string, 0, len(members))
		for _, member := range members {
			if member.Learner {
				return nil, fmt.Errorf("member %s is still a learner", member.Name)
			}
			names = append(names, member.Name)
		}
		slices.Sort(names)
		return names, nil
	}
	return nil, fmt.Errorf("no control-plane node answered: %w", lastErr)
}

// controlPlaneMachines lists the Machines of tcp.
func controlPlaneMachines(ctx context.Context, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane) ([]clusterv1.Machine, error) {
	list := &clusterv1.MachineList{}
	err := env.Client.List(ctx, list, client.InNamespace(tcp.Namespace), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: tcp.Name})
	return list.Items, err
}

// writer puts a ConfigMap into the workload cluster every 100 ms through the cluster
// endpoint and remembers the ones the API server acknowledged. With clients of the
// control-plane nodes, a write that fails through the endpoint is retried against each
// node in turn, as a client with the nodes' addresses would.
type writer struct {
	direct []kubernetes.Interface

	mu    sync.Mutex
	acked []string
	tries int
	// failed counts the writes that failed through the endpoint; retried the ones of them
	// a control-plane node then acknowledged.
	failed, retried int
}

// startWriter starts a writer against kube, retrying failed writes against direct (the
// control-plane nodes' clients), if any; the function it returns stops it, logs how many
// writes were acknowledged and failed, and fails tb if none was acknowledged, if an
// acknowledged one is gone, or if a retried write failed on every node.
func startWriter(tb testing.TB, kube *kubernetes.Clientset, direct ...kubernetes.Interface) func() {
	tb.Helper()
	w := &writer{direct: direct}
	ctx, stop := context.WithCancel(tb.Context())
	done := make(chan struct{})
	go func() { w.run(ctx, kube); close(done) }()
	return func() {
		tb.Helper()
		stop()
		<-done
		tb.Logf("Writer: %d of %d writes acknowledged; %d requests through the endpoint failed", len(w.acked), w.tries, w.failed)
		g := NewWithT(tb)
		g.Expect(w.acked).NotTo(BeEmpty())
		if len(direct) > 0 {
			tb.Logf("Writer: %d failed writes retried against another control-plane node, %d acknowledged there", w.failed, w.retried)
			g.Expect(w.failed-w.retried).To(BeZero(), "writes that failed on every control-plane node")
		}
		list, err := kube.CoreV1().ConfigMaps("default").List(tb.Context(), metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		present := map[string]bool{}
		for _, cm := range list.Items {
			present[cm.Name] = true
		}
		for _, name := range w.acked {
			g.Expect(present).To(HaveKey(name), "acknowledged write %s was lost", name)
		}
	}
}

func (w *writer) run(ctx context.Context, kube *kubernetes.Clientset) {
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		name := fmt.Sprintf("write-%05d", i)
		err := write(ctx, kube, name)
		if ctx.Err() != nil {
			return
		}
		retried := false
		if err != nil && len(w.direct) > 0 {
			for _, node := range w.direct {
				// Already there: the write through the endpoint was applied, its answer lost.
				if err := write(ctx, node, name); err == nil || apierrors.IsAlreadyExists(err) {
					retried = true
					break
				}
			}
			if ctx.Err() != nil {
				return
			}
		}
		w.mu.Lock()
		w.tries++
		if err != nil {
			w.failed++
		}
		if retried {
			w.retried++
		}
		if err == nil || retried {
			w.acked = append(w.acked, name)
		}
		w.mu.Unlock()
	}
}

// write creates the ConfigMap name, allowing 3 s.
func write(ctx context.Context, kube kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// waitForMembership waits until tcp has replicas Machines, none deleting, whose nodes are
// exactly the voting etcd members, and its status counts them.
func waitForMembership(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane, replicas int32) {
	tb.Helper()
	waitForMembershipOf(tb, env, tcp, replicas, replicas)
}

// waitForMembershipOf is waitForMembership with upToDate of the Machines up to date.
func waitForMembershipOf(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane, replicas, upToDate int32) {
	tb.Helper()
	ctx := tb.Context()
	NewWithT(tb).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		names := make([]string, 0, len(machines))
		for _, m := range machines {
			if !m.DeletionTimestamp.IsZero() {
				g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "machine %s is still being deleted: %s", m.Name, deletingMessage(&m))
			}
			names = append(names, m.Name)
		}
		g.Expect(machines).To(HaveLen(int(replicas)))
		slices.Sort(names)
		members, err := etcdMembers(ctx, env, tcp, machines)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(members).To(Equal(names), "etcd members are exactly the Machines")
		for _, m := range machines {
			g.Expect(m.Annotations).To(HaveKey(controlplanev1.EtcdMemberIDAnnotation), "Machine %s records its etcd member", m.Name)
		}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(tcp.Status.Replicas).To(HaveValue(Equal(replicas)))
		g.Expect(tcp.Status.UpToDateReplicas).To(HaveValue(Equal(upToDate)))
	}, 5*time.Minute, time.Second).Should(Succeed(), func() string {
		return fmt.Sprintf("%d replicas; control plane conditions: %s", replicas, conditionSummary(tcp.Status.Conditions))
	})
}

// workloadClient is a client of the workload cluster from the kubeconfig Secret the
// control plane wrote, once the control plane is initialized.
func workloadClient(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane) *kubernetes.Clientset {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(tcp.Status.Initialization.ControlPlaneInitialized).To(HaveValue(BeTrue()))
	}, time.Minute, time.Second).Should(Succeed())
	data, err := kubeconfig.FromSecret(ctx, env.Client, client.ObjectKey{Namespace: tcp.Namespace, Name: tcp.Name})
	g.Expect(err).NotTo(HaveOccurred())
	config, err := clientcmd.RESTConfigFromKubeConfig(data)
	g.Expect(err).NotTo(HaveOccurred())
	// Not client-go's default 5 requests a second: tests write thousands of objects.
	config.QPS, config.Burst = 500, 1000
	kube, err := kubernetes.NewForConfig(config)
	g.Expect(err).NotTo(HaveOccurred())
	return kube
}

// setReplicas changes spec.replicas.
func setReplicas(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane, replicas int32) {
	tb.Helper()
	g := NewWithT(tb)
	g.Expect(env.Client.Get(tb.Context(), client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
	before := tcp.DeepCopy()
	tcp.Spec.Replicas = ptr.To(replicas)
	// A merge patch: the controller writes the status meanwhile.
	g.Expect(env.Client.Patch(tb.Context(), tcp, client.MergeFrom(before))).To(Succeed())
}

// TestScaleKeepsEtcdInStep scales a control plane 1 → 3 → 5 → 3 → 1 on simulated nodes.
// At every step the etcd members are exactly the Machines' nodes, and a writer that puts a
// key every 100 ms throughout loses none of the writes the API server acknowledged.
func TestScaleKeepsEtcdInStep(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.47.")
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "scale")
	start := time.Now()
	tcp := newCluster(t, env, infra, ns, "scale", 1)
	waitForMembership(t, env, tcp, 1)
	kube := workloadClient(t, env, tcp)
	t.Logf("1 replica: initialized %s after the cluster was applied", time.Since(start).Round(time.Second))

	stopWriter := startWriter(t, kube)

	for _, replicas := range []int32{3, 5, 3, 1} {
		start := time.Now()
		setReplicas(t, env, tcp, replicas)
		waitForMembership(t, env, tcp, replicas)
		t.Logf("%d replicas: etcd matches the Machines %s after the change", replicas, time.Since(start).Round(time.Second))
	}

	t.Log("The remaining Machine's components are healthy and the control plane is Available")
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(conditions.IsTrue(tcp, controlplanev1.ControlPlaneComponentsHealthyCondition)).To(BeTrue(), "%v", tcp.Status.Conditions)
		g.Expect(conditions.IsTrue(tcp, controlplanev1.AvailableCondition)).To(BeTrue(), "%v", tcp.Status.Conditions)
	}, 2*time.Minute, time.Second).Should(Succeed())

	stopWriter()
}

// deletingMessage is what Cluster API says of a Machine being deleted.
func deletingMessage(m *clusterv1.Machine) string {
	if c := conditions.Get(m, clusterv1.MachineDeletingCondition); c != nil {
		return c.Reason + ": " + c.Message
	}
	return "no Deleting condition"
}

// conditionSummary prints conditions one per line.
func conditionSummary(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
