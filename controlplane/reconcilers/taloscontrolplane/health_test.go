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
	"slices"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/test/envtest"
)

// TestUnhealthyMemberNeverBlocksItsReplacement stops one of three control-plane nodes.
// Removing a healthy Machine is then refused, with a condition that says why; removing the
// unhealthy one proceeds, and the control plane goes down to one Machine.
func TestUnhealthyMemberNeverBlocksItsReplacement(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.48.")
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "health")
	tcp := newCluster(t, env, infra, ns, "health", 3)
	waitForMembership(t, env, tcp, 3)

	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	slices.SortFunc(machines, func(a, b clusterv1.Machine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	sick, healthy := machines[2], machines[0]
	t.Logf("Powering off the node of %s", sick.Name)
	infra.powerOff(sick.Name)

	t.Log("Removing a healthy Machine would leave one healthy member of two: refused, and said so")
	g.Expect(env.Client.Patch(ctx, annotated(&healthy, clusterv1.DeleteMachineAnnotation, ""), client.MergeFrom(&machines[0]))).To(Succeed())
	setReplicas(t, env, tcp, 1)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		c := conditions.Get(tcp, controlplanev1.ScalingDownCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("Removing Machine " + healthy.Name + " is refused"))
		g.Expect(c.Message).To(ContainSubstring("would leave 1 of 2 members healthy, fewer than the quorum of 2 (unhealthy: " + sick.Name + ")"))
		health := conditions.Get(tcp, controlplanev1.EtcdClusterHealthyCondition)
		g.Expect(health).NotTo(BeNil())
		g.Expect(health.Message).To(MatchRegexp(`etcd member ` + sick.Name + ` \([0-9a-f]{16}\) is not healthy`))
	}, time.Minute, time.Second).Should(Succeed())
	g.Consistently(func() bool {
		m := &clusterv1.Machine{}
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(&healthy), m)
		return m.DeletionTimestamp.IsZero()
	}, 3*time.Second, 500*time.Millisecond).Should(BeTrue(), "the healthy Machine is kept")

	t.Log("Without the annotation the unhealthy Machine goes first, and the scale-down completes")
	current := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&healthy), current)).To(Succeed())
	before := current.DeepCopy()
	delete(current.Annotations, clusterv1.DeleteMachineAnnotation)
	g.Expect(env.Client.Patch(ctx, current, client.MergeFrom(before))).To(Succeed())
	waitForMembership(t, env, tcp, 1)
	remaining, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remaining[0].Name).NotTo(Equal(sick.Name))
}

// TestRollout changes the Kubernetes version of three control-plane Machines with maxSurge
// 1, then asks for a rollout with maxSurge 0 through rollout.after: every Machine is
// replaced each time with etcd membership kept equal to the Machines, and status.versions
// and upToDateReplicas report the change as it happens.
func TestRollout(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.49.")
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "rollout")
	tcp := newCluster(t, env, infra, ns, "rollout", 3, func(tcp *controlplanev1.TalosControlPlane) { tcp.Spec.Version = "v1.35.4" })
	waitForMembership(t, env, tcp, 3)

	names := func() []string {
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		out := make([]string, 0, len(machines))
		for _, m := range machines {
			out = append(out, m.Name)
		}
		return out
	}
	rollout := func(description string, change func(*controlplanev1.TalosControlPlane), wantVersion string) {
		t.Log(description)
		start := time.Now()
		original := names()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		before := tcp.DeepCopy()
		change(tcp)
		g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(before))).To(Succeed())
		sawMixed := false
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
			if len(tcp.Status.Versions) > 1 || ptr.Deref(tcp.Status.UpToDateReplicas, 0) < 3 && ptr.Deref(tcp.Status.UpToDateReplicas, 0) > 0 {
				sawMixed = true
			}
			current := names()
			for _, name := range original {
				g.Expect(current).NotTo(ContainElement(name), "Machine %s is not replaced yet", name)
			}
		}, 5*time.Minute, 500*time.Millisecond).Should(Succeed())
		waitForMembership(t, env, tcp, 3)
		g.Expect(tcp.Status.Versions).To(ConsistOf(clusterv1.StatusVersion{Version: wantVersion, Replicas: 3}))
		g.Expect(sawMixed).To(BeTrue(), "status showed the rollout in progress")
		t.Logf("Rolled out three Machines in %s", time.Since(start).Round(time.Second))
	}
	rollout("Kubernetes v1.35.4 → v1.36.3 with maxSurge 1", func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Version = "v1.36.3"
	}, "v1.36.3")
	rollout("rollout.after with maxSurge 0", func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Rollout.After = metav1.Now()
		tcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To[int32](0)
	}, "v1.36.3")

	t.Log("OnDelete: a new config makes every Machine outdated, and none is replaced")
	original := names()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
	before := tcp.DeepCopy()
	tcp.Spec.Rollout.Strategy.Type = controlplanev1.OnDeleteStrategyType
	tcp.Spec.ControlPlaneConfig.StrategicPatches = []string{"apiVersion: v1alpha1\nkind: SysctlConfig\nparams:\n  vm.max_map_count: \"262144\"\n"}
	g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(before))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(tcp.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(0)))
		g.Expect(conditions.GetMessage(tcp, controlplanev1.RollingOutCondition)).To(Equal("OnDelete: delete the outdated Machines to replace them"))
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range machines {
			c := conditions.Get(&m, clusterv1.MachineUpToDateCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(Equal("* controlPlaneConfig changed"))
		}
	}, time.Minute, time.Second).Should(Succeed())
	g.Consistently(names, 5*time.Second, time.Second).Should(ConsistOf(original), "OnDelete replaces nothing by itself")

	t.Log("Deleting the Machine of the etcd leader: leadership moves away before its member is removed, and an up-to-date Machine replaces it")
	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	leader, observer := watchLeadership(t, env, tcp, machines)
	g.Expect(env.Client.Delete(ctx, leader)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(names()).NotTo(ContainElement(leader.Name))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(tcp.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(1)), "only the replacement is up to date")
	}, 3*time.Minute, time.Second).Should(Succeed())
	waitForMembershipOf(t, env, tcp, 3, 1)
	movedFirst, sawRemoval := observer.stop()
	g.Expect(sawRemoval).To(BeTrue(), "the leader's member was seen leaving etcd")
	g.Expect(movedFirst).To(BeTrue(), "another member led etcd while the leaving one was still a member")
}

