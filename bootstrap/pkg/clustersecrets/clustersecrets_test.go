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

package clustersecrets_test

import (
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(m))
}

func newCluster(t *testing.T, env *envtest.Environment, name string) *clusterv1.Cluster {
	t.Helper()
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.NewNamespace(t, name)},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TalosDockerCluster", Name: name}},
	}
	NewWithT(t).Expect(env.Client.Create(t.Context(), cluster)).To(Succeed())
	return cluster
}

// TestEnsureRaceCreatesOneBundle races Ensure from many goroutines, as several manager
// replicas would: every caller gets the same bundle, and only one is stored.
func TestEnsureRaceCreatesOneBundle(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	cluster := newCluster(t, env, "race")

	const callers = 8
	bundles := make([]*secrets.Bundle, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { bundles[i], errs[i] = clustersecrets.Ensure(t.Context(), env.Client, cluster, "") })
	}
	wg.Wait()
	for i := range callers {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		g.Expect(bundles[i].Certs.OS.Crt).To(Equal(bundles[0].Certs.OS.Crt), "caller %d got another bundle", i)
	}
	stored, err := clustersecrets.Get(t.Context(), env.Client, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored.Certs.OS.Crt).To(Equal(bundles[0].Certs.OS.Crt))
}

// TestTalosconfigRenewal shows when the talosconfig's certificate is re-issued: not while
// more than a third of its lifetime remains, and then once.
func TestTalosconfigRenewal(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	ctx := t.Context()
	cluster := newCluster(t, env, "renew")
	bundle, err := clustersecrets.Ensure(ctx, env.Client, cluster, "")
	g.Expect(err).NotTo(HaveOccurred())

	const ttl = 90 * 24 * time.Hour
	start := time.Now()
	read := func() (*corev1.Secret, string) {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: "renew-talosconfig"}, s)).To(Succeed())
		cfg, err := clientconfig.FromBytes(s.Data[clustersecrets.TalosconfigKey])
		g.Expect(err).NotTo(HaveOccurred())
		return s, cfg.Contexts["renew"].Crt
	}

	renewIn, err := clustersecrets.EnsureTalosconfig(ctx, env.Client, cluster, bundle, []string{"10.0.0.1"}, start, ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewIn).To(BeNumerically("~", 60*24*time.Hour, time.Hour))
	first, firstCrt := read()
	g.Expect(first.Type).To(Equal(clusterv1.ClusterSecretType))

	t.Log("Half-way through its lifetime (more than a third left) it is kept")
	_, err = clustersecrets.EnsureTalosconfig(ctx, env.Client, cluster, bundle, []string{"10.0.0.1"}, start.Add(45*24*time.Hour), ttl)
	g.Expect(err).NotTo(HaveOccurred())
	kept, keptCrt := read()
	g.Expect(kept.ResourceVersion).To(Equal(first.ResourceVersion), "nothing was written")
	g.Expect(keptCrt).To(Equal(firstCrt))

	t.Log("With less than a third left it is re-issued")
	renewIn, err = clustersecrets.EnsureTalosconfig(ctx, env.Client, cluster, bundle, []string{"10.0.0.1"}, start.Add(61*24*time.Hour), ttl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewIn).To(BeNumerically("~", 60*24*time.Hour, time.Hour))
	renewed, renewedCrt := read()
	g.Expect(renewedCrt).NotTo(Equal(firstCrt))
	g.Expect(renewed.Annotations[clustersecrets.TalosconfigExpiresAnnotation]).NotTo(Equal(first.Annotations[clustersecrets.TalosconfigExpiresAnnotation]))
}
