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
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/controlplane/reconcilers/taloscontrolplane"
	controlplanesetup "github.com/talon-capi/talon/controlplane/setup"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// TestClusterUpgradedInPlace upgrades a 3 control-plane + 2 worker cluster on bare-metal
// nodes from Talos v1.13.3 to v1.14.1, then from Kubernetes v1.36.3 to v1.37.2, in place:
// the control plane by its InPlace strategy, the workers' MachineDeployment through Cluster
// API's in-place update hooks, which Cluster API's own core manager (a separate process,
// with its InPlaceUpdates and RuntimeSDK gates on) calls on the control-plane provider. No
// Machine is created or deleted; every node runs the new Talos, kubelet and (control plane)
// kube-apiserver; kube-proxy follows; a writer through the cluster endpoint loses no
// acknowledged write, and each write the endpoint failed is acknowledged by another
// control-plane node.
func TestClusterUpgradedInPlace(t *testing.T) {
	_, err := envtest.Binary(filepath.Join("v1.37", "kube-apiserver"))
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	const name = "upgrade"
	ns := env.NewNamespace(t, "cluster-upgrade")
	infra, opts := newMetalInfra(t, "127.0.66.", "v1.13.3", "v1.13.3", "v1.14.1")
	hooksPort := freeTCPPort(t)
	_, _, certDir := env.WebhookServing()
	env.StartManager(t, envtest.ManagerOptions{Setup: func(ctx context.Context, mgr ctrl.Manager) error {
		if err := providers(infra, opts)(ctx, mgr); err != nil {
			return err
		}
		hooks := &taloscontrolplane.Reconciler{Client: mgr.GetClient(), TalosClients: talosclient.NewFactory()}
		return controlplanesetup.Extension(mgr, hooks, hooksPort, certDir)
	}})
	startCoreManager(t, env)
	registerHooks(t, env, hooksPort, ns)

	tcp := newCluster(t, env, infra, ns, name, 3, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Rollout.Strategy.Type = controlplanev1.InPlaceStrategyType
		tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.13"
		tcp.Spec.ControlPlaneConfig.ImageFactory.Version = "v1.13.3"
	})
	md := newWorkers(t, env, ns, name, 2)
	start := time.Now()
	var original []string
	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(env.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(5))
		original = make([]string, 0, len(machines.Items))
		for _, m := range machines.Items {
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "Machine %s has a Node", m.Name)
			original = append(original, m.Name)
		}
	}, 5*time.Minute, time.Second).Should(Succeed(), func() string { return controllerErrors.String() })
	slices.Sort(original)
	waitForMembership(t, env, tcp, 3)
	t.Logf("3 control-plane and 2 worker Machines with Nodes after %s", time.Since(start).Round(time.Second))

	kube := workloadClient(t, env, tcp)
	stopWriter := startWriter(t, kube, controlPlaneNodeClients(t, env, tcp)...)
	view := func() clusterView { return viewCluster(t, env, tcp) }
	g.Expect(view().talos).To(HaveEach("v1.13.3"))

	t.Log("Talos v1.13.3 → v1.14.1: the control plane in place, node by node")
	start = time.Now()
	patchObject(t, env, tcp, func() {
		tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.14"
		tcp.Spec.ControlPlaneConfig.ImageFactory.Version = "v1.14.1"
	})
	waitControlPlaneUpdated(t, env, tcp, original)
	t.Logf("Control plane on Talos v1.14.1 after %s", time.Since(start).Round(time.Second))

	t.Log("The workers' MachineDeployment gets a TalosConfigTemplate of Talos v1.14.1: Cluster API updates them through the hooks")
	start = time.Now()
	workerConfig := &bootstrapv1.TalosConfigTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-workers-v1.14", Namespace: ns},
		Spec: bootstrapv1.TalosConfigTemplateSpec{Template: bootstrapv1.TalosConfigTemplateResource{Spec: bootstrapv1.TalosConfigSpec{
			GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.14", ImageFactory: bootstrapv1.ImageFactorySpec{Version: "v1.14.1"},
		}}},
	}
	g.Expect(env.Client.Create(ctx, workerConfig)).To(Succeed())
	patchObject(t, env, md, func() { md.Spec.Template.Spec.Bootstrap.ConfigRef.Name = workerConfig.Name })
	waitWorkersUpdated(t, env, md, original)
	after := view()
	g.Expect(after.talos).To(HaveEach("v1.14.1"), "every node runs the new Talos")
	t.Logf("Workers on Talos v1.14.1 after %s", time.Since(start).Round(time.Second))

	t.Log("Kubernetes v1.36.3 → " + nextKubernetesVersion + ": the control plane, then the workers, in place")
	start = time.Now()
	patchObject(t, env, tcp, func() { tcp.Spec.Version = nextKubernetesVersion })
	waitControlPlaneUpdated(t, env, tcp, original)
	patchObject(t, env, md, func() { md.Spec.Template.Spec.Version = nextKubernetesVersion })
	waitWorkersUpdated(t, env, md, original)
	t.Logf("Cluster on Kubernetes %s after %s", nextKubernetesVersion, time.Since(start).Round(time.Second))

	after = view()
	g.Expect(after.talos).To(HaveLen(5))
	g.Expect(after.talos).To(HaveEach("v1.14.1"))
	g.Expect(after.apiServers).To(HaveLen(3))
	g.Expect(after.apiServers).To(HaveEach(nextKubernetesVersion), "kube-apiserver of every control-plane node")
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).To(HaveLen(5))
	for _, node := range nodes.Items {
		g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal(nextKubernetesVersion), "kubelet of %s", node.Name)
		g.Expect(node.Status.NodeInfo.OSImage).To(ContainSubstring("v1.14.1"), "Node %s", node.Name)
		g.Expect(node.Spec.Unschedulable).To(BeFalse(), "Node %s is schedulable", node.Name)
	}
	t.Log("kube-proxy's DaemonSet follows the new version; CoreDNS is there")
	g.Eventually(func(g Gomega) {
		ds, err := kube.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, "kube-proxy", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ds.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":" + nextKubernetesVersion))
	}, time.Minute, time.Second).Should(Succeed())
	_, err = kube.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	stopWriter()
}

