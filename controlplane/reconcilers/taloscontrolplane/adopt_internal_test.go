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

package taloscontrolplane

import (
	"strings"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1alpha3 "github.com/talon-capi/talon/api/controlplane/v1alpha3"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
)

// TestAdoptedMachinesUpToDate: a Machine another provider made is up to date after its
// adoption exactly when its TalosConfig says what controlPlaneConfig says and its
// infrastructure machine was cloned from the current template (or does not say).
// TestMigrateFromSidero (test/e2e) adopts CACPPT's Machines through a real API server.
func TestAdoptedMachinesUpToDate(t *testing.T) {
	tcp := &controlplanev1.TalosControlPlane{}
	tcp.Spec.Version = "v1.36.3"
	tcp.Spec.ControlPlaneConfig = bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: "v1.13"}
	current := clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerMachineTemplate", Name: "cp-v2"}
	tcp.Spec.MachineTemplate.Spec.InfrastructureRef = current
	clonedFrom := func(groupKind, name string) map[string]string {
		return map[string]string{clusterv1.TemplateClonedFromNameAnnotation: name, clusterv1.TemplateClonedFromGroupKindAnnotation: groupKind}
	}
	config := func(mutate func(*bootstrapv1.TalosConfigSpec)) *bootstrapv1.TalosConfig {
		c := &bootstrapv1.TalosConfig{Spec: *tcp.Spec.ControlPlaneConfig.DeepCopy()}
		mutate(&c.Spec)
		return c
	}
	same := func(*bootstrapv1.TalosConfigSpec) {}
	const groupKind = "TalosDockerMachineTemplate.infrastructure.cluster.x-k8s.io"

	for _, tc := range []struct {
		name       string
		config     *bootstrapv1.TalosConfig
		clonedFrom map[string]string
		want       string
	}{
		{"made from the spec", config(same), clonedFrom(groupKind, "cp-v2"), ""},
		{"no cloned-from record, TalosConfig gone", nil, nil, ""},
		{"another config", config(func(s *bootstrapv1.TalosConfigSpec) {
			s.StrategicPatches = []string{"machine:\n  kubelet:\n    registerWithFQDN: true\n"}
		}), clonedFrom(groupKind, "cp-v2"), "controlPlaneConfig changed"},
		{"another Talos version", config(func(s *bootstrapv1.TalosConfigSpec) { s.TalosVersion = "v1.12" }), nil, "controlPlaneConfig changed"},
		{"another template", config(same), clonedFrom(groupKind, "cp-v1"), "infrastructure template cp-v1, want cp-v2"},
		{"another kind of template of the same name", config(same), clonedFrom("MetalTemplate.example.com", "cp-v2"),
			"infrastructure template MetalTemplate.example.com/cp-v2, want cp-v2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hash, _ := madeFromConfig(tcp.Spec.ControlPlaneConfig, tc.config)
			m := &clusterv1.Machine{}
			m.Spec.Version = tcp.Spec.Version
			m.Annotations = map[string]string{
				ConfigHashAnnotation:             hash,
				InfrastructureTemplateAnnotation: madeFromTemplate(current, tc.clonedFrom),
			}
			if got := (&scope{tcp: tcp}).upToDate(m); got != tc.want {
				t.Errorf("upToDate after adoption = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNeverBootstrappedAgainAfterTakeover: a control plane taken over from CACPPT, whose
// status said bootstrapped (read through the real v1alpha3 conversion), or recorded as
// having served, is never bootstrapped again, though no Machine is recorded for it.
func TestNeverBootstrappedAgainAfterTakeover(t *testing.T) {
	converted := func(bootstrapped bool) *controlplanev1.TalosControlPlane {
		theirs := &controlplanev1alpha3.TalosControlPlane{}
		theirs.Status.Bootstrapped = bootstrapped
		ours := &controlplanev1.TalosControlPlane{}
		if err := controlplanev1alpha3.ConvertTalosControlPlaneToHub(theirs, ours); err != nil {
			t.Fatal(err)
		}
		return ours
	}
	recorded := &controlplanev1.TalosControlPlane{}
	recorded.Annotations = map[string]string{controlplanev1.EtcdClusterAnnotation: "8e9e05c52164694d"}

	for _, tc := range []struct {
		name string
		tcp  *controlplanev1.TalosControlPlane
		want string
	}{
		{"Talon's own, never bootstrapped", &controlplanev1.TalosControlPlane{}, ""},
		{"CACPPT's, not bootstrapped", converted(false), ""},
		{"CACPPT's, bootstrapped", converted(true), "CACPPT's status.bootstrapped"},
		{"recorded as having served", recorded, "member 8e9e05c52164694d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&scope{tcp: tc.tcp}).bootstrappedWithoutRecord()
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("bootstrappedWithoutRecord() = %q, want %q", got, tc.want)
			}
		})
	}
}
