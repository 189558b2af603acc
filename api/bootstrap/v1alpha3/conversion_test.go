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

package v1alpha3

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // CABPT's conditions are Cluster API v1beta1's

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/api/internal/roundtrip"
)

// TestRoundTrips converts random objects to the other version and back and expects what it
// started from: a TalosConfig CABPT stored reads as Talon's and converts back unchanged, and
// so does one Talon wrote. The seed is logged; TALON_CONVERSION_SEED replays it.
func TestRoundTrips(t *testing.T) {
	r := roundtrip.Rand(t)
	for i := range 500 {
		spoke := &TalosConfig{ObjectMeta: randomMeta(r), Spec: randomSpec(r), Status: randomStatus(r)}
		hub := &bootstrapv1.TalosConfig{}
		back := &TalosConfig{}
		roundtrip.Must(t, ConvertTalosConfigToHub(spoke, hub))
		roundtrip.Must(t, ConvertTalosConfigFromHub(hub, back))
		roundtrip.ExpectSame(t, i, "v1alpha3 TalosConfig -> v1beta1 -> v1alpha3", spoke, back)

		talon := &bootstrapv1.TalosConfig{ObjectMeta: randomMeta(r), Spec: randomHubSpec(r), Status: randomHubStatus(r)}
		viaSpoke := &TalosConfig{}
		again := &bootstrapv1.TalosConfig{}
		roundtrip.Must(t, ConvertTalosConfigFromHub(talon, viaSpoke))
		roundtrip.Must(t, ConvertTalosConfigToHub(viaSpoke, again))
		roundtrip.ExpectSame(t, i, "v1beta1 TalosConfig -> v1alpha3 -> v1beta1", talon, again)

		tmpl := &TalosConfigTemplate{ObjectMeta: randomMeta(r), Spec: TalosConfigTemplateSpec{Template: TalosConfigTemplateResource{Spec: randomSpec(r)}}}
		tmplHub := &bootstrapv1.TalosConfigTemplate{}
		tmplBack := &TalosConfigTemplate{}
		roundtrip.Must(t, ConvertTalosConfigTemplateToHub(tmpl, tmplHub))
		roundtrip.Must(t, ConvertTalosConfigTemplateFromHub(tmplHub, tmplBack))
		roundtrip.ExpectSame(t, i, "v1alpha3 TalosConfigTemplate -> v1beta1 -> v1alpha3", tmpl, tmplBack)

		hubTmpl := &bootstrapv1.TalosConfigTemplate{ObjectMeta: randomMeta(r)}
		hubTmpl.Spec.Template.Spec = randomHubSpec(r)
		if r.IntN(2) == 0 {
			hubTmpl.Spec.Template.ObjectMeta.Labels = map[string]string{"tier": word(r)}
		}
		hubTmplSpoke := &TalosConfigTemplate{}
		hubTmplAgain := &bootstrapv1.TalosConfigTemplate{}
		roundtrip.Must(t, ConvertTalosConfigTemplateFromHub(hubTmpl, hubTmplSpoke))
		roundtrip.Must(t, ConvertTalosConfigTemplateToHub(hubTmplSpoke, hubTmplAgain))
		roundtrip.ExpectSame(t, i, "v1beta1 TalosConfigTemplate -> v1alpha3 -> v1beta1", hubTmpl, hubTmplAgain)
	}
}

