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
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/controlplane/reconcilers/taloscontrolplane"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
)

// TestWorkerTalosUpgradedInPlace: a bare-metal worker running Talos v1.13.3 gets Talos
// v1.14.1 (a new TalosConfig spec: contract v1.14 and imageFactory v1.14.1) through the
// UpdateMachine hook, called as Cluster API's Machine controller calls it after moving the
// Machine to the new MachineSet: again and again, after the delay each answer asks for.
// The installer runs beside the calls (one call may take 30 s at most); the node is drained,
// boots the new Talos, runs the new config, and is schedulable again. (The hooks' protocol
// with Cluster API's core manager runs in test/e2e's TestEndToEnd, on container nodes,
// which cannot install Talos.)
func TestWorkerTalosUpgradedInPlace(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := startMetalProviders(t, env, "127.0.65.", "v1.13.3", "v1.13.3", "v1.14.1")
	ns := env.NewNamespace(t, "worker-upgrade")
	const name = "worker-upgrade"
	tcp := newCluster(t, env, infra, ns, name, 1, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.13"
		tcp.Spec.ControlPlaneConfig.ImageFactory.Version = "v1.13.3"
	})
	waitForMembership(t, env, tcp, 1)

	t.Log("A worker Machine on a bare-metal node running Talos v1.13.3")
	labels := map[string]string{clusterv1.ClusterNameLabel: name}
	config := &bootstrapv1.TalosConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns, Labels: labels},
		Spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.13",
			ImageFactory: bootstrapv1.ImageFactorySpec{Version: "v1.13.3"}},
	}
	asset := &infrav1.Asset{URL: "http://assets.invalid/talos", SHA512: strings.Repeat("0", 128)}
	metal := &infrav1.TalosMetalMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns, Labels: labels},
		Spec:       infrav1.TalosMetalMachineSpec{BootAssets: infrav1.BootAssets{Kernel: asset, Initramfs: asset}},
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: name, Version: simtest.KubernetesVersion,
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "TalosConfig", Name: config.Name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosMetalMachine", Name: metal.Name},
		},
	}
	for _, o := range []client.Object{config, metal, machine} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
		g.Expect(machine.Status.NodeRef.IsDefined()).To(BeTrue(), "the worker's Node is linked")
	}, 3*time.Minute, time.Second).Should(Succeed())
	address := machine.Status.Addresses[0].Address
	bundle, err := clustersecrets.Get(ctx, env.Client, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	g.Expect(err).NotTo(HaveOccurred())
	node, err := talosclient.NewFactory().New(ctx, bundle, address)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = node.Close() })
	g.Expect(node.Version(ctx)).To(Equal("v1.13.3"))
	bootID, err := node.BootID(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	t.Log("Cluster API moves the Machine to a MachineSet of Talos v1.14.1: the TalosConfig gets the new spec")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
	config.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	config.Spec.TalosVersion, config.Spec.ImageFactory.Version = "v1.14", "v1.14.1"
	g.Expect(env.Client.Update(ctx, config)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
	machine.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	g.Expect(env.Client.Update(ctx, machine)).To(Succeed())

	hook := &taloscontrolplane.Reconciler{Client: env.Client, TalosClients: talosclient.NewFactory()}
	start := time.Now()
	var messages []string
	g.Eventually(func(g Gomega) {
		current := &clusterv1.Machine{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(machine), current)).To(Succeed())
		resp := &runtimehooksv1.UpdateMachineResponse{}
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		hook.UpdateMachine(callCtx, &runtimehooksv1.UpdateMachineRequest{Desired: runtimehooksv1.UpdateMachineRequestObjects{Machine: *current}}, resp)
		if len(messages) == 0 || messages[len(messages)-1] != resp.GetMessage() {
			messages = append(messages, resp.GetMessage())
			t.Logf("UpdateMachine: %s, retry after %ds: %s", resp.GetStatus(), resp.GetRetryAfterSeconds(), resp.GetMessage())
		}
		if resp.GetStatus() != runtimehooksv1.ResponseStatusSuccess {
			StopTrying("UpdateMachine failed: " + resp.GetMessage()).Now()
		}
		g.Expect(resp.GetRetryAfterSeconds()).To(BeZero(), resp.GetMessage())
	}, 5*time.Minute, time.Second).Should(Succeed())
	t.Logf("Upgraded the worker to Talos v1.14.1 in place in %s", time.Since(start).Round(time.Second))
	g.Expect(messages).To(ContainElement(HavePrefix("Installing ")), "the installer ran beside the calls")

	g.Expect(node.Version(ctx)).To(Equal("v1.14.1"))
	g.Expect(node.BootID(ctx)).NotTo(Equal(bootID), "the node booted the new Talos")
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: *machine.Spec.Bootstrap.DataSecretName}, secret)).To(Succeed())
	g.Expect(secret.Annotations).To(HaveKeyWithValue(bootstrapv1.ImageFactoryInstallerAnnotation, HaveSuffix(":v1.14.1")))
	running, err := node.MachineConfig(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(controlplane.SameConfig(running, secret.Data["value"])).To(BeTrue(), "the node runs the new config")
	kubeNode, err := workloadClient(t, env, tcp).CoreV1().Nodes().Get(ctx, machine.Status.NodeRef.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kubeNode.Spec.Unschedulable).To(BeFalse(), "the Node is uncordoned")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
	g.Expect(machine.Annotations).NotTo(HaveKey(controlplanev1.InPlaceUpdateAnnotation), "the record ends with the update")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
	g.Expect(config.Annotations).NotTo(HaveKey(bootstrapv1.InPlaceUpdateAnnotation))
	g.Expect(ptr.Deref(machine.Status.NodeInfo, corev1.NodeSystemInfo{}).OSImage).To(ContainSubstring("v1.14.1"))
}
