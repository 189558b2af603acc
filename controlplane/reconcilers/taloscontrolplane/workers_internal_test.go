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
	"bytes"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// TestCanUpdateMachineSet: Cluster API applies the answer's patches to the current objects
// and updates in place only when they then equal the desired ones. A new version and a new
// TalosConfigTemplate spec (a new Talos release among them) are covered; a new infrastructure spec or another bootstrap
// provider's template is not, and the Machines are replaced. The in-place rollout itself
// runs against Cluster API's core manager in TestEndToEnd (test/e2e).
func TestCanUpdateMachineSet(t *testing.T) {
	talosTemplateOf := func(fields string) runtime.RawExtension {
		return raw(t, `{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta1","kind":"TalosConfigTemplate","metadata":{"name":"w"},
			"spec":{"template":{"spec":{`+fields+`}}}}`)
	}
	talosTemplate := func(patches string) runtime.RawExtension {
		return talosTemplateOf(`"generateType":"worker","talosVersion":"v1.13","configPatches":` + patches)
	}
	factory := func(version string) runtime.RawExtension {
		return talosTemplateOf(`"generateType":"worker","talosVersion":"v1.13","imageFactory":{"version":"` + version + `"}`)
	}
	dockerTemplate := func(image string) runtime.RawExtension {
		return raw(t, `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TalosDockerMachineTemplate","metadata":{"name":"w"},
			"spec":{"template":{"spec":{"image":"`+image+`"}}}}`)
	}
	machineSet := func(version string) clusterv1.MachineSet {
		ms := clusterv1.MachineSet{}
		ms.Spec.Template.Spec.Version = version
		return ms
	}
	kubeadm := raw(t, `{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta2","kind":"KubeadmConfigTemplate","spec":{"template":{"spec":{}}}}`)

	for _, tc := range []struct {
		name             string
		current, desired runtimehooksv1.CanUpdateMachineSetRequestObjects
		inPlace          bool
	}{{
		name:    "new Kubernetes version",
		current: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.36.4"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: talosTemplate(`[]`)},
		desired: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.37.2"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: talosTemplate(`[]`)},
		inPlace: true,
	}, {
		name:    "new TalosConfigTemplate spec",
		current: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.37.2"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: talosTemplate(`[]`)},
		desired: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.37.2"), InfrastructureMachineTemplate: dockerTemplate("sim"),
			BootstrapConfigTemplate: talosTemplate(`[{"op":"add","path":"/machine/sysctls","value":{"vm.max_map_count":"262144"}}]`)},
		inPlace: true,
	}, {
		name:    "new infrastructure spec",
		current: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.36.4"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: talosTemplate(`[]`)},
		desired: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.37.2"), InfrastructureMachineTemplate: dockerTemplate("sim:2"), BootstrapConfigTemplate: talosTemplate(`[]`)},
	}, {
		name:    "new Talos version (installed on the running node)",
		current: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.37.2"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: factory("v1.13.3")},
		desired: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.37.2"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: factory("v1.14.1")},
		inPlace: true,
	}, {
		name:    "the user's own config",
		current: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.36.4"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: talosTemplateOf(`"generateType":"none","data":"a"`)},
		desired: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.37.2"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: talosTemplateOf(`"generateType":"none","data":"a"`)},
	}, {
		name:    "another bootstrap provider",
		current: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.36.4"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: kubeadm},
		desired: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: machineSet("v1.37.2"), InfrastructureMachineTemplate: dockerTemplate("sim"), BootstrapConfigTemplate: kubeadm},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
			(&Reconciler{}).CanUpdateMachineSet(t.Context(), &runtimehooksv1.CanUpdateMachineSetRequest{Current: tc.current, Desired: tc.desired}, resp)
			if resp.GetStatus() != runtimehooksv1.ResponseStatusSuccess {
				t.Fatalf("Status %s: %s", resp.GetStatus(), resp.GetMessage())
			}
			// What Cluster API checks: the patched current objects' template specs equal the desired ones.
			ms := patched(t, mustJSON(t, tc.current.MachineSet), resp.MachineSetPatch)
			infra := patched(t, tc.current.InfrastructureMachineTemplate.Raw, resp.InfrastructureMachineTemplatePatch)
			bootstrap := patched(t, tc.current.BootstrapConfigTemplate.Raw, resp.BootstrapConfigTemplatePatch)
			covered := ms["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["version"] == tc.desired.MachineSet.Spec.Template.Spec.Version &&
				jsonEqual(t, infra["spec"], specOf(t, tc.desired.InfrastructureMachineTemplate)) &&
				jsonEqual(t, bootstrap["spec"], specOf(t, tc.desired.BootstrapConfigTemplate))
			if covered != tc.inPlace {
				t.Errorf("The answer covers the change: %t, want %t (message %q)", covered, tc.inPlace, resp.GetMessage())
			}
			if !tc.inPlace && resp.GetMessage() == "" {
				t.Errorf("A refusal says why")
			}
		})
	}
}

func raw(t *testing.T, s string) runtime.RawExtension {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: mustJSON(t, v)}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// patched applies a hook answer's JSON patch to doc, as Cluster API does.
func patched(t *testing.T, doc []byte, p runtimehooksv1.Patch) map[string]any {
	t.Helper()
	if p.IsDefined() {
		if p.PatchType != runtimehooksv1.JSONPatchType {
			t.Fatalf("Patch type %s", p.PatchType)
		}
		decoded, err := jsonpatch.DecodePatch(p.Patch)
		if err != nil {
			t.Fatal(err)
		}
		if doc, err = decoded.Apply(doc); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]any{}
	if err := json.Unmarshal(doc, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func specOf(t *testing.T, r runtime.RawExtension) any {
	t.Helper()
	return patched(t, r.Raw, runtimehooksv1.Patch{})["spec"]
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	return bytes.Equal(mustJSON(t, a), mustJSON(t, b))
}
