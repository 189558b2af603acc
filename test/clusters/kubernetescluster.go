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

package clusters

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega" //nolint:staticcheck // the assertions read as the tests' do
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
)

// WaitKubernetesClusterRunning waits for the KubernetesCluster to be Running at version
// with the ready nodes of scales (by pool name; "" is the control plane), and checks its
// status says so.
func WaitKubernetesClusterRunning(t *testing.T, c client.Client, kc *vitiv1.KubernetesCluster, version string, scales map[string]int32) {
	t.Helper()
	var last string
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(kc), kc)).To(Succeed())
		last = kc.Status.Phase + ": " + kc.Status.Message
		g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
		g.Expect(kc.Status.Phase).To(Equal(vitiv1.PhaseRunning))
		g.Expect(meta.IsStatusConditionTrue(kc.Status.Conditions, vitiv1.ReadyCondition)).To(BeTrue())
		g.Expect(kc.Status.State.Versions).To(Equal([]vitiv1.Version{{Name: "kubernetes", Version: version}}))
		state := kc.Status.State.Cluster
		g.Expect(state.ControlPlane.Scale).To(Equal(scales[""]))
		g.Expect(state.ControlPlane.Nodes).To(HaveLen(int(scales[""])))
		g.Expect(state.NodePools).To(HaveLen(len(scales) - 1))
		for _, p := range state.NodePools {
			g.Expect(p.Status).To(Equal(vitiv1.StatusOK), "pool %s", p.Name)
			g.Expect(p.Scale).To(Equal(scales[p.Name]), "pool %s", p.Name)
			g.Expect(p.Nodes).To(HaveLen(int(scales[p.Name])), "pool %s", p.Name)
		}
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), func() string { return "last status: " + last })
	if !strings.Contains(kc.Status.Message, version) {
		t.Errorf("the Running message does not name %s: %q", version, kc.Status.Message)
	}
}
