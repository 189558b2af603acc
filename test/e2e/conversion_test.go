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

package e2e

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/test/clusters"
)

// sideroObjects are a TalosConfigTemplate and a TalosControlPlane as Sidero's CABPT and
// CACPPT write them (v1alpha3), status included.
const sideroObjects = `
apiVersion: bootstrap.cluster.x-k8s.io/v1alpha3
kind: TalosConfigTemplate
metadata:
  name: old-workers
  namespace: default
spec:
  template:
    spec:
      generateType: join
      talosVersion: v1.13
      configPatches:
      - op: add
        path: /machine/kubelet/extraArgs
        value:
          v: "2"
---
apiVersion: controlplane.cluster.x-k8s.io/v1alpha3
kind: TalosControlPlane
metadata:
  name: old-control-plane
  namespace: default
spec:
  replicas: 3
  version: v1.36.3
  infrastructureTemplate:
    apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
    kind: TalosDockerMachineTemplate
    name: old-control-plane
  controlPlaneConfig:
    controlplane:
      generateType: controlplane
      talosVersion: v1.13
  rolloutStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
`

// TestServesSideroAPIVersions: Talon's CRDs, installed by clusterctl from the release
// manifests, serve Sidero's v1alpha3 through the managers' conversion webhooks: objects
// written as CABPT and CACPPT write them read as Talon's v1beta1, and read back as v1alpha3
// unchanged. The webhooks run in the managers' Pods, their CA injected by cert-manager.
func TestServesSideroAPIVersions(t *testing.T) {
	s := newDockerSuite(t)
	ctx, g := t.Context(), s.g
	p := s.podsPlane("conversion-plane")
	mgmt := s.client(p.Kubeconfig())

	objs, err := utilyaml.ToUnstructured([]byte(sideroObjects))
	g.Expect(err).NotTo(HaveOccurred())
	for i := range objs {
		g.Expect(mgmt.Create(ctx, objs[i].DeepCopy())).To(Succeed(), "create %s %s", objs[i].GetKind(), objs[i].GetName())
	}

	t.Log("They read as Talon's v1beta1 kinds")
	tmpl := &bootstrapv1.TalosConfigTemplate{}
	g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: "default", Name: "old-workers"}, tmpl)).To(Succeed())
	g.Expect(tmpl.Spec.Template.Spec.GenerateType).To(Equal(bootstrapv1.GenerateTypeWorker))
	g.Expect(tmpl.Spec.Template.Spec.ConfigPatches).To(HaveLen(1))
	tcp := &controlplanev1.TalosControlPlane{}
	g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: "default", Name: "old-control-plane"}, tcp)).To(Succeed())
	g.Expect(ptr.Deref(tcp.Spec.Replicas, 0)).To(BeEquivalentTo(3))
	g.Expect(tcp.Spec.MachineTemplate.Spec.InfrastructureRef.APIGroup).To(Equal("infrastructure.cluster.x-k8s.io"))
	g.Expect(tcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name).To(Equal("old-control-plane"))
	g.Expect(tcp.Spec.ControlPlaneConfig.GenerateType).To(Equal(bootstrapv1.GenerateTypeControlPlane))

	t.Log("And back as v1alpha3, as they were written")
	for _, want := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(&want), got)).To(Succeed())
		gotSpec, err := json.Marshal(got.Object["spec"])
		g.Expect(err).NotTo(HaveOccurred())
		wantSpec, err := json.Marshal(want.Object["spec"])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gotSpec).To(MatchJSON(wantSpec), "%s %s read as v1alpha3", want.GetKind(), want.GetName())
	}
	clusters.ExpectNoRefusals(t, p)
}
