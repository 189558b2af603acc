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
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// TestLivenessTimeoutsOnly: a manager the kubelet restarted because its liveness probe timed
// out is told apart from one that crashed or whose health check failed, from the events the
// kubelet writes (their wording as kubelet 1.36's prober and kuberuntime write them).
func TestLivenessTimeoutsOnly(t *testing.T) {
	event := func(reason, message string) corev1.Event { return corev1.Event{Reason: reason, Message: message} }
	timeout := event("Unhealthy", `Liveness probe failed: Get "http://172.17.0.5:9440/healthz": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`)
	refused := event("Unhealthy", `Liveness probe failed: Get "http://172.17.0.5:9440/healthz": dial tcp 172.17.0.5:9440: connect: connection refused`)
	failing := event("Unhealthy", `Liveness probe failed: HTTP probe failed with statuscode: 500`)
	killing := event("Killing", "Container manager failed liveness probe, will be restarted")
	started := event("Started", "Started container manager")
	for _, tc := range []struct {
		name   string
		events []corev1.Event
		log    string
		want   bool
	}{
		{"killed after timeouts", []corev1.Event{timeout, killing, refused, started}, "I1202 reconciling\n", true},
		{"killed after its health check failed", []corev1.Event{failing, timeout, killing}, "", false},
		{"crashed", []corev1.Event{started}, "panic: runtime error: invalid memory address\n", false},
		{"killed after timeouts, but its log shows a crash", []corev1.Event{timeout, killing}, "fatal error: concurrent map writes\n", false},
		{"timeouts without a kill", []corev1.Event{timeout, started}, "", false},
		{"killed after refused connections only", []corev1.Event{refused, killing}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(livenessTimeoutsOnly(tc.events, tc.log)).To(Equal(tc.want))
		})
	}
}
