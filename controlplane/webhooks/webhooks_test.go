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

package webhooks_test

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(m))
}

func controlPlane(ns, name string) *controlplanev1.TalosControlPlane {
	return &controlplanev1.TalosControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: controlplanev1.TalosControlPlaneSpec{
			Replicas: ptr.To[int32](3),
			Version:  "v1.35.2",
			MachineTemplate: controlplanev1.TalosControlPlaneMachineTemplate{Spec: controlplanev1.TalosControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerMachineTemplate", Name: "cp"},
			}},
			ControlPlaneConfig: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane},
		},
	}
}

// TestBadInputIsRejected: every way a control plane could lose etcd quorum, go backwards or
// fail to render is refused at admission with a message that says what to do instead.
func TestBadInputIsRejected(t *testing.T) {
	env := envtest.Get(t)
	env.StartManager(t, envtest.ManagerOptions{})
	ns := env.NewNamespace(t, "cp-webhooks")
	ctx := t.Context()

	create := func(t *testing.T, name string, mutate func(*controlplanev1.TalosControlPlane)) error {
		t.Helper()
		tcp := controlPlane(ns, name)
		mutate(tcp)
		return env.Client.Create(ctx, tcp)
	}
	update := func(t *testing.T, name string, mutate func(*controlplanev1.TalosControlPlane)) error {
		t.Helper()
		g := NewWithT(t)
		tcp := controlPlane(ns, name)
		g.Expect(env.Client.Create(ctx, tcp)).To(Succeed())
		mutate(tcp)
		return env.Client.Update(ctx, tcp)
	}

	t.Run("a valid control plane and a one-minor upgrade are accepted", func(t *testing.T) {
		NewWithT(t).Expect(update(t, "valid", func(tcp *controlplanev1.TalosControlPlane) { tcp.Spec.Version = "v1.36.3" })).To(Succeed())
	})
	t.Run("even replicas", func(t *testing.T) {
		err := create(t, "even", func(tcp *controlplanev1.TalosControlPlane) { tcp.Spec.Replicas = ptr.To[int32](2) })
		NewWithT(t).Expect(err).To(MatchError(And(ContainSubstring("spec.replicas"), ContainSubstring("use an odd number"))))
	})
	t.Run("scaling to an even number", func(t *testing.T) {
		err := update(t, "to-even", func(tcp *controlplanev1.TalosControlPlane) { tcp.Spec.Replicas = ptr.To[int32](4) })
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("use an odd number")))
	})
	t.Run("downgrade", func(t *testing.T) {
		err := update(t, "downgrade", func(tcp *controlplanev1.TalosControlPlane) { tcp.Spec.Version = "v1.35.1" })
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("cannot downgrade Kubernetes from v1.35.2 to v1.35.1")))
	})
	t.Run("skipped minor", func(t *testing.T) {
		err := update(t, "skip", func(tcp *controlplanev1.TalosControlPlane) { tcp.Spec.Version = "v1.37.0" })
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("cannot skip a minor version from v1.35.2 to v1.37.0: upgrade to v1.36 first")))
	})
	t.Run("not a version", func(t *testing.T) {
		err := create(t, "noversion", func(tcp *controlplanev1.TalosControlPlane) { tcp.Spec.Version = "1.36" })
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("must be a Kubernetes version like v1.36.3")))
	})
	t.Run("invalid patch in controlPlaneConfig", func(t *testing.T) {
		err := create(t, "badpatch", func(tcp *controlplanev1.TalosControlPlane) {
			tcp.Spec.ControlPlaneConfig.ConfigPatches = []bootstrapv1.ConfigPatch{{Op: "replace", Path: "/machine/nosuchfield/x", Value: &apiextensionsv1.JSON{Raw: []byte(`"y"`)}}}
		})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("spec.controlPlaneConfig")))
	})
	t.Run("a worker config for the control plane", func(t *testing.T) {
		err := create(t, "worker", func(tcp *controlplanev1.TalosControlPlane) {
			tcp.Spec.ControlPlaneConfig.GenerateType = bootstrapv1.GenerateTypeWorker
		})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("spec.controlPlaneConfig.generateType")))
	})
	t.Run("maxSurge 0 with one replica", func(t *testing.T) {
		err := create(t, "nosurge", func(tcp *controlplanev1.TalosControlPlane) {
			tcp.Spec.Replicas = ptr.To[int32](1)
			tcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To[int32](0)
		})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("needs at least 3")))
	})
	t.Run("a machine naming template without {{ .random }}, or that names no DNS label", func(t *testing.T) {
		g := NewWithT(t)
		err := create(t, "naming", func(tcp *controlplanev1.TalosControlPlane) {
			tcp.Spec.MachineNaming.Template = "{{ .cluster.name }}-cp"
		})
		g.Expect(err).To(MatchError(And(ContainSubstring("spec.machineNaming.template"), ContainSubstring("must contain {{ .random }}"))))
		err = create(t, "naming-dots", func(tcp *controlplanev1.TalosControlPlane) {
			tcp.Spec.MachineNaming.Template = "{{ .random }}.{{ .talosControlPlane.name }}"
		})
		g.Expect(err).To(MatchError(ContainSubstring("not a DNS label")))
		g.Expect(create(t, "naming-ok", func(tcp *controlplanev1.TalosControlPlane) {
			tcp.Spec.MachineNaming.Template = "{{ .talosControlPlane.name }}-cp-{{ .random }}"
		})).To(Succeed())
	})
	t.Run("another infrastructure kind", func(t *testing.T) {
		err := update(t, "kind", func(tcp *controlplanev1.TalosControlPlane) {
			tcp.Spec.MachineTemplate.Spec.InfrastructureRef.Kind = "TalosMetalMachineTemplate"
		})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("infrastructure provider of a control plane cannot change")))
	})
	t.Run("Kubernetes outside the Talos version's window", func(t *testing.T) {
		g := NewWithT(t)
		err := create(t, "k8s-too-new", func(tcp *controlplanev1.TalosControlPlane) {
			tcp.Spec.Version = "v1.38.0"
			tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.14"
		})
		g.Expect(err).To(MatchError(And(ContainSubstring("spec.version"),
			ContainSubstring("Kubernetes v1.38.0 is not supported on Talos v1.14, which runs Kubernetes v1.32 to v1.37"))))
		err = create(t, "k8s-too-old", func(tcp *controlplanev1.TalosControlPlane) {
			tcp.Spec.Version = "v1.30.4"
			tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.14"
		})
		g.Expect(err).To(MatchError(ContainSubstring("Kubernetes v1.30.4 is not supported on Talos v1.14, which runs Kubernetes v1.32 to v1.37")))
	})
	t.Run("a Talos upgrade outside the upgrade window", func(t *testing.T) {
		g := NewWithT(t)
		tcp := controlPlane(ns, "talos-jump")
		tcp.Spec.Version = "v1.32.5"
		tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.10"
		g.Expect(env.Client.Create(ctx, tcp)).To(Succeed())
		tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.14"
		g.Expect(env.Client.Update(ctx, tcp)).To(MatchError(And(ContainSubstring("spec.controlPlaneConfig.talosVersion"),
			ContainSubstring("Talos v1.14 upgrades only from v1.12 or later, not from v1.10: upgrade to v1.12 first"))))
		got := &controlplanev1.TalosControlPlane{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), got)).To(Succeed())
		g.Expect(got.Spec.ControlPlaneConfig.TalosVersion).To(Equal("v1.10"), "nothing half-written")
		got.Spec.ControlPlaneConfig.TalosVersion = "v1.12"
		g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	})
	t.Run("the contract is recorded at creation and kept on updates that leave it out", func(t *testing.T) {
		g := NewWithT(t)
		tcp := controlPlane(ns, "pinned")
		g.Expect(tcp.Spec.ControlPlaneConfig.TalosVersion).To(BeEmpty())
		g.Expect(env.Client.Create(ctx, tcp)).To(Succeed())
		got := &controlplanev1.TalosControlPlane{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), got)).To(Succeed())
		g.Expect(got.Spec.ControlPlaneConfig.TalosVersion).To(Equal("v1.14"))
		got.Spec.ControlPlaneConfig.TalosVersion = ""
		got.Spec.Replicas = ptr.To[int32](5)
		g.Expect(env.Client.Update(ctx, got)).To(Succeed())
		g.Expect(got.Spec.ControlPlaneConfig.TalosVersion).To(Equal("v1.14"), "an update without it keeps the recorded contract")

		tmpl := &controlplanev1.TalosControlPlaneTemplate{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: ns}}
		tmpl.Spec.Template.Spec.ControlPlaneConfig.GenerateType = bootstrapv1.GenerateTypeControlPlane
		g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
		g.Expect(tmpl.Spec.Template.Spec.ControlPlaneConfig.TalosVersion).To(Equal("v1.14"))
	})
	t.Run("an object created with owners (clusterctl move, a ClusterClass) keeps its unrecorded contract", func(t *testing.T) {
		g := NewWithT(t)
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns}}
		g.Expect(env.Client.Create(ctx, owner)).To(Succeed())
		tcp := controlPlane(ns, "moved")
		tcp.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		g.Expect(env.Client.Create(ctx, tcp)).To(Succeed())
		g.Expect(tcp.Spec.ControlPlaneConfig.TalosVersion).To(BeEmpty(), "an empty talosVersion keeps meaning v1.13, the contract its nodes were made with")
	})
	t.Run("templates: an invalid config is refused, a ClusterClass dry run passes", func(t *testing.T) {
		g := NewWithT(t)
		template := func(name string, annotations map[string]string) *controlplanev1.TalosControlPlaneTemplate {
			tmpl := &controlplanev1.TalosControlPlaneTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations}}
			tmpl.Spec.Template.Spec.ControlPlaneConfig = bootstrapv1.TalosConfigSpec{
				GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: "v0.1",
			}
			return tmpl
		}
		g.Expect(env.Client.Create(ctx, template("bad", nil))).To(MatchError(ContainSubstring("talosVersion")))
		g.Expect(env.Client.Create(ctx, template("dry-run", map[string]string{clusterv1.TopologyDryRunAnnotation: ""}), client.DryRunAll)).To(Succeed())
	})
}
