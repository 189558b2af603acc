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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/test/envtest"
)

// TestBadSpecsAreRefusedAtAdmission sends each kind of bad spec a user can write through the
// real API server: the webhook refuses it with a message naming the problem.
func TestBadSpecsAreRefusedAtAdmission(t *testing.T) {
	env := envtest.Get(t)
	startBootstrapProvider(t, env)
	ns := env.NewNamespace(t, "bad")
	tests := []struct {
		name string
		spec bootstrapv1.TalosConfigSpec
		want string
	}{
		{
			name: "malformed JSON patch value",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, ConfigPatches: []bootstrapv1.ConfigPatch{
				{Op: "replace", Path: "/machine/install/disk", Value: &apiextensionsv1.JSON{Raw: []byte(`{"not":"a disk"}`)}},
			}},
			want: "configPatches[0] (replace /machine/install/disk in the v1alpha1 document) makes the document invalid",
		},
		{
			name: "patch to a path that does not exist",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, ConfigPatches: []bootstrapv1.ConfigPatch{
				{Op: "remove", Path: "/machine/nosuch"},
			}},
			want: "configPatches[0] (remove /machine/nosuch in the v1alpha1 document) does not apply",
		},
		{
			name: "strategic patch that is not a Talos config",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, StrategicPatches: []string{"machine:\n  nosuchfield: 1\n"}},
			want: "strategicPatches[0] is not a Talos config patch",
		},
		{
			name: "unknown contract",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.42"},
			want: "spec.talosVersion: Invalid value: \"v1.42\": talosVersion \"v1.42\" is not supported",
		},
		{
			name: "generateType none without data",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeNone},
			want: "spec.data: Required value: generateType none uses spec.data as the complete machine config",
		},
		{
			name: "a JSON patch on a path a v1.14 document does not have",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.14", ConfigPatches: []bootstrapv1.ConfigPatch{
				{Op: "replace", Path: "/nosuch", Value: &apiextensionsv1.JSON{Raw: []byte(`1`)}, Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeletConfig"}},
			}},
			want: "configPatches[0] (replace /nosuch in the KubeletConfig document) makes the document invalid: error decoding document v1alpha1/KubeletConfig/ (line 1): unknown keys found during decoding: nosuch: 1",
		},
		{
			name: "a JSON patch removing a HostnameConfig field that is not there",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.14", ConfigPatches: []bootstrapv1.ConfigPatch{
				{Op: "remove", Path: "/hostname", Document: bootstrapv1.ConfigDocumentRef{Kind: "HostnameConfig"}},
			}},
			want: "configPatches[0] (remove /hostname in the HostnameConfig document) does not apply",
		},
		{
			name: "an Image Factory release older than the contract",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.14",
				ImageFactory: bootstrapv1.ImageFactorySpec{Version: "v1.13.3"}},
			want: "spec.imageFactory.version: Invalid value: \"v1.13.3\": Talos v1.13.3 is older than the config contract v1.14",
		},
		{
			name: "an extension name that is no extension name",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.14",
				ImageFactory: bootstrapv1.ImageFactorySpec{Extensions: []string{"iscsi tools"}}},
			want: "spec.imageFactory.extensions[0]",
		},
		{
			name: "a node label Kubernetes would refuse",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, NodeLabels: map[string]string{"pool": "gpu nodes"}},
			want: "nodeLabels: ",
		},
		{
			name: "a taint effect Kubernetes does not know",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker,
				NodeTaints: []bootstrapv1.NodeTaint{{Key: "dedicated", Effect: "Sometimes"}}},
			want: `spec.nodeTaints[0].effect: Unsupported value: "Sometimes"`,
		},
		{
			name: "a registry mirror that is no URL",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker,
				RegistryMirrors: []bootstrapv1.RegistryMirror{{Registry: "docker.io", Endpoints: []string{"mirror.example.com"}}}},
			want: "spec.registryMirrors[0].endpoints[0]",
		},
		{
			name: "disk encryption without a key",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker,
				DiskEncryption: bootstrapv1.DiskEncryptionSpec{StaticKeySecretRef: bootstrapv1.SecretKeyReference{Key: "passphrase"}}},
			want: "spec.diskEncryption.staticKeySecretRef.name",
		},
		{
			name: "data with a generated type",
			spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, Data: "version: v1alpha1\n"},
			want: "spec.data: Forbidden: data is used only with generateType none",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			config := &bootstrapv1.TalosConfig{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: ns}, Spec: tt.spec}
			err := env.Client.Create(t.Context(), config)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.want))

			template := &bootstrapv1.TalosConfigTemplate{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: ns},
				Spec:       bootstrapv1.TalosConfigTemplateSpec{Template: bootstrapv1.TalosConfigTemplateResource{Spec: tt.spec}},
			}
			err = env.Client.Create(t.Context(), template)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "template: got %v", err)
		})
	}

	t.Run("ClusterClass dry-runs pass the template webhook", func(t *testing.T) {
		g := NewWithT(t)
		template := &bootstrapv1.TalosConfigTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "dry-run", Namespace: ns,
				Annotations: map[string]string{clusterv1.TopologyDryRunAnnotation: ""}},
			Spec: bootstrapv1.TalosConfigTemplateSpec{Template: bootstrapv1.TalosConfigTemplateResource{
				Spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeNone}}},
		}
		g.Expect(env.Client.Create(t.Context(), template, client.DryRunAll)).To(Succeed())
	})
}

