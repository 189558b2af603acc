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
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// nextKubernetesVersion is the second Kubernetes minor built into bin/v1.37 (make tools).
const nextKubernetesVersion = "v1.37.2"

// nodeView is what a test reads of one control-plane node through the Talos API and its
// own kube-apiserver.
type nodeView struct {
	bootID, config, apiServer string
}

// viewNodes reads every control-plane node of tcp: its boot ID, its machine config and the
// version its kube-apiserver reports (what kubectl version shows against that node). A
// node whose API does not answer yet (its kube-apiserver starts after its etcd member
// joins, and slowly on a busy machine) is asked again for up to a minute.
func viewNodes(ctx context.Context, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane) (map[string]nodeView, error) {
	var views map[string]nodeView
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		views, last = viewNodesOnce(ctx, env, tcp)
		return last == nil, nil
	})
	if err != nil {
		return nil, errors.Join(last, err)
	}
	return views, nil
}

// viewNodesOnce is one try of viewNodes.
func viewNodesOnce(ctx context.Context, env *envtest.Environment, tcp *controlplanev1.TalosControlPlane) (map[string]nodeView, error) {
	bundle, err := clustersecrets.Get(ctx, env.Client, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: tcp.Name, Namespace: tcp.Namespace}})
	if err != nil {
		return nil, err
	}
	data, err := kubeconfig.FromSecret(ctx, env.Client, client.ObjectKey{Namespace: tcp.Namespace, Name: tcp.Name})
	if err != nil {
		return nil, err
	}
	machines, err := controlPlaneMachines(ctx, env, tcp)
	if err != nil {
		return nil, err
	}
	out := map[string]nodeView{}
	for _, m := range machines {
		if len(m.Status.Addresses) == 0 {
			continue
		}
		address := m.Status.Addresses[0].Address
		c, err := talosclient.NewFactory().New(ctx, bundle, address)
		if err != nil {
			return nil, err
		}
		var view nodeView
		view.bootID, err = c.BootID(ctx)
		if err == nil {
			var config []byte
			config, err = c.MachineConfig(ctx)
			view.config = string(config)
		}
		_ = c.Close()
		if err != nil {
			return nil, err
		}
		rest, err := clientcmd.RESTConfigFromKubeConfig(data)
		if err != nil {
			return nil, err
		}
		rest.Host, rest.Timeout = "https://"+address+":6443", 5*time.Second
		kube, err := kubernetes.NewForConfig(rest)
		if err != nil {
			return nil, err
		}
		version, err := kube.Discovery().ServerVersion()
		if err != nil {
			return nil, err
		}
		view.apiServer = version.GitVersion
		out[m.Name] = view
	}
	return out, nil
}

