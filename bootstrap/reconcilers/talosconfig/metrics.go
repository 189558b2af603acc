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

package talosconfig

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// renderDuration is how long rendering a machine config takes, on the manager's metrics
// endpoint.
var renderDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: "talon_bootstrap_config_render_duration_seconds",
	Help: "How long rendering and validating a Machine's Talos config took, by outcome: rendered or invalid.",
	// From a millisecond to about four seconds.
	Buckets: prometheus.ExponentialBuckets(0.001, 2, 13),
}, []string{"outcome"})

func init() {
	metrics.Registry.MustRegister(renderDuration)
}
