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

package bootservice

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// requests counts the boot service's requests, on the manager's metrics endpoint.
var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "talon_boot_service_requests_total",
	Help: "Requests to the boot service by protocol (dhcp, tftp, http), what was asked for " +
		"(dhcp: the message type; tftp: file; http: script, config, asset, other) and outcome " +
		"(dhcp: answered, ignored, failed; tftp: sent, not_found, failed; http: the status code).",
}, []string{"protocol", "request", "outcome"})

func init() {
	metrics.Registry.MustRegister(requests)
}

// countRequest counts one request.
func countRequest(protocol, request, outcome string) {
	requests.WithLabelValues(protocol, request, outcome).Inc()
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// countHTTP counts each request mux serves by what its route serves and the status code.
func countHTTP(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		recorder := &statusRecorder{ResponseWriter: w}
		mux.ServeHTTP(recorder, r)
		_, pattern := mux.Handler(r)
		request := map[string]string{
			"GET /ipxe": "script", "GET /ipxe/{mac}": "script", "GET /config/{token}": "config", "GET /assets/{name...}": "asset",
		}[pattern]
		if request == "" {
			request = "other"
		}
		status := recorder.status
		if status == 0 {
			status = http.StatusOK
		}
		countRequest("http", request, strconv.Itoa(status))
	})
}
