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

package metal_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/metal"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/test/clusters"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/metallab"
	"github.com/talon-capi/talon/test/require"
)

// hostRecord is what a person would see of a host from outside Talon: its BMC's power
// requests, its network boots and the Talos node it runs.
type hostRecord struct {
	resets, boots int
	node          *sim.Node
}

// TestMoveMetalCluster moves a running 1 + 1 cluster on simulated hosts, with a spare host
// and one waiting for a person to wipe it, to a second management plane with clusterctl move.
// Every host keeps its Machine and its running node: no power request reaches a BMC and no
// host network-boots because of the move. The hosts' BMC credentials move with them, the host
// that needs a wipe is not made Available, and the second plane then runs the hosts: scaling
// the workers to zero resets the worker's node through Talos (at the address it learned from
// the workload cluster) and makes its host Available.
func TestMoveMetalCluster(t *testing.T) {
	require.Layer(t, metallab.Layer, metallab.DHCPServerUnavailable())
	_, err := envtest.Binary(plane.ClusterctlBinary)
	require.Layer(t, envtest.Layer, err)
	env := envtest.Get(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	namespace := env.NewNamespace(t, "metal-move")
	l := metallab.New(t, namespace)
	l.StartDHCPServer(10, 13)
	hostCtx, stopHosts := context.WithCancel(context.Background())
	t.Cleanup(stopHosts)
	for i, r := range []struct{ name, role string }{
		{"cp-1", "control-plane"}, {"worker-1", "worker"}, {"spare", "spare"}, {"used", "spare"},
	} {
		l.Register(c, l.AddHost(hostCtx, r.name, i+1, i == 1, ctrl.Log.WithName("sim-host")), r.role)
	}
	// A host that may hold a previous node's data, and that Talon cannot wipe (it never
	// booted Talos through Talon): it waits for a person, on either plane.
	used := &infrav1.MetalHost{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "used"}, used)).To(Succeed())
	patch := client.MergeFrom(used.DeepCopy())
	used.Spec.NeedsWipe = true
	g.Expect(c.Patch(ctx, used, patch)).To(Succeed())

	factory := startProviders(t, env, l, providerOptions{})
	start := time.Now()
	applyCluster(t, c, l, 1, 1, 10, 13)
	var machines []clusterv1.Machine
	g.Eventually(func(g Gomega) {
		machines = runningMachines(ctx, g, c, namespace, 2)
		cluster := &clusterv1.Cluster{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "metal"}, cluster)).To(Succeed())
		g.Expect(conditions.IsTrue(cluster, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue())
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("2 Machines Running %s after the cluster was applied", time.Since(start).Round(time.Second))

	// What the move must not change: which Machine each host runs, at which address, and
	// the hosts themselves.
	hostOf := map[string]string{}    // Machine -> MetalHost
	addressOf := map[string]string{} // Machine -> address
	for _, m := range machines {
		hostOf[m.Name] = strings.TrimPrefix(m.Spec.ProviderID, metal.ProviderIDPrefix+namespace+"/")
		g.Expect(m.Status.Addresses).NotTo(BeEmpty(), "Machine %s", m.Name)
		addressOf[m.Name] = m.Status.Addresses[0].Address
	}
	g.Expect(hostOf).To(HaveLen(2))
	before := map[string]hostRecord{}
	for name, h := range l.Hosts {
		before[name] = hostRecord{resets: len(h.BMC.Resets("1")), boots: len(h.Sim.NetBoots()), node: h.Sim.Node()}
	}
	for _, host := range hostOf {
		g.Expect(before[host].node).NotTo(BeNil(), "MetalHost %s runs a node", host)
	}

	t.Log("A second management plane, with Talon's providers and no boot service of its own yet")
	target, err := envtest.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := target.Stop(); err != nil {
			t.Logf("Failed to stop the second management plane: %v", err)
		}
	})
	startProviders(t, target, l, providerOptions{noBootService: true, factory: factory})
	clusters.MoveBetweenPlanes(t, env, target, namespace)
	left := &infrav1.MetalHostList{}
	g.Expect(c.List(ctx, left, client.InNamespace(namespace))).To(Succeed())
	g.Expect(left.Items).To(BeEmpty(), "the MetalHosts moved")
	for name := range l.Hosts {
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-bmc"}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "BMC credentials Secret of %s moved: %v", name, err)
	}

	// The second plane runs every host as the first did.
	tc := target.Client
	start = time.Now()
	g.Eventually(func(g Gomega) {
		moved := runningMachines(ctx, g, tc, namespace, 2)
		for _, m := range moved {
			host, ok := hostOf[m.Name]
			g.Expect(ok).To(BeTrue(), "Machine %s is one of the moved ones", m.Name)
			g.Expect(m.Spec.ProviderID).To(Equal(metal.ProviderID(namespace, host)))
			g.Expect(m.Status.Addresses).To(ContainElement(HaveField("Address", addressOf[m.Name])), "Machine %s", m.Name)
			tmm := &infrav1.TalosMetalMachine{}
			g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Spec.InfrastructureRef.Name}, tmm)).To(Succeed())
			g.Expect(conditions.IsTrue(tmm, infrav1.HostProvisionedCondition)).To(BeTrue(), "TalosMetalMachine %s", tmm.Name)
			h := &infrav1.MetalHost{}
			g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: host}, h)).To(Succeed())
			g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateProvisioned), "MetalHost %s", host)
			g.Expect(h.Spec.ConsumerRef).NotTo(BeNil(), "MetalHost %s", host)
			g.Expect(h.Spec.ConsumerRef.Name).To(Equal(tmm.Name), "MetalHost %s", host)
			g.Expect(h.Spec.ConsumerRef.UID).To(Equal(tmm.UID), "the claim of MetalHost %s names the moved TalosMetalMachine", host)
			g.Expect(h.Status.BootAssets).NotTo(BeNil(), "MetalHost %s can be wiped from the second plane", host)
			g.Expect(conditions.IsTrue(h, infrav1.BMCReachableCondition)).To(BeTrue(), "MetalHost %s reaches its BMC with the moved credentials", host)
		}
		spare := &infrav1.MetalHost{}
		g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "spare"}, spare)).To(Succeed())
		g.Expect(spare.Status.State).To(Equal(infrav1.MetalHostStateAvailable))
		g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "used"}, used)).To(Succeed())
		g.Expect(used.Spec.NeedsWipe).To(BeTrue())
		g.Expect(used.Status.State).To(Equal(infrav1.MetalHostStateError), "a host waiting for a wipe is not Available after the move")
		cluster := &clusterv1.Cluster{}
		g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "metal"}, cluster)).To(Succeed())
		g.Expect(conditions.IsTrue(cluster, clusterv1.AvailableCondition)).To(BeTrue(), "Cluster Available on the second plane")
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("The second plane runs the moved cluster %s after the move", time.Since(start).Round(time.Second))
	for name, h := range l.Hosts {
		g.Expect(h.BMC.Resets("1")).To(HaveLen(before[name].resets), "no power request reached the BMC of %s", name)
		g.Expect(h.Sim.NetBoots()).To(HaveLen(before[name].boots), "%s did not network-boot", name)
		g.Expect(h.Sim.Node()).To(BeIdenticalTo(before[name].node), "%s runs the node it ran", name)
	}

	// The second plane releases a host as the first would: reset through Talos, powered off,
	// Available.
	md := &clusterv1.MachineDeployment{}
	g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "metal-workers"}, md)).To(Succeed())
	patch = client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To[int32](0)
	g.Expect(tc.Patch(ctx, md, patch)).To(Succeed())
	start = time.Now()
	g.Eventually(func(g Gomega) {
		runningMachines(ctx, g, tc, namespace, 1)
		h := &infrav1.MetalHost{}
		g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "worker-1"}, h)).To(Succeed())
		g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateAvailable))
		g.Expect(h.Spec.ConsumerRef).To(BeNil())
		g.Expect(h.Spec.NeedsWipe).To(BeFalse(), "reset through Talos, not powered off for a wipe")
		g.Expect(h.Status.PowerState).To(Equal("Off"))
		g.Expect(h.Status.LastWipe).NotTo(BeNil())
		g.Expect(h.Status.LastWipe.Method).To(Equal(infrav1.HostWipeTalosReset))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	_, err = os.Stat(filepath.Join(l.Hosts["worker-1"].StateDir, "config.yaml"))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the reset wiped the worker's disk")
	g.Expect(l.Hosts["worker-1"].DataDiskHoldsData()).To(BeTrue(), "without spec.wipeDataDisks a data disk keeps its data")
	// Meanwhile no other host got a power request from either plane.
	for name, h := range l.Hosts {
		if name != "worker-1" {
			g.Expect(h.BMC.Resets("1")).To(HaveLen(before[name].resets), "no power request reached the BMC of %s", name)
		}
	}
	t.Logf("Worker scaled down on the second plane, its host reset and Available after %s", time.Since(start).Round(time.Second))
}
