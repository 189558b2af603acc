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
	"path/filepath"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	testmetrics "github.com/talon-capi/talon/test/metrics"
)

// expectMetricsAndEvents checks, after the quick-start cluster was made, scaled to five
// workers and back and updated in place, what a Prometheus server scraping the managers and
// a person reading events see of it.
func (s *suite) expectMetricsAndEvents(mgmt client.Client) {
	ctx, g, t := s.t.Context(), s.g, s.t
	p, err := plane.Open(filepath.Join(s.out, quickstart.PlaneDirName), nil)
	g.Expect(err).NotTo(HaveOccurred())
	cluster := map[string]string{"namespace": "default", "cluster": "e2e"}
	t.Log("The control-plane manager's /metrics: the cluster's one etcd member, healthy, a quorum; its bootstrap, rollout and in-place updates timed")
	controlPlane := clusters.ScrapeManager(t, p, clusters.ControlPlaneNamespace)
	for name, want := range map[string]float64{
		"talon_control_plane_etcd_members": 1, "talon_control_plane_etcd_healthy_members": 1, "talon_control_plane_etcd_quorum": 1,
	} {
		g.Expect(testmetrics.Value(controlPlane, name, cluster)).To(Equal(want), name)
	}
	for operation, least := range map[string]float64{"bootstrap": 1, "rollout": 1, "in_place_update": 3} {
		g.Expect(testmetrics.Value(controlPlane, "talon_control_plane_operation_duration_seconds", map[string]string{"operation": operation})).
			To(BeNumerically(">=", least), "operations %s timed", operation)
	}

	t.Log("The bootstrap manager's /metrics: a render timed for each of the six Machines made and each config rewritten in place")
	bootstrap := clusters.ScrapeManager(t, p, "talon-bootstrap-system")
	g.Expect(testmetrics.Value(bootstrap, "talon_bootstrap_config_render_duration_seconds", map[string]string{"outcome": "rendered"})).
		To(BeNumerically(">=", 6+3))

	t.Log("Events say what each provider did: configs written, nodes created and deleted, the load balancer following the control plane, etcd bootstrapped, nodes updated in place")
	list := &corev1.EventList{}
	g.Expect(mgmt.List(ctx, list, client.InNamespace("default"))).To(Succeed())
	reasons := map[string]int{}
	for _, e := range list.Items {
		reasons[e.InvolvedObject.Kind+" "+e.Reason]++
	}
	g.Expect(reasons).To(And(
		HaveKeyWithValue("TalosConfig ConfigWritten", BeNumerically(">=", 6)),
		HaveKeyWithValue("TalosConfig ConfigRewritten", BeNumerically(">=", 3)),
		HaveKeyWithValue("TalosDockerMachine NodeCreated", BeNumerically(">=", 6)),
		HaveKeyWithValue("TalosDockerMachine NodeDeleted", BeNumerically(">=", 3)),
		HaveKey("TalosDockerCluster LoadBalancerBackendsChanged"),
		HaveKeyWithValue("TalosControlPlane Bootstrapped", 1),
		HaveKey("Machine InPlaceUpdated"),
	), "events by kind and reason: %v", reasons)
}
