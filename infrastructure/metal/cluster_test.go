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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	bootstrapsetup "github.com/talon-capi/talon/bootstrap/setup"
	controlplanesetup "github.com/talon-capi/talon/controlplane/setup"
	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/infrastructure/metal"
	"github.com/talon-capi/talon/infrastructure/metal/bootservice"
	infrasetup "github.com/talon-capi/talon/infrastructure/setup"
	"github.com/talon-capi/talon/internal/imagefactory/factorytest"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/metallab"
	testmetrics "github.com/talon-capi/talon/test/metrics"
	"github.com/talon-capi/talon/test/require"
)

// logs holds every line the managers log, at every verbosity, for the credentials check.
var logs = &syncBuffer{}

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.Level(zapcore.Level(-5))))
	os.Exit(envtest.Run(m))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// providerOptions say how startProviders runs the providers.
type providerOptions struct {
	// topology also runs Cluster API's topology reconcilers.
	topology bool
	// noBootService leaves out the boot service: another manager serves the lab's network.
	noBootService bool
	// factory is the stand-in Image Factory the providers use; a new one when nil.
	factory *factorytest.Server
}

// startProviders runs Cluster API and Talon's three providers on env, with the boot service
// on the lab in proxy mode behind the lab's DHCP server; it returns the stand-in Image
// Factory they use.
func startProviders(t *testing.T, env *envtest.Environment, l *metallab.Lab, opts providerOptions) *factorytest.Server {
	t.Helper()
	tftpDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(tftpDir, bootservice.BootFileUEFIAMD64), []byte("stand-in iPXE for UEFI\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := infrasetup.NewSettings()
	settings.Metal = metal.Settings{
		AssetDir: t.TempDir(), BootTimeout: 30 * time.Second, ResetTimeout: time.Minute, BootService: !opts.noBootService,
		RegisterNamespace: l.Namespace,
		Service: metal.BootServiceOptions{
			Interface: l.Bridge, ServerIP: l.ServerIP, HTTPAddress: l.ServerIP.String() + ":0", TFTPDir: tftpDir,
			DHCPMode: bootservice.DHCPModeProxy,
		},
	}
	rt := runtime.NewSim(t.Context(), envtest.BinDir(), t.TempDir(), logr.Discard())
	// The v1.14 contract installs from Image Factory installers: a local factory stands in.
	factory := opts.factory
	if factory == nil {
		factory = factorytest.Start(t, "v1.14.1")
	}
	env.StartManager(t, envtest.ManagerOptions{
		CoreReconcilers: true,
		Topology:        opts.topology,
		Setup: func(ctx context.Context, mgr ctrl.Manager) error {
			opts := manager.NewOptions()
			opts.ImageFactoryURL = factory.URL
			return errors.Join(
				bootstrapsetup.Reconcilers(ctx, mgr, opts),
				controlplanesetup.Reconcilers(ctx, mgr, opts),
				infrasetup.Reconcilers(ctx, mgr, opts, settings, rt),
			)
		},
	})
	return factory
}

// applyCluster applies the metal template for a cluster "metal" in the lab's namespace with
// controlPlanes and workers Machines, behind the user's load balancer on the lab's address in
// front of the lab's DHCP pool .first to .last; it returns the template's variables.
func applyCluster(t *testing.T, c client.Client, l *metallab.Lab, controlPlanes, workers, first, last int) map[string]string {
	t.Helper()
	lb := simtest.NewLoadBalancer(t, l.ServerIP.String(), 6443, 50001)
	lb.SetBackends(l.Addresses(first, last)...)
	variables := metallab.BootAssets(t)
	for k, v := range map[string]string{
		"CLUSTER_NAME": "metal", "NAMESPACE": l.Namespace, "KUBERNETES_VERSION": simtest.KubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": strconv.Itoa(controlPlanes), "WORKER_MACHINE_COUNT": strconv.Itoa(workers),
		"CONTROL_PLANE_ENDPOINT_HOST": l.ServerIP.String(),
	} {
		variables[k] = v
	}
	metallab.ApplyTemplate(t, c, variables)
	return variables
}

// machines returns the cluster's Machines, expecting want, all Running with a Node.
func runningMachines(ctx context.Context, g Gomega, c client.Client, namespace string, want int) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	states := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		state := m.Name + ": " + m.Status.Phase
		if c := conditions.Get(&m, clusterv1.MachineReadyCondition); c != nil && c.Status != metav1.ConditionTrue {
			state += " (" + c.Message + ")"
		}
		states = append(states, state)
	}
	g.Expect(len(list.Items)).To(Equal(want), "Machines: %v", states)
	for _, m := range list.Items {
		g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "Machines: %v", states)
		g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "Machines: %v", states)
	}
	return list.Items
}