// TestCABPTObjectReadsAsTalon's: a TalosConfig as CABPT stores it for a worker reads as
// Talon's worker config, its Secret and readiness as Talon reports them.
func TestCABPTObjectReadsAsTalons(t *testing.T) {
	var spoke TalosConfig
	roundtrip.Must(t, json.Unmarshal([]byte(`{
		"apiVersion": "bootstrap.cluster.x-k8s.io/v1alpha3", "kind": "TalosConfig",
		"metadata": {"name": "demo-workers-abcde", "namespace": "default"},
		"spec": {"generateType": "join", "talosVersion": "v1.13",
			"configPatches": [{"op": "add", "path": "/machine/kubelet/extraArgs", "value": {"v": "2"}}]},
		"status": {"ready": true, "dataSecretName": "demo-workers-abcde-bootstrap-data",
			"conditions": [{"type": "DataSecretAvailable", "status": "True", "lastTransitionTime": "2026-11-24T07:00:00Z"}]}
	}`), &spoke))
	hub := &bootstrapv1.TalosConfig{}
	roundtrip.Must(t, ConvertTalosConfigToHub(&spoke, hub))
	if hub.Spec.GenerateType != bootstrapv1.GenerateTypeWorker || hub.Spec.TalosVersion != "v1.13" {
		t.Errorf("spec: got %s %s, want worker v1.13", hub.Spec.GenerateType, hub.Spec.TalosVersion)
	}
	if len(hub.Spec.ConfigPatches) != 1 || hub.Spec.ConfigPatches[0].Value == nil || string(hub.Spec.ConfigPatches[0].Value.Raw) != `{"v": "2"}` {
		t.Errorf("config patches: got %+v", hub.Spec.ConfigPatches)
	}
	if s := hub.Status; s.Initialization.DataSecretCreated == nil || !*s.Initialization.DataSecretCreated || s.DataSecretName == nil || *s.DataSecretName != "demo-workers-abcde-bootstrap-data" {
		t.Errorf("status: got %+v", hub.Status)
	}
	if len(hub.Status.Conditions) != 1 || hub.Status.Conditions[0].Reason == "" {
		t.Errorf("conditions need a reason in v1beta1: got %+v", hub.Status.Conditions)
	}
}

func word(r *rand.Rand) string {
	return []string{"a", "b", "tier", "x-y", "v1.13", "MachineName", ""}[r.IntN(7)]
}

func randomMeta(r *rand.Rand) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: "tc-" + strconv.Itoa(r.IntN(100)), Namespace: "default"}
	if r.IntN(2) == 0 {
		m.Annotations = map[string]string{"note": word(r)}
	}
	if r.IntN(2) == 0 {
		m.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "demo"}
	}
	return m
}

func randomJSON(r *rand.Rand) []byte {
	return []byte(roundtrip.Some(r, `"text"`, `42`, `{"a":["b",1]}`, `true`))
}

func randomSpec(r *rand.Rand) TalosConfigSpec {
	s := TalosConfigSpec{
		GenerateType: roundtrip.Some(r, "init", "controlplane", "join", "worker", "none", "bogus", ""),
		TalosVersion: roundtrip.Some(r, "", "v1.13", "v1.12.4"),
		Data:         roundtrip.Some(r, "", "version: v1alpha1\n"),
		Hostname:     HostnameSpec{Source: roundtrip.Some(r, "", "MachineName", "InfrastructureName")},
	}
	for range r.IntN(3) {
		p := ConfigPatches{Op: roundtrip.Some(r, "add", "replace", "remove"), Path: "/machine/" + word(r)}
		if r.IntN(3) > 0 {
			p.Value = apiextensionsv1.JSON{Raw: randomJSON(r)}
		}
		s.ConfigPatches = append(s.ConfigPatches, p)
	}
	for range r.IntN(2) {
		s.StrategicPatches = append(s.StrategicPatches, "machine:\n  env:\n    A: "+word(r)+"\n")
	}
	return s
}

func randomStatus(r *rand.Rand) TalosConfigStatus {
	s := TalosConfigStatus{Ready: r.IntN(2) == 0, ObservedGeneration: int64(r.IntN(5)),
		TalosConfig: roundtrip.Some(r, "", "context: demo\n"), FailureReason: roundtrip.Some(r, "", "Bad"), FailureMessage: roundtrip.Some(r, "", "it broke")}
	if r.IntN(2) == 0 {
		s.DataSecretName = strPtr("tc-bootstrap-data")
	}
	for i := range r.IntN(3) {
		s.Conditions = append(s.Conditions, clusterv1beta1.Condition{
			Type: clusterv1beta1.ConditionType(fmt.Sprintf("C%d", i)), Status: roundtrip.Some(r, corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown),
			Severity:           roundtrip.Some(r, clusterv1beta1.ConditionSeverityNone, clusterv1beta1.ConditionSeverityWarning, clusterv1beta1.ConditionSeverityError),
			LastTransitionTime: roundtrip.Time(r), Reason: roundtrip.Some(r, "", "Waiting"), Message: roundtrip.Some(r, "", "because"),
		})
	}
	return s
}