// TestInPlaceUpdates updates a three-node control plane in place: a new Kubernetes minor
// (no reboot), a config change Talos applies at once (no reboot) and one it reads only at
// boot (a reboot per node). No Machine is replaced, a writer loses no acknowledged write,
// and every node ends up running what the spec asks for.
func TestInPlaceUpdates(t *testing.T) {
	_, err := envtest.Binary(filepath.Join("v1.37", "kube-apiserver"))
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.56.")
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "inplace")
	tcp := newCluster(t, env, infra, ns, "inplace", 3, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Rollout.Strategy.Type = controlplanev1.InPlaceStrategyType
	})
	waitForMembership(t, env, tcp, 3)
	kube := workloadClient(t, env, tcp)
	kubeProxyImage := func(g Gomega) string {
		ds, err := kube.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, "kube-proxy", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return ds.Spec.Template.Spec.Containers[0].Image
	}
	t.Log("The bootstrap manifests are in the cluster, kube-proxy at the cluster's version")
	g.Eventually(kubeProxyImage, time.Minute, time.Second).Should(HaveSuffix(":v1.36.3"))

	stopWriter := startWriter(t, kube)

	machineNames := func() []string {
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		out := make([]string, 0, len(machines))
		for _, m := range machines {
			out = append(out, m.Name)
		}
		slices.Sort(out)
		return out
	}
	original := machineNames()

	// update changes the spec and waits until every Machine is up to date again, watching
	// that no Machine is replaced and that the update shows, node by node.
	update := func(description string, change func(*controlplanev1.TalosControlPlane)) (before, after map[string]nodeView) {
		t.Helper()
		t.Log(description)
		before, err := viewNodes(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		patchBase := tcp.DeepCopy()
		change(tcp)
		g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(patchBase))).To(Succeed())
		sawUpdating, sawPartial := false, false
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
			machines, err := controlPlaneMachines(ctx, env, tcp)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(machineNames()).To(Equal(original), "no Machine is created or deleted")
			touched := 0
			for _, m := range machines {
				sawUpdating = sawUpdating || conditions.IsTrue(&m, clusterv1.MachineUpdatingCondition)
				// A parked node has its control-plane components updated and waits for the
				// others' before its kubelet: it is not being touched.
				if record, ok := m.Annotations[controlplanev1.InPlaceUpdateAnnotation]; ok && !strings.Contains(record, `"step":"Parked"`) {
					touched++
				}
			}
			g.Expect(touched).To(BeNumerically("<=", 1), "one node at a time")
			g.Expect(tcp.Status.ObservedGeneration).To(Equal(tcp.Generation), "status describes the new spec")
			upToDate := ptrValue(tcp.Status.UpToDateReplicas)
			sawPartial = sawPartial || (upToDate > 0 && upToDate < 3)
			g.Expect(upToDate).To(BeEquivalentTo(3), "%s", conditions.GetMessage(tcp, controlplanev1.RollingOutCondition))
			for _, m := range machines {
				g.Expect(m.Annotations).NotTo(HaveKey(controlplanev1.InPlaceUpdateAnnotation), "Machine %s is still being updated", m.Name)
			}
		}, 8*time.Minute, 500*time.Millisecond).Should(Succeed())
		g.Expect(sawUpdating).To(BeTrue(), "a Machine showed Cluster API's Updating condition")
		g.Expect(sawPartial).To(BeTrue(), "status showed the nodes updated one by one")
		waitForMembership(t, env, tcp, 3)
		after, err = viewNodes(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		t.Logf("Updated three nodes in place in %s", time.Since(start).Round(time.Second))
		return before, after
	}

	_, after := update("Kubernetes v1.36.3 → "+nextKubernetesVersion+" in place", func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Version = nextKubernetesVersion
	})
	g.Expect(tcp.Status.Versions).To(ConsistOf(clusterv1.StatusVersion{Version: nextKubernetesVersion, Replicas: 3}))
	t.Log("kube-proxy's DaemonSet is synced to the new version from the nodes' manifests; CoreDNS is there")
	g.Eventually(kubeProxyImage, time.Minute, time.Second).Should(HaveSuffix(":" + nextKubernetesVersion))
	_, err = kube.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for name, view := range after {
		g.Expect(view.apiServer).To(Equal(nextKubernetesVersion), "kube-apiserver of %s", name)
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).To(HaveLen(3))
	for _, node := range nodes.Items {
		g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal(nextKubernetesVersion), "kubelet of %s", node.Name)
		g.Expect(node.Spec.Unschedulable).To(BeFalse(), "Node %s is schedulable", node.Name)
	}

	before, after := update("A sysctl: Talos applies it at once, no node reboots", func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.ControlPlaneConfig.StrategicPatches = []string{"apiVersion: v1alpha1\nkind: SysctlConfig\nparams:\n  vm.max_map_count: \"262144\"\n"}
	})
	for name, view := range after {
		g.Expect(view.bootID).To(Equal(before[name].bootID), "node of %s did not reboot", name)
		g.Expect(view.config).To(ContainSubstring("vm.max_map_count"), "node of %s runs the new config", name)
	}

	t.Log("A Pod on a node is evicted before that node reboots")
	target := original[0]
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "evict-me", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: target, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause:1"}}},
	}
	_, err = kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	before, after = update("An environment variable: Talos reads it at boot, each node reboots in turn", func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.ControlPlaneConfig.StrategicPatches = append(tcp.Spec.ControlPlaneConfig.StrategicPatches,
			"machine:\n  env:\n    TALON_INPLACE_TEST: rebooted\n")
	})
	for name, view := range after {
		g.Expect(view.bootID).NotTo(Equal(before[name].bootID), "node of %s rebooted", name)
		g.Expect(view.config).To(ContainSubstring("TALON_INPLACE_TEST"), "node of %s runs the new config", name)
		g.Expect(view.config).To(ContainSubstring("vm.max_map_count"), "node of %s kept the earlier change", name)
	}
	// Evicted: gone, or being deleted (the simulator runs no kubelet to finish it).
	evicted, err := kube.CoreV1().Pods("default").Get(ctx, "evict-me", metav1.GetOptions{})
	if err != nil {
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "reading the evicted Pod: %v", err)
	} else {
		g.Expect(evicted.DeletionTimestamp).NotTo(BeNil(), "the Pod on %s was evicted", target)
	}

	stopWriter()
	g.Expect(strings.Join(machineNames(), ",")).To(Equal(strings.Join(original, ",")))
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// TestInPlaceTalosUpgrade upgrades three metal control-plane nodes from Talos v1.13.3 to
// v1.14.1 in place (installer, reboot, new config), after a first attempt whose installer
// the node cannot boot stops at that node with a condition naming it, and a fixed spec
// resumes. No Machine is replaced and etcd keeps every acknowledged write.
func TestInPlaceTalosUpgrade(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := startMetalProviders(t, env, "127.0.57.", "v1.13.3", "v1.13.3", "v1.14.1", "v1.15.0")
	ns := env.NewNamespace(t, "talos-upgrade")
	tcp := newCluster(t, env, infra, ns, "talos-upgrade", 3, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Rollout.Strategy.Type = controlplanev1.InPlaceStrategyType
		tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.13"
		tcp.Spec.ControlPlaneConfig.ImageFactory.Version = "v1.13.3"
	})
	waitForMembership(t, env, tcp, 3)
	kube := workloadClient(t, env, tcp)
	stopWriter := startWriter(t, kube)

	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	slices.SortFunc(machines, func(a, b clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	talosVersions := func() map[string]string {
		out := map[string]string{}
		bundle, err := clustersecrets.Get(ctx, env.Client, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: tcp.Name, Namespace: tcp.Namespace}})
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range machines {
			c, err := talosclient.NewFactory().New(ctx, bundle, m.Status.Addresses[0].Address)
			g.Expect(err).NotTo(HaveOccurred())
			out[m.Name], err = c.Version(ctx)
			_ = c.Close()
			g.Expect(err).NotTo(HaveOccurred())
		}
		return out
	}
	g.Expect(talosVersions()).To(HaveEach("v1.13.3"))
	setTalos := func(release string) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		before := tcp.DeepCopy()
		tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.14"
		tcp.Spec.ControlPlaneConfig.ImageFactory.Version = release
		g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(before))).To(Succeed())
	}

	t.Log("Talos v1.15.0, which the nodes cannot boot: the first node's installer fails and the rollout stops there")
	setTalos("v1.15.0")
	first := machines[0].Name
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		message := conditions.GetMessage(tcp, controlplanev1.RollingOutCondition)
		g.Expect(message).To(ContainSubstring("In-place update stopped at Machine "+first), message)
		g.Expect(message).To(ContainSubstring("step Apply"))
		g.Expect(message).To(ContainSubstring("cannot boot Talos v1.15.0"))
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for _, m := range machines[1:] {
			current := &clusterv1.Machine{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&m), current)).To(Succeed())
			g.Expect(current.Annotations).NotTo(HaveKey(controlplanev1.InPlaceUpdateAnnotation), "Machine %s is left alone", m.Name)
		}
	}, 10*time.Second, time.Second).Should(Succeed())
	g.Expect(talosVersions()).To(HaveEach("v1.13.3"), "no node changed its version")

	t.Log("Talos v1.14.1: the rollout resumes at the same node and upgrades every node, one at a time")
	start := time.Now()
	setTalos("v1.14.1")
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(tcp.Status.ObservedGeneration).To(Equal(tcp.Generation))
		g.Expect(tcp.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(3)), "%s", conditions.GetMessage(tcp, controlplanev1.RollingOutCondition))
		current, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(current).To(HaveLen(3))
		for _, m := range current {
			g.Expect(machines).To(ContainElement(HaveField("Name", m.Name)), "no Machine is replaced")
			g.Expect(m.Annotations).NotTo(HaveKey(controlplanev1.InPlaceUpdateAnnotation))
		}
	}, 8*time.Minute, time.Second).Should(Succeed())
	t.Logf("Upgraded three nodes to Talos v1.14.1 in %s", time.Since(start).Round(time.Second))
	waitForMembership(t, env, tcp, 3)
	g.Expect(talosVersions()).To(HaveEach("v1.14.1"))
	views, err := viewNodes(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range machines {
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: *m.Spec.Bootstrap.DataSecretName}, secret)).To(Succeed())
		g.Expect(secret.Annotations).To(HaveKeyWithValue(bootstrapv1.ImageFactoryInstallerAnnotation, HaveSuffix(":v1.14.1")))
		same, err := controlplane.SameConfig([]byte(views[m.Name].config), secret.Data["value"])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(same).To(BeTrue(), "node of %s runs the config rendered for Talos v1.14", m.Name)
		cfg, err := configloader.NewFromBytes(secret.Data["value"])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(configgen.LegacyFields(cfg)).To(BeEmpty(), "the config of %s is in the v1.14 form", m.Name)
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, node := range nodes.Items {
		g.Expect(node.Spec.Unschedulable).To(BeFalse(), "Node %s is uncordoned", node.Name)
	}

	stopWriter()
}

