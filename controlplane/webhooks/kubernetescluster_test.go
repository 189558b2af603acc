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
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
	"github.com/talon-capi/talon/controlplane/webhooks"
)

// TestKubernetesClusterStaysMovable checks that a KubernetesCluster the webhook would refuse
// today (its version left Talos' window with a Talon upgrade) still takes the annotations
// the controller and clusterctl move write, so that it can be recorded, moved and deleted,
// while a change of what it asks for is checked.
func TestKubernetesClusterStaysMovable(t *testing.T) {
	g := NewWithT(t)
	old := &vitiv1.KubernetesCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "default"},
		Spec:       vitiv1.KubernetesClusterSpec{Topology: vitiv1.Topology{Version: "1.20", ControlPlane: vitiv1.ControlPlane{Replicas: 1}}},
	}
	w := &webhooks.KubernetesCluster{}
	_, err := w.ValidateCreate(t.Context(), old)
	g.Expect(err).To(MatchError(ContainSubstring("Kubernetes v1.20 is not supported")), "the version is refused today")

	for _, annotation := range []string{vitiv1.ClusterCreatedAnnotation, clusterctlv1.DeleteForMoveAnnotation, "example.com/owner"} {
		updated := old.DeepCopy()
		updated.Annotations = map[string]string{annotation: "x"}
		_, err := w.ValidateUpdate(t.Context(), old, updated)
		g.Expect(err).NotTo(HaveOccurred(), "annotation %s", annotation)
	}
	// clusterctl move, deleting the KubernetesCluster it copied, replaces every annotation
	// with its own.
	annotated := old.DeepCopy()
	annotated.Annotations = map[string]string{vitiv1.VariablesAnnotation: "{}", vitiv1.ClusterClassAnnotation: "talos-docker"}
	moving := old.DeepCopy()
	moving.Annotations = map[string]string{clusterctlv1.DeleteForMoveAnnotation: ""}
	_, err = w.ValidateUpdate(t.Context(), annotated, moving)
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl move's patch")

	for _, annotation := range []string{vitiv1.VariablesAnnotation, vitiv1.ClusterClassAnnotation} {
		updated := old.DeepCopy()
		updated.Annotations = map[string]string{annotation: "{}"}
		_, err := w.ValidateUpdate(t.Context(), old, updated)
		g.Expect(err).To(MatchError(ContainSubstring("Kubernetes v1.20 is not supported")), "annotation %s is checked", annotation)
	}
}
