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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/test/envtest"
)

func listTalosSecrets(t *testing.T, env *envtest.Environment, ns string) []corev1.Secret {
	t.Helper()
	secrets := &corev1.SecretList{}
	NewWithT(t).Expect(env.Client.List(t.Context(), secrets, client.InNamespace(ns))).To(Succeed())
	var bundles []corev1.Secret
	for _, s := range secrets.Items {
		if _, ok := s.Data[clustersecrets.BundleKey]; ok {
			bundles = append(bundles, s)
		}
	}
	return bundles
}

// TestOneBundleFromAColdStartOfFifty creates 50 TalosConfigs of one cluster before any
// reconciler runs, then starts the provider with 10 workers: the first reconciles race for
// the bundle, and exactly one wins. Then the bundle survives a deleted TalosConfig and a
// restart of the provider.
func TestOneBundleFromAColdStartOfFifty(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	ns := env.NewNamespace(t, "fifty")
	ctx := t.Context()
	var configs []*bootstrapv1.TalosConfig
	t.Run("create with only the webhooks running", func(t *testing.T) {
		env.StartManager(t, envtest.ManagerOptions{})
		cluster := newProvisionedCluster(t, env, ns, "fifty", nil)
		// The Cluster reconciler is not running yet: set what it would.
		cluster.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "172.20.0.10", Port: 6443}
		NewWithT(t).Expect(env.Client.Update(ctx, cluster)).To(Succeed())
		cluster.Status.Initialization.InfrastructureProvisioned = new(true)
		NewWithT(t).Expect(env.Client.Status().Update(ctx, cluster)).To(Succeed())
		for i := range 50 {
			configs = append(configs, newMachine(t, env, cluster, fmt.Sprintf("fifty-%02d", i),
				bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker}))
		}
	})
	g.Expect(listTalosSecrets(t, env, ns)).To(BeEmpty())
	startBootstrapProvider(t, env)

	var firstCA []byte
	for _, config := range configs {
		_, cfg := dataSecret(t, env, config)
		if firstCA == nil {
			firstCA = cfg.Machine().Security().IssuingCA().Crt
		}
		g.Expect(cfg.Machine().Security().IssuingCA().Crt).To(Equal(firstCA), "config %s has another CA", config.Name)
	}
	bundles := listTalosSecrets(t, env, ns)
	g.Expect(bundles).To(HaveLen(1), "exactly one secrets bundle")
	bundle := bundles[0]
	g.Expect(bundle.Name).To(Equal("fifty-talos"))

	t.Log("Deleting a TalosConfig keeps the bundle")
	g.Expect(env.Client.Delete(ctx, configs[0])).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(configs[0]), &bootstrapv1.TalosConfig{}))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	again := listTalosSecrets(t, env, ns)
	g.Expect(again).To(HaveLen(1))
	g.Expect(again[0].UID).To(Equal(bundle.UID))
	g.Expect(again[0].ResourceVersion).To(Equal(bundle.ResourceVersion), "the bundle is never rewritten")
}

// TestBundleSurvivesRestartAndIsNeverReplaced restarts the provider over an existing
// cluster, then deletes the bundle while the cluster's CA remains: Talon refuses to make a
// second identity and says how to recover.
func TestBundleSurvivesRestartAndIsNeverReplaced(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	ns := env.NewNamespace(t, "restart")
	ctx := t.Context()

	t.Run("first manager", func(t *testing.T) {
		startBootstrapProvider(t, env)
		cluster := newProvisionedCluster(t, env, ns, "restart", nil)
		dataSecret(t, env, newMachine(t, env, cluster, "restart-0", bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker}))
	})
	bundle := listTalosSecrets(t, env, ns)
	g.Expect(bundle).To(HaveLen(1))

	startBootstrapProvider(t, env)
	cluster := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "restart"}, cluster)).To(Succeed())
	_, cfg := dataSecret(t, env, newMachine(t, env, cluster, "restart-1", bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker}))
	after := listTalosSecrets(t, env, ns)
	g.Expect(after).To(HaveLen(1))
	g.Expect(after[0].UID).To(Equal(bundle[0].UID))
	g.Expect(after[0].ResourceVersion).To(Equal(bundle[0].ResourceVersion))
	talosBundle, err := clustersecrets.Get(ctx, env.Client, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Machine().Security().IssuingCA().Crt).To(Equal(talosBundle.Certs.OS.Crt))

	t.Log("A lost bundle is reported, not replaced")
	g.Expect(env.Client.Delete(ctx, &after[0])).To(Succeed())
	lost := newMachine(t, env, cluster, "restart-2", bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker})
	c := condition(t, env, lost, bootstrapv1.SecretsBundleUnavailableReason)
	g.Expect(c.Message).To(ContainSubstring("restore restart-talos from a backup"))
	g.Expect(listTalosSecrets(t, env, ns)).To(BeEmpty(), "no second bundle")
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "restart-2-bootstrap-data"}, &corev1.Secret{}))
	}, 2*time.Second, 200*time.Millisecond).Should(BeTrue())
}
