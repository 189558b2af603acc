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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/metallab"
	"github.com/talon-capi/talon/test/require"
)

// TestStaticControlPlaneWithVIP builds a 3 control-plane cluster on simulated hosts with
// static addresses (MetalHost spec.network: the hosts network-boot with DHCP leases, then
// Talos replaces them with the addresses of the config the boot service served) behind the
// Talos shared VIP a TalosMetalCluster asks for, which is also its endpoint. A host without
// addresses on the VIP's network is not booted until it has them. An in-place update keeps
// the nodes' addresses and the VIP. Then it pulls the power of
// the node holding the VIP: another node takes the VIP over once the holder's etcd lease
// expires, and the endpoint answers again.
func TestStaticControlPlaneWithVIP(t *testing.T) {
	require.Layer(t, metallab.Layer, metallab.DHCPServerUnavailable())
	env := envtest.Get(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	namespace := env.NewNamespace(t, "vip")
	l := metallab.New(t, namespace)
	// Leases for network boots only; the nodes run at .21 to .23.
	l.StartDHCPServer(10, 12)
	vip := l.Prefix + "50"

	hostCtx, stopHosts := context.WithCancel(context.Background())
	t.Cleanup(stopHosts)
	static := map[string]string{}
	for i := 1; i <= 3; i++ {
		h := l.AddHost(hostCtx, fmt.Sprintf("cp-%d", i), i, false, ctrl.Log.WithName("sim-host"))
		static[h.Name] = fmt.Sprintf("%s%d", l.Prefix, 20+i)
		h.Network = &infrav1.HostNetwork{
			Interfaces: []infrav1.HostInterface{{
				Name: "lan", MACAddress: h.MAC.String(), Addresses: []string{static[h.Name] + "/24"}, Gateway: l.ServerIP.String(),
			}},
			Nameservers: []string{l.ServerIP.String()},
		}
		if i == 1 {
			// The first host is registered without its addresses: its Machine cannot tell
			// where the VIP goes, and waits for them.
			network := h.Network
			h.Network = nil
			l.Register(c, h, "control-plane")
			h.Network = network
			continue
		}
		l.Register(c, h, "control-plane")
	}
	startProviders(t, env, l, providerOptions{})

	// The metal template, with the VIP in place of a load balancer's endpoint.
	variables := metallab.BootAssets(t)
	for k, v := range map[string]string{
		"CLUSTER_NAME": "metal", "NAMESPACE": namespace, "KUBERNETES_VERSION": simtest.KubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": "3", "WORKER_MACHINE_COUNT": "0", "CONTROL_PLANE_ENDPOINT_HOST": "unused",
	} {
		variables[k] = v
	}
	objs, err := utilyaml.ToUnstructured(metallab.Template(t, variables))
	g.Expect(err).NotTo(HaveOccurred())
	for i := range objs {
		if objs[i].GetKind() == "TalosMetalCluster" {
			unstructured.RemoveNestedField(objs[i].Object, "spec", "controlPlaneEndpoint")
			g.Expect(unstructured.SetNestedField(objs[i].Object, vip, "spec", "controlPlaneVIP", "address")).To(Succeed())
		}
		g.Expect(c.Create(ctx, &objs[i])).To(Succeed(), "create %s %s", objs[i].GetKind(), objs[i].GetName())
	}

	start := time.Now()
	message := metalMachineCondition(t, c, namespace, "cp-1", infrav1.VIPLinkUnknownReason, time.Minute)
	g.Expect(message).To(ContainSubstring("set controlPlaneVIP.link"))
	t.Logf("Waiting for the host's network: %s", message)
	g.Expect(l.Hosts["cp-1"].Sim.NetBoots()).To(BeEmpty(), "the host is not booted before its config can say where the VIP goes")
	cp1 := &infrav1.MetalHost{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "cp-1"}, cp1)).To(Succeed())
	cp1.Spec.Network = l.Hosts["cp-1"].Network
	g.Expect(c.Update(ctx, cp1)).To(Succeed())

	g.Eventually(func(g Gomega) {
		runningMachines(ctx, g, c, namespace, 3)
	}).WithTimeout(8 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("3 control-plane Machines Running after %s", time.Since(start).Round(time.Second))

	mc := &infrav1.TalosMetalCluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "metal"}, mc)).To(Succeed())
	g.Expect(mc.Spec.ControlPlaneEndpoint.Host).To(Equal(vip), "the VIP is the endpoint")
	g.Expect(mc.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(6443))

	// Every node runs at its static address, on its NIC in place of the lease it booted with.
	for name, address := range static {
		h := l.Hosts[name]
		g.Expect(h.Sim.Node().Address()).To(Equal(address), "host %s", name)
		boots := h.Sim.NetBoots()
		g.Expect(boots).NotTo(BeEmpty())
		g.Expect(boots[len(boots)-1].Address.IP.String()).NotTo(Equal(address), "host %s booted with a lease", name)
		addresses := nicAddresses(t, h.NIC)
		g.Expect(addresses).To(ContainElement(address+"/24"), "host %s", name)
		g.Expect(addresses).NotTo(ContainElement(boots[len(boots)-1].Address.String()), "host %s still has its lease", name)
	}

	// The workload cluster answers through the VIP, held by exactly one node, and its Nodes
	// have the static addresses.
	workload := workloadClient(t, c, namespace, "metal")
	holder := vipHolder(t, l, vip)
	g.Expect(holder).NotTo(BeEmpty(), "a node holds the VIP %s", vip)
	nodes, err := workload.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var internal []string
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
	}
	g.Expect(internal).To(ConsistOf(static["cp-1"], static["cp-2"], static["cp-3"]))
	t.Logf("%s holds the VIP", holder)

	// An in-place update applies each node's new config as the boot service served it: the
	// nodes keep their static addresses and the VIP.
	names := make([]string, 0, 3)
	for _, m := range runningMachines(ctx, g, c, namespace, 3) {
		names = append(names, m.Name)
	}
	tcp := &controlplanev1.TalosControlPlane{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "metal-control-plane"}, tcp)).To(Succeed())
	patch := client.MergeFrom(tcp.DeepCopy())
	tcp.Spec.Rollout.Strategy.Type = controlplanev1.InPlaceStrategyType
	tcp.Spec.ControlPlaneConfig.StrategicPatches = append(tcp.Spec.ControlPlaneConfig.StrategicPatches,
		"apiVersion: v1alpha1\nkind: SysctlConfig\nparams:\n  vm.max_map_count: \"262144\"\n")
	g.Expect(c.Patch(ctx, tcp, patch)).To(Succeed())
	start = time.Now()
	g.Eventually(func(g Gomega) {
		for name, address := range static {
			installed, err := os.ReadFile(filepath.Join(l.Hosts[name].StateDir, "config.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(installed)).To(ContainSubstring("vm.max_map_count"), "%s runs the new config", name)
			g.Expect(string(installed)).To(ContainSubstring(address+"/24"), "%s keeps its static address", name)
			g.Expect(string(installed)).To(ContainSubstring("kind: Layer2VIPConfig"), "%s keeps the VIP", name)
		}
		machines := runningMachines(ctx, g, c, namespace, 3)
		for _, m := range machines {
			g.Expect(names).To(ContainElement(m.Name), "updated in place, not replaced")
			g.Expect(m.Annotations).NotTo(HaveKey(controlplanev1.InPlaceUpdateAnnotation), "Machine %s is still being updated", m.Name)
		}
		_, err := workloadClient(t, c, namespace, "metal").CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "the VIP answers")
	}).WithTimeout(4 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("Control plane updated in place after %s, static addresses and VIP kept", time.Since(start).Round(time.Second))
	holder = vipHolder(t, l, vip)
	g.Expect(holder).NotTo(BeEmpty(), "a node holds the VIP %s", vip)

	// The holder loses its power (and Talon cannot turn it on again).
	h := l.Hosts[holder]
	h.BMC.SetPower("1", false)
	h.BMC.SetIgnorePower(true)
	cut := time.Now()
	var next string
	g.Eventually(func(g Gomega) {
		next = vipHolder(t, l, vip)
		g.Expect(next).NotTo(BeEmpty(), "no node holds the VIP yet")
		g.Expect(next).NotTo(Equal(holder))
		fresh := workloadClient(t, c, namespace, "metal")
		_, err := fresh.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	failover := time.Since(cut)
	t.Logf("%s took the VIP over %s after %s lost its power", next, failover.Round(time.Second), holder)
	// A node that loses its power does not resign: the VIP stays in its election until its
	// etcd lease expires. The lease lasts 60 s from its last renewal (every 20 s), or from a
	// new etcd leader's promotion: so 40 s at the least, where a resignation moves the VIP
	// within a few seconds.
	g.Expect(failover).To(BeNumerically(">", 35*time.Second), "the VIP moved before the holder's lease expired")
}

// nicAddresses are the addresses (with prefix length) on a network interface.
func nicAddresses(t *testing.T, nic string) []string {
	t.Helper()
	out, err := exec.CommandContext(context.Background(), "ip", "-o", "address", "show", "dev", nic).CombinedOutput()
	if err != nil {
		t.Fatalf("ip address show dev %s: %v: %s", nic, err, out)
	}
	var addresses []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		for i := range fields {
			if (fields[i] == "inet" || fields[i] == "inet6") && i+1 < len(fields) {
				addresses = append(addresses, fields[i+1])
			}
		}
	}
	return addresses
}

// vipHolder is the name of the lab host whose NIC holds vip, "" when none does; it fails
// the test when two do.
func vipHolder(t *testing.T, l *metallab.Lab, vip string) string {
	t.Helper()
	var holders []string
	for name, h := range l.Hosts {
		for _, a := range nicAddresses(t, h.NIC) {
			if strings.HasPrefix(a, vip+"/") {
				holders = append(holders, name)
			}
		}
	}
	if len(holders) > 1 {
		t.Fatalf("the VIP %s is on %v at once", vip, holders)
	}
	if len(holders) == 0 {
		return ""
	}
	return holders[0]
}

// workloadClient is a client of the workload cluster, through the endpoint of the
// kubeconfig Cluster API wrote.
func workloadClient(t *testing.T, c client.Client, namespace, cluster string) *kubernetes.Clientset {
	t.Helper()
	secret := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: cluster + "-kubeconfig"}, secret); err != nil {
		t.Fatal(err)
	}
	config, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	config.Timeout = 10 * time.Second
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return clientset
}