func randomHubSpec(r *rand.Rand) bootstrapv1.TalosConfigSpec {
	s := bootstrapv1.TalosConfigSpec{
		GenerateType: roundtrip.Some(r, bootstrapv1.GenerateTypeControlPlane, bootstrapv1.GenerateTypeWorker, bootstrapv1.GenerateTypeNone, ""),
		TalosVersion: roundtrip.Some(r, "", "v1.13"),
		Hostname:     bootstrapv1.HostnameSpec{Source: roundtrip.Some(r, bootstrapv1.HostnameSource(""), bootstrapv1.HostnameSourceMachineName)},
		Data:         roundtrip.Some(r, "", "version: v1alpha1\n"),
	}
	for range r.IntN(3) {
		p := bootstrapv1.ConfigPatch{Op: roundtrip.Some(r, "add", "move", "copy"), Path: "/machine/" + word(r), From: roundtrip.Some(r, "", "/machine/a")}
		if r.IntN(2) == 0 {
			p.Value = &apiextensionsv1.JSON{Raw: randomJSON(r)}
		}
		if r.IntN(2) == 0 {
			p.Document = bootstrapv1.ConfigDocumentRef{Kind: roundtrip.Some(r, "KubeletConfig", "LinkConfig"), Name: roundtrip.Some(r, "", "eth0")}
		}
		s.ConfigPatches = append(s.ConfigPatches, p)
	}
	if r.IntN(2) == 0 {
		s.ImageFactory = bootstrapv1.ImageFactorySpec{Version: "v1.14.1", Extensions: []string{word(r)}, SecureBoot: boolPtr(r.IntN(2) == 0)}
	}
	if r.IntN(2) == 0 {
		s.NodeLabels = map[string]string{word(r): word(r)}
		s.NodeTaints = []bootstrapv1.NodeTaint{{Key: word(r), Value: word(r), Effect: bootstrapv1.TaintEffectNoSchedule}}
		s.RegistryMirrors = []bootstrapv1.RegistryMirror{{Registry: "docker.io", Endpoints: []string{"https://" + word(r)}, SkipFallback: boolPtr(r.IntN(2) == 0)}}
		s.CNI = roundtrip.Some(r, bootstrapv1.CNIFlannel, bootstrapv1.CNINone)
		s.DiskEncryption = bootstrapv1.DiskEncryptionSpec{Key: bootstrapv1.DiskEncryptionKeyTPM, StaticKeySecretRef: bootstrapv1.SecretKeyReference{Name: word(r)}}
	}
	return s
}

func randomHubStatus(r *rand.Rand) bootstrapv1.TalosConfigStatus {
	s := bootstrapv1.TalosConfigStatus{ObservedGeneration: int64(r.IntN(5))}
	if r.IntN(2) == 0 {
		s.Initialization.DataSecretCreated = boolPtr(true)
		s.DataSecretName = strPtr("tc-bootstrap-data")
	}
	if r.IntN(2) == 0 {
		s.ImageFactory = bootstrapv1.ImageFactoryStatus{SchematicID: strings.Repeat("ab", 32), Installer: "f/metal-installer/x:v1.14.1", Version: "v1.14.1", URL: "https://f"}
	}
	if r.IntN(2) == 0 {
		s.ImageFactory = bootstrapv1.ImageFactoryStatus{SchematicID: strings.Repeat("ab", 32), Installer: "f/metal-installer/x:v1.14.1", Version: "v1.14.1", URL: "https://f"}
	}
	for i := range r.IntN(3) {
		s.Conditions = append(s.Conditions, metav1.Condition{
			Type: fmt.Sprintf("C%d", i), Status: roundtrip.Some(r, metav1.ConditionTrue, metav1.ConditionFalse), ObservedGeneration: int64(r.IntN(3)),
			LastTransitionTime: roundtrip.Time(r), Reason: roundtrip.Some(r, "Ready", "Waiting"), Message: roundtrip.Some(r, "", "because"),
		})
	}
	return s
}

func strPtr(s string) *string { return &s }

func boolPtr(b bool) *bool { return &b }
