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

package talosetcdbackup

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The backup metrics, by namespace and cluster, on the manager's metrics endpoint.
var (
	lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "talon_etcd_backup_last_success_timestamp_seconds",
		Help: "When the last etcd backup of a cluster that succeeded completed (Unix seconds).",
	}, []string{"namespace", "cluster"})
	lastDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "talon_etcd_backup_last_duration_seconds",
		Help: "How long the last successful etcd backup of a cluster took to stream to the store.",
	}, []string{"namespace", "cluster"})
	lastSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "talon_etcd_backup_last_size_bytes",
		Help: "Size in the store of the last successful etcd backup of a cluster.",
	}, []string{"namespace", "cluster"})
	failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "talon_etcd_backup_failures_total",
		Help: "etcd backup attempts that failed, by the reason in the backup's Ready condition.",
	}, []string{"namespace", "cluster", "reason"})
)

func init() {
	metrics.Registry.MustRegister(lastSuccess, lastDuration, lastSize, failures)
}