// TestNetworkSettingsAreValidated: the API server refuses static network settings and VIPs
// Talos could not use, saying why, and a VIP once set keeps its address.
func TestNetworkSettingsAreValidated(t *testing.T) {
	env := envtest.Get(t)
	ctx := t.Context()
	c := env.Client
	namespace := env.NewNamespace(t, "network-validation")
	lan := func(mac string, addresses ...string) infrav1.HostInterface {
		return infrav1.HostInterface{Name: "lan" + mac[len(mac)-1:], MACAddress: mac, Addresses: addresses}
	}
	for _, tc := range []struct {
		name, want string
		network    infrav1.HostNetwork
	}{
		{"an address without its prefix length", "an address is an IP address with its prefix length",
			infrav1.HostNetwork{Interfaces: []infrav1.HostInterface{lan("02:00:00:00:00:01", "10.0.0.11")}}},
		{"a gateway that is not an address", "the gateway is an IP address",
			infrav1.HostNetwork{Interfaces: []infrav1.HostInterface{{Name: "lan", MACAddress: "02:00:00:00:00:01", Addresses: []string{"10.0.0.11/24"}, Gateway: "router"}}}},
		{"a name server that is not an address", "a name server is an IP address",
			infrav1.HostNetwork{Interfaces: []infrav1.HostInterface{lan("02:00:00:00:00:01", "10.0.0.11/24")}, Nameservers: []string{"dns.example.com"}}},
		{"one MAC address twice", "each interface has a MAC address of its own",
			infrav1.HostNetwork{Interfaces: []infrav1.HostInterface{lan("02:00:00:00:00:01", "10.0.0.11/24"), {Name: "other", MACAddress: "02:00:00:00:00:01", Addresses: []string{"10.1.0.11/24"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := &infrav1.MetalHost{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "bad"},
				Spec:       infrav1.MetalHostSpec{BootMACAddresses: []string{"02:00:00:00:00:01"}, Network: &tc.network},
			}
			err := c.Create(ctx, h)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}

	g := NewWithT(t)
	mc := &infrav1.TalosMetalCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "vip"},
		Spec:       infrav1.TalosMetalClusterSpec{ControlPlaneVIP: &infrav1.ControlPlaneVIP{Address: "10.0.0.300"}},
	}
	err := c.Create(ctx, mc)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("the VIP is an IP address"))
	mc.Spec.ControlPlaneVIP.Address = "10.0.0.50"
	g.Expect(c.Create(ctx, mc)).To(Succeed())
	mc.Spec.ControlPlaneVIP.Address = "10.0.0.51"
	err = c.Update(ctx, mc)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("the VIP cannot change"))
}
