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

package docker_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	etcdresource "github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/test/envtest"
)

// TestLightSimRuntime runs Cluster API's core and Talon's three providers, unchanged,
// against light nodes (the simulator's scale mode: etcd and the workload cluster's API held
// in memory). First the Docker provider's acceptance scenario: 1 + 2 up with linked Nodes,
// the control-plane node replaced while the endpoint answers, deletion leaving no node. Then
// a second cluster scaled from 1 to 3 control-plane nodes and back to 1, and from 1 to 2
// workers, with etcd's members following the control-plane Machines each way, and deleted.
func TestLightSimRuntime(t *testing.T) {
	env := envtest.Get(t)
	rt, err := runtime.NewLightSim(t.Context(), t.TempDir(), testr.NewWithOptions(t, testr.Options{Verbosity: 1}))
	if err != nil {
		t.Fatal(err)
	}
	startProviders(t, env, rt, "")
	ns := env.NewNamespace(t, "sim-light")
	runScenario(t, env, rt, clusterSpec{name: "light", namespace: ns, subnet: "127.0.77.0/24", controlPlanes: 1, workers: 2})

	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	s := clusterSpec{name: "scaled", namespace: ns, subnet: "127.0.78.0/24", controlPlanes: 1, workers: 1}
	createCluster(t, c, s)
	waitForRunning(t, c, s, 2)

	scale := func(kind string, obj client.Object, replicas int32) {
		t.Helper()
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		patch := []byte(`{"spec":{"replicas":` + strconv.Itoa(int(replicas)) + `}}`)
		g.Expect(c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", patch))).To(Succeed(), "scale %s", kind)
	}
	tcp := &controlplanev1.TalosControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name + "-control-plane"}}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name + "-workers"}}

	for _, step := range []struct{ controlPlanes, workers int32 }{{3, 2}, {1, 2}} {
		start := time.Now()
		scale("TalosControlPlane", tcp, step.controlPlanes)
		scale("MachineDeployment", md, step.workers)
		waitForRunning(t, c, s, int(step.controlPlanes+step.workers))
		g.Eventually(func(g Gomega) {
			recorded, listed := etcdMembersOf(ctx, g, c, s)
			g.Expect(listed).To(HaveLen(int(step.controlPlanes)))
			g.Expect(listed).To(Equal(recorded), "etcd lists exactly the members the control-plane Machines recorded")
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		t.Logf("Scaled to %d + %d in %s", step.controlPlanes, step.workers, time.Since(start).Round(time.Second))
	}
	nodes, err := workload(t, c, s).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).To(HaveLen(3), "the workload cluster's Nodes follow the Machines")

	deleteCluster(t, c, rt, s)
	g.Expect(rt.LightClusters()).To(BeZero(), "the deleted clusters' in-memory etcd and objects are dropped")
}

// etcdMembersOf returns the etcd member IDs the cluster's control-plane Machines recorded and
// those etcd lists through the Talos API of one of them, both sorted.
func etcdMembersOf(ctx context.Context, g Gomega, c client.Client, s clusterSpec) (recorded, listed []string) {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: s.name},
		client.HasLabels{clusterv1.MachineControlPlaneLabel})).To(Succeed())
	bundle, err := clustersecrets.Get(ctx, c, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name}})
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range list.Items {
		recorded = append(recorded, m.Annotations[controlplanev1.EtcdMemberIDAnnotation])
	}
	g.Expect(list.Items).NotTo(BeEmpty())
	g.Expect(list.Items[0].Status.Addresses).NotTo(BeEmpty())
	talos, err := talosclient.NewFactory().New(ctx, bundle, list.Items[0].Status.Addresses[0].Address)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = talos.Close() }()
	members, err := talos.EtcdMembers(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range members {
		g.Expect(m.Learner).To(BeFalse(), "member %s is a voter", m.Name)
		listed = append(listed, etcdresource.FormatMemberID(m.ID))
	}
	slices.Sort(recorded)
	slices.Sort(listed)
	return recorded, listed
}