// metalMachineCondition waits until a TalosMetalMachine has HostProvisioned False with reason,
// and returns its message.
func metalMachineCondition(t *testing.T, c client.Client, namespace, host, reason string, timeout time.Duration) string {
	t.Helper()
	var message string
	NewWithT(t).Eventually(func(g Gomega) {
		list := &infrav1.TalosMetalMachineList{}
		g.Expect(c.List(t.Context(), list, client.InNamespace(namespace))).To(Succeed())
		var seen []string
		for _, m := range list.Items {
			cond := conditions.Get(&m, infrav1.HostProvisionedCondition)
			named := cond != nil && (strings.Contains(cond.Message, "MetalHost "+host+" ") || strings.Contains(cond.Message, "MetalHost "+host+":"))
			if named && cond.Reason == reason {
				message = cond.Message
				return
			}
			if cond != nil {
				seen = append(seen, m.Name+": "+cond.Reason+" "+cond.Message)
			}
		}
		g.Expect(false).To(BeTrue(), "no TalosMetalMachine has reason %s: %v", reason, seen)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	return message
}

// TestClusterOnSimulatedHosts builds a 3 control-plane + 2 worker cluster on five simulated
// hosts (three with Redfish BMCs, two with IPMI BMCs) that network-boot through the boot
// service in proxy mode behind the site's DHCP server (dnsmasq, leasing the addresses): DHCP,
// ProxyDHCP and TFTP on a bridge, the iPXE script and a one-time config over HTTP. One
// worker's BMC first ignores power requests (the Machine says so, then recovers); a deleted
// worker's host is reset through Talos, powered off and Available again, and the new Machine
// reuses it; credentials appear in no log, event or status.
func TestClusterOnSimulatedHosts(t *testing.T) {
	require.Layer(t, metallab.Layer, metallab.DHCPServerUnavailable())
	env := envtest.Get(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	namespace := env.NewNamespace(t, "metal")
	t.Cleanup(func() {
		if path := os.Getenv("TALON_METAL_LOG"); path != "" {
			_ = os.WriteFile(path, []byte(logs.String()), 0o600)
		}
	})
	l := metallab.New(t, namespace)
	// The site's DHCP server has one address per host: the load balancer's backends.
	l.StartDHCPServer(10, 14)

	hostCtx, stopHosts := context.WithCancel(context.Background())
	t.Cleanup(stopHosts)
	roles := []struct {
		name, role string
		ipmi       bool
	}{
		{"cp-1", "control-plane", false}, {"cp-2", "control-plane", true}, {"cp-3", "control-plane", false},
		{"worker-1", "worker", true}, {"worker-2", "worker", false},
	}
	for i, r := range roles {
		h := l.AddHost(hostCtx, r.name, i+1, r.ipmi, ctrl.Log.WithName("sim-host"))
		if r.name == "cp-3" {
			h.InstallDisk = "/dev/nvme0n1"
		}
		// The workers' hosts go from tenant to tenant: their data disks are wiped too.
		h.WipeDataDisks = r.role == "worker"
		l.Register(c, h, r.role)
	}
	// The second worker's BMC accepts power requests and does nothing, and the first worker's
	// NIC is down (it never network-boots), until the test fixes them.
	l.Hosts["worker-2"].BMC.SetIgnorePower(true)
	metallab.IP(t, "link", "set", l.Hosts["worker-1"].NIC, "down")

	startProviders(t, env, l, providerOptions{})
	g.Eventually(func(g Gomega) {
		list := &infrav1.MetalHostList{}
		g.Expect(c.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		for _, h := range list.Items {
			g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateAvailable), "MetalHost %s: %s", h.Name, h.Status.LastError)
			g.Expect(h.Status.PowerState).To(Equal("Off"))
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	start := time.Now()
	variables := applyCluster(t, c, l, 3, 2, 10, 14)

	// The power fault shows on the Machine, naming the host and the problem...
	message := metalMachineCondition(t, c, namespace, "worker-2", infrav1.PowerStateMismatchReason, 2*time.Minute)
	g.Expect(message).To(ContainSubstring("MetalHost worker-2"))
	g.Expect(message).To(ContainSubstring("reports power Off"))
	t.Logf("Power fault reported: %s", message)
	// ...and clears once the BMC obeys again.
	l.Hosts["worker-2"].BMC.SetIgnorePower(false)
	// A host that does not network-boot is reported after the boot timeout, and power-cycled
	// again: with its link back it boots.
	message = metalMachineCondition(t, c, namespace, "worker-1", infrav1.HostNotBootingReason, 2*time.Minute)
	g.Expect(message).To(ContainSubstring("MetalHost worker-1 did not network-boot within 30s"))
	t.Logf("Boot fault reported: %s", message)
	metallab.IP(t, "link", "set", l.Hosts["worker-1"].NIC, "up")

	var machines []clusterv1.Machine
	g.Eventually(func(g Gomega) {
		machines = runningMachines(ctx, g, c, namespace, 5)
	}).WithTimeout(6 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("5 Machines Running after %s", time.Since(start).Round(time.Second))

	// Every Machine runs on its own host, linked by providerID, and every host booted through
	// the whole chain: DHCP, iPXE over TFTP, the script for its MAC, kernel, initramfs and a
	// config URL that is refused once used.
	seen := map[string]bool{}
	for _, m := range machines {
		host, ok := strings.CutPrefix(m.Spec.ProviderID, metal.ProviderIDPrefix+namespace+"/")
		g.Expect(ok).To(BeTrue(), "providerID %s", m.Spec.ProviderID)
		g.Expect(seen[host]).To(BeFalse(), "host %s has two Machines", host)
		seen[host] = true
		h := &infrav1.MetalHost{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: host}, h)).To(Succeed())
		g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateProvisioned))
		g.Expect(h.Spec.ConsumerRef.Name).To(Equal(m.Spec.InfrastructureRef.Name))
		boots := l.Hosts[host].Sim.NetBoots()
		g.Expect(boots).NotTo(BeEmpty())
		last := boots[len(boots)-1]
		g.Expect(last.Firmware).To(Equal(bootservice.BootFileUEFIAMD64))
		g.Expect(last.ScriptURL).To(ContainSubstring(url.QueryEscape(l.Hosts[host].MAC.String())))
		g.Expect(last.Kernel).To(HaveSuffix(variables["TALOS_KERNEL_SHA512"]))
		g.Expect(last.KernelArgs).To(ContainElement("talos.platform=metal"))
		g.Expect(last.ConfigURL).NotTo(BeEmpty())
		// Asked again from the host's own address (so only the spent token can be the reason).
		from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: last.Address.IP}}
		fetch := &http.Client{Transport: &http.Transport{DialContext: from.DialContext}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, last.ConfigURL, http.NoBody)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := fetch.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden), "a used config URL is refused")
		g.Expect(body).To(BeEmpty())
	}
	g.Expect(seen).To(HaveLen(5))
	t.Log("The infrastructure manager's metrics count the boot service's answers: DHCP offers, iPXE over TFTP, scripts, configs and the refused reuses")
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, series := range []struct {
		labels map[string]string
		least  float64
	}{
		{map[string]string{"protocol": "dhcp", "request": "DISCOVER", "outcome": "answered"}, 5},
		{map[string]string{"protocol": "tftp", "request": "file", "outcome": "sent"}, 5},
		{map[string]string{"protocol": "http", "request": "script", "outcome": "200"}, 5},
		{map[string]string{"protocol": "http", "request": "config", "outcome": "200"}, 5},
		{map[string]string{"protocol": "http", "request": "config", "outcome": "403"}, 5},
	} {
		g.Expect(testmetrics.Value(families, "talon_boot_service_requests_total", series.labels)).To(BeNumerically(">=", series.least), "%v", series.labels)
	}
	// Under the v1.14 contract every node installs from the Image Factory installer its
	// TalosConfig resolved.
	configs := &bootstrapv1.TalosConfigList{}
	g.Expect(c.List(ctx, configs, client.InNamespace(namespace))).To(Succeed())
	g.Expect(configs.Items).NotTo(BeEmpty())
	for _, config := range configs.Items {
		g.Expect(config.Status.ImageFactory.Installer).To(MatchRegexp(`/metal-installer/[0-9a-f]{64}:v1\.14\.1$`), "TalosConfig %s", config.Name)
	}
	// The host's own install disk reached its config, the others install on the template's;
	// both in the v1.14 form, with the installer and none of the fields it replaces.
	for host, disk := range map[string]string{"cp-3": "/dev/nvme0n1", "cp-1": "/dev/sda"} {
		installed, err := os.ReadFile(filepath.Join(l.Hosts[host].StateDir, "config.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := configloader.NewFromBytes(installed)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(configgen.LegacyFields(cfg)).To(BeEmpty(), "%s: %s", host, installed)
		g.Expect(cfg.UnattendedInstallConfig()).NotTo(BeNil(), "%s: %s", host, installed)
		g.Expect(cfg.UnattendedInstallConfig().VolumeSelector().String()).To(ContainSubstring(`"`+disk+`"`), host)
		g.Expect(cfg.UnattendedInstallConfig().InstallerImage()).To(Equal(configs.Items[0].Status.ImageFactory.Installer), host)
		g.Expect(cfg.K8sKubeletConfig().ExtraArgs()).To(HaveKeyWithValue("provider-id", []string{metal.ProviderID(namespace, host)}),
			"the kubelet registers its Node linked")
	}

	// Installing wipes no data disk.
	for _, host := range []string{"cp-1", "cp-2", "cp-3", "worker-1", "worker-2"} {
		g.Expect(l.Hosts[host].DataDiskHoldsData()).To(BeTrue(), "the data disk of %s", host)
	}

	// Delete a worker: its host wants its data disks wiped, so it is powered off and wiped by
	// a network boot (the system disk by Talos as it boots, then every data disk through the
	// Talos API in maintenance mode), powered off and Available.
	bootsBefore := map[string]int{}
	for _, host := range []string{"worker-1", "worker-2"} {
		bootsBefore[host] = len(l.Hosts[host].Sim.NetBoots())
	}
	md := &clusterv1.MachineDeployment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "metal-workers"}, md)).To(Succeed())
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To[int32](1)
	g.Expect(c.Patch(ctx, md, patch)).To(Succeed())
	start = time.Now()
	var freed string
	g.Eventually(func(g Gomega) {
		machines = runningMachines(ctx, g, c, namespace, 4)
		list := &infrav1.MetalHostList{}
		g.Expect(c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"talon.dev/role": "worker"})).To(Succeed())
		freed = ""
		for _, h := range list.Items {
			if h.Status.State != infrav1.MetalHostStateAvailable {
				continue
			}
			freed = h.Name
			g.Expect(h.Spec.ConsumerRef).To(BeNil())
			g.Expect(h.Spec.NeedsWipe).To(BeFalse())
			g.Expect(h.Status.PowerState).To(Equal("Off"))
			g.Expect(h.Status.LastWipe).NotTo(BeNil())
			g.Expect(h.Status.LastWipe.Method).To(Equal(infrav1.HostWipeNetworkBoot))
			g.Expect(h.Status.LastWipe.Disks).To(ContainElement("/dev/"+metallab.DataDisk), "the data disk is recorded as wiped")
		}
		g.Expect(freed).NotTo(BeEmpty(), "a worker host is Available again")
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("Worker deleted and MetalHost %s wiped and Available after %s", freed, time.Since(start).Round(time.Second))
	_, err = os.Stat(filepath.Join(l.Hosts[freed].StateDir, "config.yaml"))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the wipe emptied the host's system disk")
	g.Expect(l.Hosts[freed].DataDiskHoldsData()).To(BeFalse(), "the wipe emptied the host's data disk")
	// The wipe boot (Talos wipes the system disk and reboots), then maintenance mode.
	boots := l.Hosts[freed].Sim.NetBoots()[bootsBefore[freed]:]
	g.Expect(afterWipe(boots)).To(BeNumerically(">", 0), "boots after the deletion: %+v", boots)
	g.Expect(afterWipe(boots)).To(Equal(len(boots)-1), "boots after the deletion: %+v", boots)
	g.Expect(boots[len(boots)-1].ConfigURL).To(BeEmpty(), "the boot after the wipe is into maintenance mode")

	// A person marks the Available host for a wipe (say, after using its data disk by hand):
	// it is wiped again before any Machine gets it.
	g.Expect(os.WriteFile(filepath.Join(l.Hosts[freed].DisksDir, metallab.DataDisk, "by-hand"), []byte("x"), 0o600)).To(Succeed())
	h := &infrav1.MetalHost{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: freed}, h)).To(Succeed())
	lastWipe := h.Status.LastWipe.Finished
	patch = client.MergeFrom(h.DeepCopy())
	h.Spec.NeedsWipe = true
	g.Expect(c.Patch(ctx, h, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: freed}, h)).To(Succeed())
		g.Expect(h.Spec.NeedsWipe).To(BeFalse())
		g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateAvailable))
		g.Expect(h.Status.LastWipe.Finished.After(lastWipe.Time)).To(BeTrue(), "wiped again")
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(l.Hosts[freed].DataDiskHoldsData()).To(BeFalse(), "the second wipe emptied the data disk")

	// A new Machine reuses the host; its BMC is unreachable first: the Machine says so, naming
	// the host, and carries on when the BMC answers again.
	l.Hosts[freed].BMC.SetUnreachable(true)
	patch = client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To[int32](2)
	g.Expect(c.Patch(ctx, md, patch)).To(Succeed())
	message = metalMachineCondition(t, c, namespace, freed, infrav1.BMCUnreachableReason, 2*time.Minute)
	g.Expect(message).To(ContainSubstring("MetalHost " + freed + ": BMC " + l.Hosts[freed].Address))
	t.Logf("BMC fault reported: %s", message)
	l.Hosts[freed].BMC.SetUnreachable(false)
	start = time.Now()
	g.Eventually(func(g Gomega) {
		machines = runningMachines(ctx, g, c, namespace, 5)
		h := &infrav1.MetalHost{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: freed}, h)).To(Succeed())
		g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateProvisioned))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("A new worker Machine Running on MetalHost %s after %s", freed, time.Since(start).Round(time.Second))

	// A worker whose node does not answer is powered off and its host wiped by a network
	// boot (talos.experimental.wipe=system) before the replacement Machine reuses it.
	var victim clusterv1.Machine
	for _, m := range machines {
		if m.Labels[clusterv1.MachineDeploymentNameLabel] != "" && !strings.HasSuffix(m.Spec.ProviderID, "/"+freed) {
			victim = m
		}
	}
	g.Expect(victim.Name).NotTo(BeEmpty())
	stuck := strings.TrimPrefix(victim.Spec.ProviderID, metal.ProviderIDPrefix+namespace+"/")
	g.Eventually(l.Hosts[stuck].Sim.Node).WithTimeout(time.Minute).ShouldNot(BeNil())
	l.Hosts[stuck].Sim.Node().Partition()
	wipesBefore := len(l.Hosts[stuck].Sim.NetBoots())
	g.Expect(c.Delete(ctx, &victim)).To(Succeed())
	start = time.Now()
	g.Eventually(func(g Gomega) {
		machines = runningMachines(ctx, g, c, namespace, 5)
		h := &infrav1.MetalHost{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: stuck}, h)).To(Succeed())
		g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateProvisioned))
		g.Expect(h.Spec.ConsumerRef.Name).NotTo(Equal(victim.Spec.InfrastructureRef.Name))
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	// Wipe boots (more than one if the machine was slow to answer), then an install boot: the
	// host never booted its old disk (the victim's config) and no wipe boot got a config.
	boots = l.Hosts[stuck].Sim.NetBoots()[wipesBefore:]
	g.Expect(len(boots)).To(BeNumerically(">=", 3))
	g.Expect(boots[0].Wipe).To(BeTrue(), "boots after the deletion: %+v", boots)
	g.Expect(afterWipe(boots)).To(BeNumerically(">", 0), "boots after the deletion: %+v", boots)
	g.Expect(boots[afterWipe(boots)].ConfigURL).To(BeEmpty(), "the boot after a wipe is into maintenance mode: %+v", boots)
	for _, b := range boots {
		g.Expect(b.Exit()).To(BeFalse(), "boots after the deletion: %+v", boots)
		if b.Wipe {
			g.Expect(b.ConfigURL).To(BeEmpty(), "a wipe boot gets no config")
		}
	}
	g.Expect(boots[len(boots)-1].ConfigURL).NotTo(BeEmpty())
	g.Expect(l.Hosts[stuck].DataDiskHoldsData()).To(BeFalse(), "the wipe emptied the data disk of %s before its reuse", stuck)
	t.Logf("Unresponsive worker deleted, MetalHost %s wiped by network boot and reused after %s", stuck, time.Since(start).Round(time.Second))

	// A machine no MetalHost boots from gets no answer, and is registered for a person to add
	// its BMC.
	stranger := l.AddHost(hostCtx, "stranger", 9, false, ctrl.Log.WithName("sim-host"))
	_, err = sim.NetworkBoot(ctx, stranger.NIC, sim.FirmwareUEFI, func(net.IPNet) error { return nil })
	g.Expect(err).To(MatchError(ContainSubstring("PXE firmware: DHCP")), "an unknown host gets no DHCP answer")
	registered := "host-" + strings.ReplaceAll(stranger.MAC.String(), ":", "")
	g.Eventually(func(g Gomega) {
		h := &infrav1.MetalHost{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: registered}, h)).To(Succeed())
		g.Expect(h.Spec.BootMACAddresses).To(Equal([]string{stranger.MAC.String()}))
		g.Expect(h.Status.State).To(Equal(infrav1.MetalHostStateRegistering))
		cond := conditions.Get(h, infrav1.BMCReachableCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(infrav1.NoBMCReason))
		g.Expect(cond.Message).To(ContainSubstring("set its BMC address"))
	}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

	// No BMC password in any log line, event or status.
	events := &corev1.EventList{}
	g.Expect(c.List(ctx, events, client.InNamespace(namespace))).To(Succeed())
	hosts := &infrav1.MetalHostList{}
	g.Expect(c.List(ctx, hosts, client.InNamespace(namespace))).To(Succeed())
	logged := logs.String()
	g.Expect(logged).To(ContainSubstring("Claimed MetalHost"), "the managers' logs were captured")
	for _, h := range l.Hosts {
		g.Expect(logged).NotTo(ContainSubstring(h.Password), "BMC password of %s in the logs", h.Name)
		g.Expect(fmt.Sprintf("%+v", events.Items)).NotTo(ContainSubstring(h.Password))
		g.Expect(fmt.Sprintf("%+v", hosts.Items)).NotTo(ContainSubstring(h.Password))
	}
}

// afterWipe is the index of the first boot of boots that is not a wipe boot, len(boots) when
// they all are.
func afterWipe(boots []sim.NetBoot) int {
	for i, b := range boots {
		if !b.Wipe {
			return i
		}
	}
	return len(boots)
}