// clusterView is what a cluster's nodes report: Talos version by Machine, and the
// kube-apiserver version of each control-plane Machine.
type clusterView struct {
	talos, apiServers map[string]string
}

// viewCluster asks every node of tcp's cluster for its Talos version through the Talos
// API, and every control-plane node's kube-apiserver for its version.
func viewCluster(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane) clusterView {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	bundle, err := clustersecrets.Get(ctx, env.Client, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: tcp.Name, Namespace: tcp.Namespace}})
	g.Expect(err).NotTo(HaveOccurred())
	machines := &clusterv1.MachineList{}
	g.Expect(env.Client.List(ctx, machines, client.InNamespace(tcp.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: tcp.Name})).To(Succeed())
	out := clusterView{talos: map[string]string{}}
	for _, m := range machines.Items {
		c, err := talosclient.NewFactory().New(ctx, bundle, m.Status.Addresses[0].Address)
		g.Expect(err).NotTo(HaveOccurred())
		out.talos[m.Name], err = c.Version(ctx)
		_ = c.Close()
		g.Expect(err).NotTo(HaveOccurred(), "Talos version of %s", m.Name)
	}
	views, err := viewNodes(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	out.apiServers = map[string]string{}
	for name, v := range views {
		out.apiServers[name] = v.apiServer
	}
	return out
}

// waitControlPlaneUpdated waits until tcp's status describes its spec with every Machine
// up to date and none being updated, checking all along that the cluster's Machines are
// still original and that one control-plane node at a time is touched.
func waitControlPlaneUpdated(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane, original []string) {
	tb.Helper()
	ctx := tb.Context()
	NewWithT(tb).Eventually(func(g Gomega) {
		g.Expect(clusterMachines(ctx, g, env, tcp.Namespace)).To(Equal(original), "no Machine is created or deleted")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		touched := 0
		for _, m := range machines {
			if record, ok := m.Annotations[controlplanev1.InPlaceUpdateAnnotation]; ok && !strings.Contains(record, `"step":"Parked"`) {
				touched++
			}
		}
		g.Expect(touched).To(BeNumerically("<=", 1), "one node at a time")
		g.Expect(tcp.Status.ObservedGeneration).To(Equal(tcp.Generation), "status describes the new spec")
		g.Expect(tcp.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(3)), "%s", conditions.GetMessage(tcp, controlplanev1.RollingOutCondition))
		for _, m := range machines {
			g.Expect(m.Annotations).NotTo(HaveKey(controlplanev1.InPlaceUpdateAnnotation), "Machine %s is still being updated", m.Name)
		}
	}, 8*time.Minute, 500*time.Millisecond).Should(Succeed(), func() string { return controllerErrors.String() })
	waitForMembership(tb, env, tcp, 3)
}

