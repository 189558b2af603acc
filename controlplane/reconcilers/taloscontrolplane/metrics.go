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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
)

// The operations whose durations talon_control_plane_operation_duration_seconds records.
const (
	// operationBootstrap: from the first control-plane Machine's creation to etcd bootstrapped
	// on its node.
	operationBootstrap = "bootstrap"
	// operationScaleUp and operationScaleDown: how long the ScalingUp or ScalingDown
	// condition was true.
	operationScaleUp   = "scale_up"
	operationScaleDown = "scale_down"
	// operationRollout: how long the RollingOut condition was true.
	operationRollout = "rollout"
	// operationRemediation: from the Machine health check marking a Machine for remediation
	// to Talon deleting it.
	operationRemediation = "remediation"
	// operationInPlaceUpdate: from the start of a node's in-place update to its end.
	operationInPlaceUpdate = "in_place_update"
)

// The control plane's metrics, on the manager's metrics endpoint.
var (
	etcdMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "talon_control_plane_etcd_members",
		Help: "etcd members of a cluster, voters and learners, as the control-plane nodes report them.",
	}, []string{"namespace", "cluster"})
	etcdHealthyMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "talon_control_plane_etcd_healthy_members",
		Help: "etcd members of a cluster that answer as healthy.",
	}, []string{"namespace", "cluster"})
	etcdQuorum = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "talon_control_plane_etcd_quorum",
		Help: "1 when a cluster's healthy etcd voters are a quorum, 0 when they are not.",
	}, []string{"namespace", "cluster"})
	operationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "talon_control_plane_operation_duration_seconds",
		Help: "How long control-plane operations took, by operation: bootstrap, scale_up, scale_down, rollout, remediation, in_place_update.",
		// From one second to about an hour.
		Buckets: prometheus.ExponentialBuckets(1, 2, 13),
	}, []string{"operation"})
)

func init() {
	metrics.Registry.MustRegister(etcdMembers, etcdHealthyMembers, etcdQuorum, operationDuration)
}

// observeOperation records that operation took from since until now.
func observeOperation(operation string, since time.Time) {
	if !since.IsZero() {
		operationDuration.WithLabelValues(operation).Observe(time.Since(since).Seconds())
	}
}

// operationConditions are the conditions whose true spans are operations.
var operationConditions = map[string]string{
	controlplanev1.ScalingUpCondition:   operationScaleUp,
	controlplanev1.ScalingDownCondition: operationScaleDown,
	controlplanev1.RollingOutCondition:  operationRollout,
}

// conditionsTrueSince are when each of the operation conditions turned true, for those that are.
func conditionsTrueSince(tcp *controlplanev1.TalosControlPlane) map[string]metav1.Time {
	since := map[string]metav1.Time{}
	for conditionType := range operationConditions {
		if c := conditions.Get(tcp, conditionType); c != nil && c.Status == metav1.ConditionTrue {
			since[conditionType] = c.LastTransitionTime
		}
	}
	return since
}

// observeEndedOperations records the operations whose conditions were true before (when they
// turned true) and are no longer.
func observeEndedOperations(tcp *controlplanev1.TalosControlPlane, before map[string]metav1.Time) {
	for conditionType, since := range before {
		if !conditions.IsTrue(tcp, conditionType) {
			observeOperation(operationConditions[conditionType], since.Time)
		}
	}
}

// recordEtcdMetrics sets the etcd gauges of the cluster from what its nodes report; it leaves
// them as they were when no node answers.
func recordEtcdMetrics(s *scope) {
	if s.etcd == nil {
		return
	}
	healthy := 0
	for _, m := range s.etcd.members {
		if s.etcd.healthy[m.ID] {
			healthy++
		}
	}
	quorum := 0.0
	if s.hasQuorum() {
		quorum = 1
	}
	ns, cluster := s.cluster.Namespace, s.cluster.Name
	etcdMembers.WithLabelValues(ns, cluster).Set(float64(len(s.etcd.members)))
	etcdHealthyMembers.WithLabelValues(ns, cluster).Set(float64(healthy))
	etcdQuorum.WithLabelValues(ns, cluster).Set(quorum)
}

// forgetEtcdMetrics removes a deleted cluster's etcd series.
func forgetEtcdMetrics(namespace, cluster string) {
	for _, g := range []*prometheus.GaugeVec{etcdMembers, etcdHealthyMembers, etcdQuorum} {
		g.DeleteLabelValues(namespace, cluster)
	}
}