// leadershipObserver polls a node's view of etcd every 100 ms while the leader's member leaves.
type leadershipObserver struct {
	stopped chan struct{}
	done    chan struct{}
	// movedFirst: a leader other than the leaving member was seen while it was a member;
	// removed: the leaving member was seen gone.
	movedFirst, removed bool
}

// watchLeadership finds the Machine whose member leads etcd and starts watching, through
// another node, for leadership to move away before that member leaves.
func watchLeadership(t *testing.T, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane, machines []clusterv1.Machine) (*clusterv1.Machine, *leadershipObserver) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	bundle, err := clustersecrets.Get(ctx, env.Client, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: tcp.Name, Namespace: tcp.Namespace}})
	g.Expect(err).NotTo(HaveOccurred())
	clients := map[string]talosclient.Client{}
	for _, m := range machines {
		c, err := talosclient.NewFactory().New(ctx, bundle, m.Status.Addresses[0].Address)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = c.Close() })
		clients[m.Name] = c
	}
	st, err := clients[machines[0].Name].EtcdStatus(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var leader, witness *clusterv1.Machine
	for i := range machines {
		m := &machines[i]
		id, err := strconv.ParseUint(m.Annotations[controlplanev1.EtcdMemberIDAnnotation], 16, 64)
		g.Expect(err).NotTo(HaveOccurred())
		if id == st.Leader {
			leader = m
		} else {
			witness = m
		}
	}
	g.Expect(leader).NotTo(BeNil(), "the leader %x is one of the Machines' members", st.Leader)
	t.Logf("etcd leader: the member of Machine %s; watching through %s", leader.Name, witness.Name)
	o := &leadershipObserver{stopped: make(chan struct{}), done: make(chan struct{})}
	c := clients[witness.Name]
	go func() {
		defer close(o.done)
		for {
			select {
			case <-o.stopped:
				return
			case <-time.After(100 * time.Millisecond):
			}
			members, err := c.EtcdMembers(ctx)
			if err != nil {
				continue
			}
			isMember := slices.ContainsFunc(members, func(m talosclient.Member) bool { return m.ID == st.Leader })
			if !isMember {
				o.removed = true
				return
			}
			if now, err := c.EtcdStatus(ctx); err == nil && now.Leader != 0 && now.Leader != st.Leader {
				o.movedFirst = true
			}
		}
	}()
	return leader, o
}

// stop ends the watch and says what it saw.
func (o *leadershipObserver) stop() (movedFirst, removed bool) {
	select {
	case <-o.done:
	default:
		close(o.stopped)
		<-o.done
	}
	return o.movedFirst, o.removed
}

// annotated returns a copy of m with the annotation set.
func annotated(m *clusterv1.Machine, key, value string) *clusterv1.Machine {
	out := m.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[key] = value
	return out
}