// waitWorkersUpdated waits until md's status describes its spec with every replica up to
// date and available and no Machine being updated, checking all along that the cluster's
// Machines are still original.
func waitWorkersUpdated(tb testing.TB, env *envtest.Environment, md *clusterv1.MachineDeployment, original []string) {
	tb.Helper()
	ctx := tb.Context()
	NewWithT(tb).Eventually(func(g Gomega) {
		g.Expect(clusterMachines(ctx, g, env, md.Namespace)).To(Equal(original), "no Machine is created or deleted")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
		g.Expect(md.Status.ObservedGeneration).To(Equal(md.Generation), "status describes the new spec")
		g.Expect(md.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(*md.Spec.Replicas)))
		g.Expect(md.Status.AvailableReplicas).To(HaveValue(BeEquivalentTo(*md.Spec.Replicas)))
		// The MachineDeployment's status may still count the Machines of the old spec: each
		// Machine must belong to the MachineSet of the new one.
		desired := md.Spec.Template.Spec
		sets := &clusterv1.MachineSetList{}
		g.Expect(env.Client.List(ctx, sets, client.InNamespace(md.Namespace),
			client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name})).To(Succeed())
		current := ""
		for _, ms := range sets.Items {
			if spec := ms.Spec.Template.Spec; spec.Version == desired.Version && spec.Bootstrap.ConfigRef.Name == desired.Bootstrap.ConfigRef.Name {
				current = ms.Name
			}
		}
		g.Expect(current).NotTo(BeEmpty(), "a MachineSet of the new spec")
		machines := &clusterv1.MachineList{}
		g.Expect(env.Client.List(ctx, machines, client.InNamespace(md.Namespace),
			client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(int(*md.Spec.Replicas)))
		for _, m := range machines.Items {
			g.Expect(m.OwnerReferences).To(ContainElement(HaveField("Name", current)), "Machine %s is in MachineSet %s", m.Name, current)
			g.Expect(m.Spec.Version).To(Equal(desired.Version), "Machine %s", m.Name)
			g.Expect(m.Annotations).NotTo(HaveKey(clusterv1.UpdateInProgressAnnotation), "Machine %s is still being updated", m.Name)
			g.Expect(m.Annotations).NotTo(HaveKey(controlplanev1.InPlaceUpdateAnnotation), "Machine %s is still being updated", m.Name)
		}
	}, 8*time.Minute, 500*time.Millisecond).Should(Succeed(), func() string { return controllerErrors.String() })
}

// clusterMachines are the names of the Machines in namespace, sorted.
func clusterMachines(ctx context.Context, g Gomega, env *envtest.Environment, namespace string) []string {
	machines := &clusterv1.MachineList{}
	g.Expect(env.Client.List(ctx, machines, client.InNamespace(namespace))).To(Succeed())
	names := make([]string, 0, len(machines.Items))
	for _, m := range machines.Items {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// patchObject merge-patches obj with what change does to it.
func patchObject[T client.Object](tb testing.TB, env *envtest.Environment, obj T, change func()) {
	tb.Helper()
	g := NewWithT(tb)
	g.Expect(env.Client.Get(tb.Context(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	before := obj.DeepCopyObject().(client.Object)
	change()
	g.Expect(env.Client.Patch(tb.Context(), obj, client.MergeFrom(before))).To(Succeed())
}

// newWorkers creates a MachineDeployment of replicas bare-metal workers in the cluster name
// running Talos v1.13.3, rolled out one Machine at a time.
func newWorkers(tb testing.TB, env *envtest.Environment, ns, name string, replicas int32) *clusterv1.MachineDeployment {
	tb.Helper()
	g := NewWithT(tb)
	asset := &infrav1.Asset{URL: "http://assets.invalid/talos", SHA512: strings.Repeat("0", 128)}
	template := &infrav1.TalosMetalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name + "-workers", Namespace: ns},
		Spec: infrav1.TalosMetalMachineTemplateSpec{Template: infrav1.TalosMetalMachineTemplateResource{Spec: infrav1.TalosMetalMachineSpec{
			BootAssets: infrav1.BootAssets{Kernel: asset, Initramfs: asset},
		}}}}
	config := &bootstrapv1.TalosConfigTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-workers", Namespace: ns},
		Spec: bootstrapv1.TalosConfigTemplateSpec{Template: bootstrapv1.TalosConfigTemplateResource{Spec: bootstrapv1.TalosConfigSpec{
			GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.13", ImageFactory: bootstrapv1.ImageFactorySpec{Version: "v1.13.3"},
		}}},
	}
	labels := map[string]string{"pool": name + "-workers"}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-workers", Namespace: ns},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: name,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				},
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName: name,
					Version:     simtest.KubernetesVersion,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: bootstrapv1.GroupVersion.Group, Kind: "TalosConfigTemplate", Name: config.Name,
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "TalosMetalMachineTemplate", Name: template.Name,
					},
				},
			},
		},
	}
	for _, o := range []client.Object{template, config, md} {
		g.Expect(env.Client.Create(tb.Context(), o)).To(Succeed())
	}
	return md
}

