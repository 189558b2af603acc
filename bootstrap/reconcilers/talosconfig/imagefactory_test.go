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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/internal/imagefactory/factorytest"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/test/envtest"
)

// installDisk gives a v1.14 metal node the disk it installs to.
const installDisk = "apiVersion: v1alpha1\nkind: UnattendedInstallConfig\nprovisioning:\n  diskSelector:\n    match: disk.dev_path == \"/dev/vda\"\n"

// newMetalMachine creates a Machine of cluster backed by a TalosMetalMachine, with its
// TalosConfig: a node that installs Talos.
func newMetalMachine(t *testing.T, env *envtest.Environment, cluster *clusterv1.Cluster, name string, spec bootstrapv1.TalosConfigSpec) *bootstrapv1.TalosConfig {
	t.Helper()
	g := NewWithT(t)
	config := &bootstrapv1.TalosConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name}},
		Spec:       spec,
	}
	g.Expect(env.Client.Create(t.Context(), config)).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name}},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster.Name,
			Version:     "v1.36.3",
			Bootstrap:   clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "TalosConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "TalosMetalMachine", Name: name + "-infra",
			},
		},
	}
	g.Expect(env.Client.Create(t.Context(), machine)).To(Succeed())
	return config
}

// dataSecretCondition waits for config's DataSecretAvailable condition to have reason and
// returns its message.
func dataSecretCondition(t *testing.T, env *envtest.Environment, config *bootstrapv1.TalosConfig, reason string) string {
	t.Helper()
	var message string
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(config), config)).To(Succeed())
		c := conditions.Get(config, bootstrapv1.TalosConfigDataSecretAvailableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), "message: %s", c.Message)
		message = c.Message
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	return message
}

// TestImageFactoryInstallers: metal nodes of the v1.14 contract install from the Image
// Factory installer of their schematic, recorded in status and on the data Secret; an
// unreachable factory and an unknown extension each hold the config back with a condition
// that says so, and nothing is written until they are resolved.
func TestImageFactoryInstallers(t *testing.T) {
	env := envtest.Get(t)
	factory := factorytest.Start(t, "v1.13.3", "v1.14.1")
	startBootstrapProvider(t, env, func(o *manager.Options) { o.ImageFactoryURL = factory.URL })
	ns := env.NewNamespace(t, "factory")
	cluster := newProvisionedCluster(t, env, ns, "factory", nil)
	ctx := t.Context()
	g := NewWithT(t)
	noSecret := func(config *bootstrapv1.TalosConfig) {
		t.Helper()
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: config.Name + "-bootstrap-data"}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no data Secret for %s: %v", config.Name, err)
	}

	t.Log("An unreachable factory: the config waits, says why, and is written once the factory answers")
	factory.SetDown(true)
	spec := bootstrapv1.TalosConfigSpec{
		GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.14",
		StrategicPatches: []string{installDisk},
		ImageFactory: bootstrapv1.ImageFactorySpec{
			Extensions: []string{"siderolabs/iscsi-tools"}, ExtraKernelArgs: []string{"console=ttyS0"},
		},
	}
	down := newMetalMachine(t, env, cluster, "down", spec)
	message := dataSecretCondition(t, env, down, bootstrapv1.ImageFactoryUnavailableReason)
	g.Expect(message).To(ContainSubstring("Image Factory " + factory.URL + " is unavailable"))
	noSecret(down)
	factory.SetDown(false)
	_, cfg := dataSecret(t, env, down)
	g.Expect(down.Status.ImageFactory.SchematicID).To(MatchRegexp(`^[0-9a-f]{64}$`))
	g.Expect(down.Status.ImageFactory.Version).To(Equal("v1.14.1"))
	g.Expect(down.Status.ImageFactory.Installer).To(HaveSuffix("/metal-installer/" + down.Status.ImageFactory.SchematicID + ":v1.14.1"))
	g.Expect(cfg.UnattendedInstallConfig().InstallerImage()).To(Equal(down.Status.ImageFactory.Installer))
	schematic := string(factory.Schematic(down.Status.ImageFactory.SchematicID))
	g.Expect(schematic).To(And(ContainSubstring("siderolabs/iscsi-tools"), ContainSubstring("console=ttyS0")))

	t.Log("The status is restored from the data Secret, which clusterctl move carries")
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: *down.Status.DataSecretName}, secret)).To(Succeed())
	g.Expect(secret.Annotations).To(HaveKeyWithValue(bootstrapv1.ImageFactoryInstallerAnnotation, down.Status.ImageFactory.Installer))

	t.Log("An unknown extension: refused with its name before a schematic is created; fixing the spec writes the config")
	created := factory.SchematicsCreated()
	bad := spec.DeepCopy()
	bad.ImageFactory.Extensions = []string{"siderolabs/iscsi-tools", "siderolabs/no-such-extension"}
	unknown := newMetalMachine(t, env, cluster, "unknown", *bad)
	message = dataSecretCondition(t, env, unknown, bootstrapv1.ImageFactoryRejectedReason)
	g.Expect(message).To(ContainSubstring("system extension siderolabs/no-such-extension is not an official extension of Talos v1.14.1"))
	g.Expect(factory.SchematicsCreated()).To(Equal(created), "no schematic is created")
	noSecret(unknown)
	unknown.Spec.ImageFactory.Extensions = []string{"siderolabs/iscsi-tools"}
	g.Expect(env.Client.Update(ctx, unknown)).To(Succeed())
	dataSecret(t, env, unknown)
	g.Expect(unknown.Status.ImageFactory.SchematicID).To(Equal(down.Status.ImageFactory.SchematicID), "one schematic, one ID")

	t.Log("Before v1.14 a metal node uses the factory only when asked to; container nodes never")
	legacy := newMetalMachine(t, env, cluster, "legacy", bootstrapv1.TalosConfigSpec{
		GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.13",
		StrategicPatches: []string{"machine:\n  install:\n    disk: /dev/vda\n"},
	})
	_, cfg = dataSecret(t, env, legacy)
	g.Expect(legacy.Status.ImageFactory).To(BeZero())
	g.Expect(cfg.Machine().Install().Image()).NotTo(ContainSubstring("metal-installer"), "not a factory installer")
	pinned := newMetalMachine(t, env, cluster, "legacy-factory", bootstrapv1.TalosConfigSpec{
		GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.13",
		StrategicPatches: []string{"machine:\n  install:\n    disk: /dev/vda\n"},
		ImageFactory:     bootstrapv1.ImageFactorySpec{Version: "v1.13.3", SecureBoot: new(true)},
	})
	_, cfg = dataSecret(t, env, pinned)
	g.Expect(cfg.Machine().Install().Image()).To(Equal(pinned.Status.ImageFactory.Installer))
	g.Expect(pinned.Status.ImageFactory.Installer).To(ContainSubstring("/metal-installer-secureboot/"))
	container := newMachine(t, env, cluster, "container", spec)
	dataSecret(t, env, container)
	g.Expect(container.Status.ImageFactory).To(BeZero())
}
