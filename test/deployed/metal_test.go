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

package deployed

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/metal"
	"github.com/talon-capi/talon/infrastructure/metal/bootservice"
	"github.com/talon-capi/talon/internal/imagefactory/factorytest"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/clusters"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/metallab"
	"github.com/talon-capi/talon/test/require"
)

// TestMetalBootServiceAsPods installs Talon as a site with only bare metal does: clusterctl
// init with out/clusterctl-metal.yaml, whose infrastructure provider has no Docker socket
// and runs the boot service in its Pod, on the provisioning network through host
// networking. Two simulated hosts (a Redfish and an IPMI BMC) on a bridge network-boot
// from it (DHCP in full mode, TFTP, the iPXE script and a one-time config over HTTP) and
// form a 1 + 1 cluster, with Talos installers resolved by an Image Factory of the site's own
// (TALON_IMAGE_FACTORY_URL). Deleting the cluster resets both hosts, which are Available
// again. No manager may have been refused anything.
func TestMetalBootServiceAsPods(t *testing.T) {
	require.Layer(t, metallab.Layer, metallab.RootNetworking())
	m := startManagementCluster(t, "metal")
	g := NewWithT(t)
	ctx := t.Context()
	m.config = filepath.Join(envtest.RepoRoot(), "out", "clusterctl-metal.yaml")
	if _, err := os.Stat(m.config); err != nil {
		t.Fatalf("run 'make release-manifests' first: %v", err)
	}

	const namespace = "default"
	l := metallab.New(t, namespace)
	hostCtx, stopHosts := context.WithCancel(context.Background())
	t.Cleanup(stopHosts)
	hosts := map[string]*metallab.Host{
		"control-plane": l.AddHost(hostCtx, "cp-1", 1, false, logr.Discard()),
		"worker":        l.AddHost(hostCtx, "worker-1", 2, true, logr.Discard()),
	}
	tftpDir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(tftpDir, bootservice.BootFileUEFIAMD64), []byte("stand-in iPXE for UEFI\n"), 0o600)).To(Succeed())
	// The site's own Image Factory, where the bootstrap manager's Pod reaches it.
	factory := factorytest.StartOn(t, l.ServerIP.String(), "v1.14.1")
	serverIP := l.ServerIP.String()
	pool := l.Addresses(10, 14)

	t.Log("clusterctl init: cert-manager, Cluster API and Talon, the infrastructure provider for bare metal with the boot service")
	start := time.Now()
	g.Expect(quickstart.InstallProvidersAsPods(ctx, m.p, m.config, []string{
		"TALON_BOOT_SERVER_IP=" + serverIP, "TALON_BOOT_INTERFACE=" + l.Bridge,
		"TALON_DHCP_MODE=full", "TALON_DHCP_POOL_START=" + pool[0], "TALON_DHCP_POOL_END=" + pool[len(pool)-1],
		"TALON_TFTP_DIR=" + tftpDir, "TALON_BOOT_ASSET_DIR=" + t.TempDir(), "TALON_IMAGE_FACTORY_URL=" + factory.URL,
	})).To(Succeed())
	t.Logf("Installed in %s", time.Since(start).Round(time.Second))
	clusters.ExpectManagersRunning(t, m.c)
	infra := &appsv1.Deployment{}
	g.Expect(m.c.Get(ctx, client.ObjectKey{Namespace: "talon-infrastructure-system", Name: "talon-infrastructure-controller-manager"}, infra)).To(Succeed())
	spec := infra.Spec.Template.Spec
	g.Expect(spec.HostNetwork).To(BeTrue(), "the boot service serves DHCP on the provisioning network")
	for _, v := range spec.Volumes {
		g.Expect(v.HostPath == nil || ptr.Deref(v.HostPath.Type, "") != corev1.HostPathSocket).To(BeTrue(), "no Docker socket: %+v", v)
	}
	g.Expect(infra.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType), "a new Pod cannot start beside the old one")
	g.Expect(spec.Containers[0].SecurityContext.Capabilities.Add).To(ConsistOf(corev1.Capability("NET_BIND_SERVICE"), corev1.Capability("NET_RAW")))
	g.Expect(spec.Containers[0].SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))

	for role, h := range hosts {
		l.Register(m.c, h, role)
	}
	g.Eventually(func(g Gomega) {
		list := &infrav1.MetalHostList{}
		g.Expect(m.c.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(len(hosts)))
		for _, h := range list.Items {
			g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateAvailable), "MetalHost %s: %s", h.Name, h.Status.LastError)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	t.Log("A 1 + 1 cluster from Talon's metal template, behind the site's load balancer")
	lb := simtest.NewLoadBalancer(t, serverIP, 6443, 50001)
	lb.SetBackends(pool...)
	variables := metallab.BootAssets(t)
	for k, v := range map[string]string{
		"CLUSTER_NAME": "metal", "NAMESPACE": namespace, "KUBERNETES_VERSION": simtest.KubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "1", "CONTROL_PLANE_ENDPOINT_HOST": serverIP,
	} {
		variables[k] = v
	}
	start = time.Now()
	m.apply(t, metallab.Template(t, variables))
	var machines []clusterv1.Machine
	g.Eventually(func(g Gomega) {
		machines = clusters.UsableMachines(ctx, g, m.c, namespace, "metal")
		g.Expect(machines).To(HaveLen(2))
	}).WithTimeout(6 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("2 Machines Running with Ready Nodes after %s", time.Since(start).Round(time.Second))

	// Each Machine on its own host, which booted through the boot service in the Pod.
	for _, machine := range machines {
		name, ok := strings.CutPrefix(machine.Spec.ProviderID, metal.ProviderIDPrefix+namespace+"/")
		g.Expect(ok).To(BeTrue(), "providerID %s", machine.Spec.ProviderID)
		g.Expect(l.Hosts).To(HaveKey(name), "Machine %s runs on a MetalHost of the lab", machine.Name)
		boots := l.Hosts[name].Sim.NetBoots()
		g.Expect(boots).NotTo(BeEmpty())
		last := boots[len(boots)-1]
		g.Expect(last.Firmware).To(Equal(bootservice.BootFileUEFIAMD64))
		g.Expect(last.ScriptURL).To(HavePrefix("http://"+serverIP+":8081/"), "the default HTTP address, on the provisioning network")
		g.Expect(last.ScriptURL).To(ContainSubstring(url.QueryEscape(l.Hosts[name].MAC.String())))
		g.Expect(last.ConfigURL).NotTo(BeEmpty())
	}
	// The node's other addresses do not serve iPXE scripts and configs (host networking).
	if conn, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", "127.0.0.1:8081"); err == nil {
		_ = conn.Close()
		t.Error("the boot service's HTTP server answers on 127.0.0.1: it should listen on the provisioning network only")
	}
	configs := &bootstrapv1.TalosConfigList{}
	g.Expect(m.c.List(ctx, configs, client.InNamespace(namespace))).To(Succeed())
	g.Expect(configs.Items).To(HaveLen(2))
	for _, config := range configs.Items {
		g.Expect(config.Status.ImageFactory.Installer).To(MatchRegexp(`/metal-installer/[0-9a-f]{64}:v1\.14\.1$`), "TalosConfig %s", config.Name)
	}
	g.Expect(factory.SchematicsCreated()).To(BeNumerically(">", 0), "the bootstrap manager used the site's Image Factory")

	t.Log("Deleting the cluster resets both hosts through Talos; they are Available again")
	start = time.Now()
	g.Expect(m.c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "metal"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := m.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "metal"}, &clusterv1.Cluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Cluster is gone: %v", err)
		list := &infrav1.MetalHostList{}
		g.Expect(m.c.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		for _, h := range list.Items {
			g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateAvailable), "MetalHost %s", h.Name)
			g.Expect(h.Spec.ConsumerRef).To(BeNil(), "MetalHost %s", h.Name)
		}
	}).WithTimeout(4 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("Deleted in %s", time.Since(start).Round(time.Second))
	for _, h := range hosts {
		_, err := os.Stat(filepath.Join(h.StateDir, "config.yaml"))
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "the reset wiped %s's disk", h.Name)
	}
	clusters.ExpectNoRefusals(t, m.p)
}