// TestClusterProblemsShowAsConditions covers what only the Cluster reveals: an invalid
// network leaves a condition naming it and no Secret, until the Cluster is fixed.
func TestClusterProblemsShowAsConditions(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	startBootstrapProvider(t, env)
	ns := env.NewNamespace(t, "cidr")
	ctx := t.Context()
	cluster := newProvisionedCluster(t, env, ns, "cidr", func(c *clusterv1.Cluster) {
		c.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"10.244.0.0/40"}
	})
	config := newMachine(t, env, cluster, "cidr-0", bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker})
	c := condition(t, env, config, bootstrapv1.InvalidConfigReason)
	g.Expect(c.Message).To(ContainSubstring(`the Cluster's network "10.244.0.0/40" is not a CIDR`))
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cidr-0-bootstrap-data"}, &corev1.Secret{})).
		To(Satisfy(apierrors.IsNotFound))

	t.Log("Fixing the Cluster's network renders the config")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"10.244.0.0/16"}
	g.Expect(env.Client.Update(ctx, cluster)).To(Succeed())
	_, cfg := dataSecret(t, env, config)
	g.Expect(prefixStrings(cfg.K8sNetworkConfig().PodCIDRs())).To(ConsistOf("10.244.0.0/16"))

	t.Log("Once written, the spec is immutable")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
	config.Spec.StrategicPatches = []string{"machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"10\"\n"}
	err := env.Client.Update(ctx, config)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("already written to the bootstrap data Secret"))

	t.Log("Marking it for an in-place update in the same update does not make it mutable")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
	config.Annotations = map[string]string{bootstrapv1.InPlaceUpdateAnnotation: "v1.36.3"}
	config.Spec.StrategicPatches = []string{"machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"10\"\n"}
	err = env.Client.Update(ctx, config)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)

	t.Log("Cluster API's in-place update of a worker writes the new spec with its own mark in one request: admitted")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
	config.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	config.Spec.StrategicPatches = []string{"machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"20\"\n"}
	g.Expect(env.Client.Update(ctx, config)).To(Succeed())

	t.Log("Marked first, its new spec is rendered into the same Secret for the version the mark names")
	before, _ := dataSecret(t, env, config)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
	config.Annotations = map[string]string{bootstrapv1.InPlaceUpdateAnnotation: "v1.37.2"}
	g.Expect(env.Client.Update(ctx, config)).To(Succeed())
	config.Spec.StrategicPatches = []string{"machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"10\"\n"}
	g.Expect(env.Client.Update(ctx, config)).To(Succeed())
	g.Eventually(func(g Gomega) {
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(before), secret)).To(Succeed())
		g.Expect(secret.UID).To(Equal(before.UID), "the same Secret")
		rendered, err := configloader.NewFromBytes(secret.Data["value"])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rendered.K8sKubeletConfig().ExtraArgs()).To(HaveKeyWithValue("max-pods", []string{"10"}))
		g.Expect(rendered.K8sKubeletConfig().Image()).To(HaveSuffix(":v1.37.2"))
		g.Expect(rendered.Cluster().Token().Secret()).To(Equal(cfg.Cluster().Token().Secret()), "from the same secrets bundle")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestWaitsAreExplained shows the conditions a person sees while a TalosConfig waits, and
// that a paused Cluster stops it.
func TestWaitsAreExplained(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	startBootstrapProvider(t, env)
	ns := env.NewNamespace(t, "wait")
	ctx := t.Context()

	orphan := &bootstrapv1.TalosConfig{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns},
		Spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker}}
	g.Expect(env.Client.Create(ctx, orphan)).To(Succeed())
	c := condition(t, env, orphan, bootstrapv1.WaitingForOwnerReason)
	g.Expect(c.Message).To(Equal("Waiting for a Machine or MachinePool to own this TalosConfig"))

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "wait", Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TalosDockerCluster", Name: "never-provisioned"}},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	waiting := newMachine(t, env, cluster, "wait-0", bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker})
	c = condition(t, env, waiting, bootstrapv1.WaitingForInfrastructureReason)
	g.Expect(c.Message).To(Equal("Waiting for the infrastructure of Cluster wait to be provisioned"))
	ready := &metav1.Condition{}
	for _, cond := range waiting.Status.Conditions {
		if cond.Type == bootstrapv1.TalosConfigReadyCondition {
			*ready = cond
		}
	}
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))

	t.Log("A paused Cluster pauses its TalosConfigs")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	cluster.Spec.Paused = ptr.To(true)
	g.Expect(env.Client.Update(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(waiting), waiting)).To(Succeed())
		g.Expect(waiting.Status.Conditions).To(ContainElement(And(
			HaveField("Type", bootstrapv1.TalosConfigPausedCondition), HaveField("Status", metav1.ConditionTrue))))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}
