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

package talosconfig_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/test/envtest"
)

// TestClusterOfFiveMachines is the bootstrap provider end to end with Cluster API's real
// Machine reconciler: two control-plane and three worker Machines get five data Secrets,
// each a config a Talos node loads, all from one secrets bundle.
func TestClusterOfFiveMachines(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	startBootstrapProvider(t, env)
	ns := env.NewNamespace(t, "five")
	ctx := t.Context()
	cluster := newProvisionedCluster(t, env, ns, "five", nil)

	configs := make([]*bootstrapv1.TalosConfig, 0, 5)
	for i := range 2 {
		configs = append(configs, newMachine(t, env, cluster, fmt.Sprintf("five-cp-%d", i), bootstrapv1.TalosConfigSpec{
			GenerateType: bootstrapv1.GenerateTypeControlPlane,
			Hostname:     bootstrapv1.HostnameSpec{Source: bootstrapv1.HostnameSourceMachineName},
		}))
	}
	for i := range 3 {
		configs = append(configs, newMachine(t, env, cluster, fmt.Sprintf("five-worker-%d", i), bootstrapv1.TalosConfigSpec{
			GenerateType:     bootstrapv1.GenerateTypeWorker,
			TalosVersion:     "v1.12",
			Hostname:         bootstrapv1.HostnameSpec{Source: bootstrapv1.HostnameSourceInfrastructureName},
			StrategicPatches: []string{"machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"150\"\n"},
		}))
	}

	for _, config := range configs {
		s, cfg := dataSecret(t, env, config)
		g.Expect(s.Type).To(Equal(clusterv1.ClusterSecretType))
		g.Expect(s.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, cluster.Name))
		g.Expect(s.OwnerReferences).To(ContainElement(And(HaveField("Kind", "TalosConfig"), HaveField("Name", config.Name),
			HaveField("Controller", HaveValue(BeTrue())))))
		g.Expect(cfg.Machine().Type().String()).To(Equal(string(config.Spec.GenerateType)))
		g.Expect(cfg.K8sClusterConfig().ClusterEndpoint().String()).To(Equal("https://172.20.0.10:6443"))
		g.Expect(prefixStrings(cfg.K8sNetworkConfig().PodCIDRs())).To(ConsistOf("10.244.0.0/16"))
		g.Expect(prefixStrings(cfg.K8sNetworkConfig().ServiceCIDRs())).To(ConsistOf("10.96.0.0/12"))
		g.Expect(cfg.K8sNetworkConfig().DNSDomain()).To(Equal("talon.local"))
		g.Expect(cfg.K8sKubeletConfig().Image()).To(HaveSuffix(":v1.36.3"))
		wantHostname := config.Name
		if config.Spec.GenerateType == bootstrapv1.GenerateTypeWorker {
			wantHostname = config.Name + "-infra"
			g.Expect(cfg.K8sKubeletConfig().ExtraArgs()).To(HaveKeyWithValue("max-pods", []string{"150"}))
		}
		g.Expect(cfg.NetworkHostnameConfig().Hostname()).To(Equal(wantHostname))
		g.Expect(config.Status.Initialization.DataSecretCreated).To(HaveValue(BeTrue()))
	}

	t.Log("All five configs come from the one secrets bundle of the Cluster")
	talosBundle, err := clustersecrets.Get(ctx, env.Client, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	for _, config := range configs {
		_, cfg := dataSecret(t, env, config)
		g.Expect(cfg.Machine().Security().IssuingCA().Crt).To(Equal(talosBundle.Certs.OS.Crt))
		// The Kubernetes CA: the first accepted CA, on a worker too (which has no key to issue with).
		g.Expect(cfg.K8sAPIServerCAConfig().AcceptedCAs()).NotTo(BeEmpty())
		g.Expect(cfg.K8sAPIServerCAConfig().AcceptedCAs()[0].Crt).To(Equal(talosBundle.Certs.K8s.Crt))
	}
	ca := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Name + "-ca"}, ca)).To(Succeed())
	g.Expect(ca.Type).To(Equal(clusterv1.ClusterSecretType))
	g.Expect(ca.Data[corev1.TLSCertKey]).To(Equal(talosBundle.Certs.K8s.Crt))
	g.Expect(ca.Data[corev1.TLSPrivateKeyKey]).To(Equal(talosBundle.Certs.K8s.Key))
	for _, name := range []string{cluster.Name + "-ca", cluster.Name + "-talos"} {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		g.Expect(s.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, cluster.Name))
		g.Expect(s.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move"))
		g.Expect(s.OwnerReferences).To(ContainElement(And(HaveField("Kind", "Cluster"), HaveField("UID", cluster.UID))))
	}

	t.Log("The talosconfig follows the control-plane Machines' addresses without a new certificate")
	talosconfig := func(g Gomega) *clientconfig.Config {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Name + "-talosconfig"}, s)).To(Succeed())
		g.Expect(s.Annotations).To(HaveKey(clustersecrets.TalosconfigExpiresAnnotation))
		cfg, err := clientconfig.FromBytes(s.Data["talosconfig"])
		g.Expect(err).NotTo(HaveOccurred())
		return cfg
	}
	var before *clientconfig.Config
	g.Eventually(func(g Gomega) {
		before = talosconfig(g)
		g.Expect(before.Contexts[cluster.Name].Endpoints).To(Equal([]string{"172.20.0.10"}))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	for i, address := range []string{"172.20.0.3", "172.20.0.2"} {
		// Cluster API's Machine reconciler writes the status too: retry on its updates.
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			m := &clusterv1.Machine{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("five-cp-%d", i)}, m); err != nil {
				return err
			}
			m.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: address}}
			return env.Client.Status().Update(ctx, m)
		})).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		after := talosconfig(g)
		g.Expect(after.Contexts[cluster.Name].Endpoints).To(Equal([]string{"172.20.0.2", "172.20.0.3"}))
		g.Expect(after.Contexts[cluster.Name].Crt).To(Equal(before.Contexts[cluster.Name].Crt), "the certificate is kept")
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}
