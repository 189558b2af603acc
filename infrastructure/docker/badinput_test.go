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
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	testdocker "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestDockerConflicts: what only the Docker host can refuse (a subnet another network
// holds, a host port another process holds) shows as a condition that names it.
func TestDockerConflicts(t *testing.T) {
	ctx := t.Context()
	require.Layer(t, testdocker.Layer, testdocker.Available(ctx))
	env := envtest.Get(t)
	rt, err := runtime.NewDocker(runtime.WithUnprivilegedNodes()) // privileges are not under test
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	ns := env.NewNamespace(t, "docker-conflicts")
	for _, name := range []string{"overlap", "ports"} {
		testdocker.RemoveLabelled(t, map[string]string{runtime.LabelCluster: name})
	}
	startProviders(t, env, rt, testdocker.SimImage())

	t.Run("a subnet that overlaps an existing network", func(t *testing.T) {
		const occupied = "talon-test-occupied"
		testdocker.RemoveLabelled(t, map[string]string{"talon.dev/test": occupied})
		_, err := testdocker.Docker(ctx, "network", "create", "--label", "talon.dev/test="+occupied, "--subnet", "172.30.124.0/24", occupied)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		createInfraCluster(t, env.Client, ns, "overlap", "172.30.124.0/25")
		expectCondition(t, env.Client, &infrav1.TalosDockerCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "overlap"}},
			infrav1.NetworkReadyCondition, infrav1.ConflictReason, "172.30.124.0/25", occupied)
	})

	t.Run("a host port that is taken", func(t *testing.T) {
		g := NewWithT(t)
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "0.0.0.0:0")
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = l.Close() })
		port := l.Addr().(*net.TCPAddr).Port
		createInfraCluster(t, env.Client, ns, "ports", "172.30.123.0/24")
		g.Eventually(func(g Gomega) {
			cluster := &clusterv1.Cluster{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ports"}, cluster)).To(Succeed())
			g.Expect(cluster.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
		}).WithTimeout(time.Minute).Should(Succeed())
		// A Machine with bootstrap data, as the bootstrap provider leaves it.
		data := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ports-node"}, Data: map[string][]byte{"value": []byte("version: v1alpha1")}}
		g.Expect(env.Client.Create(ctx, data)).To(Succeed())
		dm := &infrav1.TalosDockerMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ports-node"}, Spec: infrav1.TalosDockerMachineSpec{
			Image:             testdocker.SimImage(),
			ExtraPortMappings: []infrav1.DockerPortMapping{{ContainerPort: 80, HostPort: int32(port)}},
		}}
		g.Expect(env.Client.Create(ctx, dm)).To(Succeed())
		machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ports-node"}, Spec: clusterv1.MachineSpec{
			ClusterName: "ports",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: &data.Name},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerMachine", Name: dm.Name,
			},
		}}
		g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
		expectCondition(t, env.Client, dm, infrav1.ContainerProvisionedCondition, infrav1.ConflictReason, strconv.Itoa(port))
		running, err := testdocker.Docker(ctx, "ps", "--quiet", "--filter", "label="+runtime.LabelMachine+"=ports-node")
		g.Expect(running, err).To(BeEmpty(), "no container runs: one that cannot start is removed with its volumes")
		g.Expect(env.Client.Delete(ctx, machine)).To(Succeed())
		g.Eventually(func() ([]string, error) {
			return testdocker.Leftovers(ctx, map[string]string{runtime.LabelMachine: "ports-node"})
		}).WithTimeout(time.Minute).Should(BeEmpty(), "deleting the Machine leaves nothing")
	})
}

// createInfraCluster creates a Cluster with only a TalosDockerCluster in subnet.
func createInfraCluster(tb testing.TB, c client.Client, ns, name, subnet string) {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	g.Expect(c.Create(ctx, &infrav1.TalosDockerCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       infrav1.TalosDockerClusterSpec{Network: infrav1.DockerNetwork{Subnet: subnet}},
	})).To(Succeed())
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerCluster", Name: name},
	}}
	g.Expect(c.Create(ctx, cluster)).To(Succeed())
	tb.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = c.Delete(ctx, cluster)
		NewWithT(tb).Eventually(func() error {
			return c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		}).WithTimeout(2*time.Minute).Should(MatchError(ContainSubstring("not found")), "Cluster %s is deleted", name)
	})
}

// expectCondition waits for obj's condition to be False with reason and a message naming
// every one of names.
func expectCondition(tb testing.TB, c client.Client, obj interface {
	client.Object
	conditions.Getter
}, condition, reason string, names ...string) {
	tb.Helper()
	NewWithT(tb).Eventually(func(g Gomega) {
		g.Expect(c.Get(tb.Context(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		cond := conditions.Get(obj, condition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(reason), cond.Message)
		for _, name := range names {
			g.Expect(cond.Message).To(ContainSubstring(name))
		}
		tb.Logf("%s %s: %s", condition, cond.Reason, cond.Message)
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}