// TestInPlaceUpdateRefusedOutsideTalosWindow: container nodes run Talos v1.13.3 (their
// image; Talos cannot upgrade itself in a container). Moving the contract to v1.14 and
// Kubernetes to v1.37 passes the webhook, which judges the spec, but Talos v1.13 does not run
// Kubernetes v1.37: the update is refused before any node is touched, with a condition that
// names the Machine, the node, the Talos version it runs and the window.
func TestInPlaceUpdateRefusedOutsideTalosWindow(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.64.")
	infra.options = func(o *sim.Options) { o.TalosVersion = "v1.13.3" }
	startProviders(t, env, infra)
	ns := env.NewNamespace(t, "talos-window")
	tcp := newCluster(t, env, infra, ns, "talos-window", 1, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Rollout.Strategy.Type = controlplanev1.InPlaceStrategyType
		tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.13"
	})
	waitForMembership(t, env, tcp, 1)
	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(HaveLen(1))
	m := machines[0]
	views, err := viewNodes(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	bootID := views[m.Name].bootID

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
	before := tcp.DeepCopy()
	tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.14"
	tcp.Spec.Version = nextKubernetesVersion
	g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(before))).To(Succeed(), "the webhook judges the spec: contract v1.14 runs Kubernetes v1.37")

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(conditions.GetMessage(tcp, controlplanev1.RollingOutCondition)).To(ContainSubstring(
			"In-place update refused before it starts: Machine " + m.Name + " (node " + m.Status.Addresses[0].Address + ") runs Talos v1.13.3: " +
				"Kubernetes " + nextKubernetesVersion + " is not supported on Talos v1.13, which runs Kubernetes v1.31 to v1.36"))
	}, time.Minute, time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		current := &clusterv1.Machine{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&m), current)).To(Succeed())
		g.Expect(current.Annotations).NotTo(HaveKey(controlplanev1.InPlaceUpdateAnnotation), "the update never starts")
		g.Expect(current.Spec.Version).To(Equal(simtest.KubernetesVersion))
	}, 10*time.Second, time.Second).Should(Succeed())
	views, err = viewNodes(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(views[m.Name].bootID).To(Equal(bootID), "the node is not rebooted")
	g.Expect(views[m.Name].apiServer).To(Equal(simtest.KubernetesVersion), "the node runs the old kube-apiserver")
}
