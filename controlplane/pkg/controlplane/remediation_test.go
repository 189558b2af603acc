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

package controlplane

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
)

func TestNextRemediation(t *testing.T) {
	hour := time.Hour
	policy := RetryPolicy{MaxRetry: ptr.To(2), RetryPeriod: 10 * time.Minute, MinHealthyPeriod: hour}
	cases := []struct {
		name     string
		previous *Remediation
		now      time.Time
		retry    int
		deferred string
		refused  string
	}{
		{name: "not a replacement: a new series", previous: nil, now: t0, retry: 0},
		{name: "replacement healthy for longer than minHealthyPeriod: a new series", previous: &Remediation{Machine: "old", Timestamp: t0, RetryCount: 2}, now: t0.Add(2 * hour), retry: 0},
		{name: "replacement failed again after the retry period: a retry", previous: &Remediation{Machine: "old", Timestamp: t0, RetryCount: 0}, now: t0.Add(20 * time.Minute), retry: 1},
		{name: "within the retry period: deferred", previous: &Remediation{Machine: "old", Timestamp: t0}, now: t0.Add(time.Minute),
			deferred: "the remediation of Machine old, which this Machine replaced, started less than retryPeriodSeconds (10m0s) ago"},
		{name: "maxRetry reached: refused", previous: &Remediation{Machine: "old", Timestamp: t0, RetryCount: 2}, now: t0.Add(20 * time.Minute),
			refused: "remediation.maxRetry (2) is reached: this Machine replaces one remediated within minHealthyPeriodSeconds, after 2 retries"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			next, deferred, refused := policy.NextRemediation("m", tc.previous, tc.now)
			g.Expect(deferred).To(Equal(tc.deferred))
			if tc.refused == "" {
				g.Expect(refused).To(BeEmpty())
			} else {
				g.Expect(refused).To(ContainSubstring(tc.refused))
			}
			if tc.deferred == "" && tc.refused == "" {
				g.Expect(next).To(Equal(Remediation{Machine: "m", Timestamp: tc.now, RetryCount: tc.retry}))
			}
		})
	}
	r, err := ParseRemediation(Remediation{Machine: "m", Timestamp: t0, RetryCount: 3}.Marshal())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(r).To(Equal(Remediation{Machine: "m", Timestamp: t0, RetryCount: 3}))
	_, err = ParseRemediation("{")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("failed to read remediation record")))
}

func TestPickForRemediation(t *testing.T) {
	healthy := [4]bool{true, true, true, true}
	cases := []struct {
		name       string
		candidates []Candidate
		want       string
	}{
		{"asked for first", []Candidate{{Name: "a", HasNode: true, Created: t0}, {Name: "b", Requested: true, HasNode: true, Healthy: healthy, Created: t0.Add(time.Hour)}}, "b"},
		{"then without a Node", []Candidate{{Name: "a", HasNode: true, Created: t0}, {Name: "b", Created: t0.Add(time.Hour)}}, "b"},
		{"then an unhealthy etcd member", []Candidate{
			{Name: "a", HasNode: true, Healthy: healthy, Created: t0},
			{Name: "b", HasNode: true, Healthy: [4]bool{false, true, true, true}, Created: t0.Add(time.Hour)},
		}, "b"},
		{"then the API server", []Candidate{
			{Name: "a", HasNode: true, Healthy: [4]bool{true, true, false, true}, Created: t0},
			{Name: "b", HasNode: true, Healthy: [4]bool{true, false, true, true}, Created: t0.Add(time.Hour)},
		}, "b"},
		{"then the oldest", []Candidate{{Name: "new", HasNode: true, Created: t0.Add(time.Hour)}, {Name: "old", HasNode: true, Created: t0}}, "old"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			picked, ok := PickForRemediation(tc.candidates)
			g.Expect(ok).To(BeTrue())
			g.Expect(picked.Name).To(Equal(tc.want))
		})
	}
	_, ok := PickForRemediation(nil)
	NewWithT(t).Expect(ok).To(BeFalse())
}