// controlPlaneNodeClients are clients of the workload API server of each control-plane
// node of tcp, past the cluster endpoint.
func controlPlaneNodeClients(tb testing.TB, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane) []kubernetes.Interface {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	data, err := kubeconfig.FromSecret(ctx, env.Client, client.ObjectKey{Namespace: tcp.Namespace, Name: tcp.Name})
	g.Expect(err).NotTo(HaveOccurred())
	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	out := make([]kubernetes.Interface, 0, len(machines))
	for _, m := range machines {
		config, err := clientcmd.RESTConfigFromKubeConfig(data)
		g.Expect(err).NotTo(HaveOccurred())
		config.Host = "https://" + net.JoinHostPort(m.Status.Addresses[0].Address, "6443")
		kube, err := kubernetes.NewForConfig(config)
		g.Expect(err).NotTo(HaveOccurred())
		out = append(out, kube)
	}
	return out
}

// startCoreManager runs Cluster API's own core manager (bin/cluster-api-manager) against the
// plane as a process, with the InPlaceUpdates and RuntimeSDK gates on. It watches every
// namespace: with --namespace its MachineDeployment and MachineSet controllers fail ("failed
// to cast MachineSet informer to SharedIndexInformer"). The test's end kills it (SIGKILL); if the test failed, its last errors are printed
// (and its log written to $TALON_CAPI_LOG, if set).
func startCoreManager(t *testing.T, env *envtest.Environment) {
	t.Helper()
	binary, err := envtest.Binary("cluster-api-manager")
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	dir := t.TempDir()
	config, err := env.AdminKubeconfig("cluster-api-manager")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, config, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "cluster-api-manager.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	_, _, certDir := env.WebhookServing()
	cmd := exec.CommandContext(context.Background(), binary,
		"--kubeconfig="+kubeconfigPath,
		"--feature-gates=InPlaceUpdates=true,RuntimeSDK=true",
		"--webhook-port="+strconv.Itoa(freeTCPPort(t)), "--webhook-cert-dir="+certDir,
		"--health-addr=127.0.0.1:0", "--diagnostics-address=127.0.0.1:0", "--insecure-diagnostics")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kill(cmd)
		_ = log.Close()
		if !t.Failed() {
			return
		}
		data, _ := os.ReadFile(logPath)
		if path := os.Getenv("TALON_CAPI_LOG"); path != "" {
			_ = os.WriteFile(path, data, 0o600)
		}
		// Its errors (klog's E lines): the Machine controller's info lines drown them.
		var errors []string
		for line := range strings.Lines(string(data)) {
			if strings.HasPrefix(line, "E") {
				errors = append(errors, strings.TrimSpace(line))
			}
		}
		t.Logf("Cluster API's core manager, last errors of its log:\n%s", strings.Join(errors[max(0, len(errors)-30):], "\n"))
	})
}

// registerHooks registers the control-plane provider's in-place update hooks, served on
// 127.0.0.1:port with the plane's webhook certificate, with Cluster API's core manager for
// namespace, and waits until Cluster API has discovered them.
func registerHooks(tb testing.TB, env *envtest.Environment, port int, namespace string) {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	ext := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "talon-" + namespace},
		Spec: runtimev1.ExtensionConfigSpec{
			ClientConfig:      runtimev1.ClientConfig{URL: fmt.Sprintf("https://127.0.0.1:%d", port), CABundle: env.WebhookCA()},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}},
		},
	}
	g.Expect(env.Client.Create(ctx, ext)).To(Succeed())
	tb.Cleanup(func() { _ = env.Client.Delete(context.Background(), ext) })
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ext), ext)).To(Succeed())
		g.Expect(ext.Status.Handlers).To(HaveLen(3), "CanUpdateMachineSet, CanUpdateMachine and UpdateMachine discovered: %v", ext.Status.Conditions)
	}, time.Minute, time.Second).Should(Succeed())
}
