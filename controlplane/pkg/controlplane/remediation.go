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
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Remediation records one remediation: the Machine deleted, when, and how many
// remediations in a row came before it. It is kept as JSON in annotations.
type Remediation struct {
	Machine    string    `json:"machine"`
	Timestamp  time.Time `json:"timestamp"`
	RetryCount int       `json:"retryCount"`
}

// Marshal writes r for an annotation.
func (r Remediation) Marshal() string {
	data, _ := json.Marshal(r) //nolint:errchkjson // a plain struct always marshals
	return string(data)
}

// ParseRemediation reads a Remediation from an annotation.
func ParseRemediation(value string) (Remediation, error) {
	var r Remediation
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return Remediation{}, fmt.Errorf("failed to read remediation record %q: %w", value, err)
	}
	return r, nil
}

// RetryPolicy is remediation's spec with its defaults applied.
type RetryPolicy struct {
	// MaxRetry is the most remediations in a row; nil for no limit.
	MaxRetry *int
	// RetryPeriod is how long after a remediation its replacement may be remediated.
	RetryPeriod time.Duration
	// MinHealthyPeriod is how long a replacement must stay healthy for its remediation to
	// start a new series.
	MinHealthyPeriod time.Duration
}

// NextRemediation decides whether the Machine named machine, created by the remediation
// previous (nil when it was not created by one), may be remediated at now. It returns the
// record of the new remediation, or why it may not happen yet (deferred) or at all.
func (p RetryPolicy) NextRemediation(machine string, previous *Remediation, now time.Time) (next Remediation, deferred, refused string) {
	next = Remediation{Machine: machine, Timestamp: now}
	if previous == nil || !previous.Timestamp.Add(p.MinHealthyPeriod).After(now) {
		// Not a replacement, or one that stayed healthy long enough: a new series.
		return next, "", ""
	}
	next.RetryCount = previous.RetryCount
	if previous.Timestamp.Add(p.RetryPeriod).After(now) {
		return next, fmt.Sprintf("the remediation of Machine %s, which this Machine replaced, started less than retryPeriodSeconds (%s) ago", previous.Machine, p.RetryPeriod), ""
	}
	if p.MaxRetry != nil && next.RetryCount >= *p.MaxRetry {
		return next, "", fmt.Sprintf("remediation.maxRetry (%d) is reached: this Machine replaces one remediated within minHealthyPeriodSeconds, after %d retries; replace it by hand, or raise maxRetry", *p.MaxRetry, next.RetryCount)
	}
	next.RetryCount++
	return next, "", ""
}

// Candidate is an unhealthy Machine as the choice of which to remediate first sees it.
type Candidate struct {
	Name string
	// Requested is true when the Machine carries Cluster API's remediate-machine annotation.
	Requested bool
	// HasNode is true once the Machine has a Node.
	HasNode bool
	// Healthy are the Machine's health conditions in the order they count: etcd member,
	// kube-apiserver, kube-controller-manager, kube-scheduler; true when the condition is.
	Healthy [4]bool
	Created time.Time
}

// PickForRemediation chooses the Machine to remediate first, as KubeadmControlPlane does:
// one a person asked to remediate, then one without a Node, then one whose etcd member is
// unhealthy, then whose API server, controller manager or scheduler is, then the oldest.
func PickForRemediation(candidates []Candidate) (Candidate, bool) {
	if len(candidates) == 0 {
		return Candidate{}, false
	}
	return slices.MinFunc(candidates, func(a, b Candidate) int {
		order := make([]int, 0, len(a.Healthy)+4)
		order = append(order, -compareBool(a.Requested, b.Requested), compareBool(a.HasNode, b.HasNode))
		for i := range a.Healthy {
			order = append(order, compareBool(a.Healthy[i], b.Healthy[i]))
		}
		order = append(order, a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name))
		return cmp.Or(order...)
	}), true
}
