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
			NewWithT(t).Expect(starvedRestart(tc.events, tc.log)).To(Equal(tc.want))
		})
	}
}

// TestLeaseRenewalTimedOut: a manager that exited because it could not renew its leader
// lease in time (the lines of Cluster API v1.14's core manager on a busy machine) is told
// apart from one that lost its lease otherwise or crashed after.
func TestLeaseRenewalTimedOut(t *testing.T) {
	const (
		update = `E1202 15:36:15.433492       1 leaderelection.go:497] "Failed to update lease" err="client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline" lock="capi-system/controller-leader-election-capi"` + "\n"
		renew  = `I1202 15:36:15.566817       1 leaderelection.go:304] "Failed to renew lease" lock="capi-system/controller-leader-election-capi" err="context deadline exceeded"` + "\n"
		lost   = `E1202 15:36:15.588374       1 main.go:415] "Problem running manager" err="leader election lost" logger="setup"` + "\n"
		work   = `I1202 15:35:50.727342       1 machine_controller_phases.go:315] "Waiting for infrastructure provider"` + "\n"
	)
	for _, tc := range []struct {
		name string
		log  string
		want bool
	}{
		{"renewal ran past its deadline", work + update + renew + lost, true},
		{"lost without a late renewal", work + lost, false},
		{"a late renewal, but it went on", work + renew + work, false},
		{"a late renewal, then a crash", work + renew + lost + "panic: runtime error: index out of range\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(starvedRestart(nil, tc.log)).To(Equal(tc.want))
		})
	}
}
