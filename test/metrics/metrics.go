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

// Package metrics reads Prometheus metrics in tests: from a manager's /metrics text, or from
// the registry a manager in the test process serves.
package metrics

import (
	"fmt"
	"io"
	"maps"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse reads metrics in Prometheus' text format, as /metrics serves them.
func Parse(r io.Reader) ([]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return slicesOf(byName), nil
}

func slicesOf(byName map[string]*dto.MetricFamily) []*dto.MetricFamily {
	families := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		families = append(families, f)
	}
	return families
}

// Value is the value of the series name with exactly labels: a gauge's or a counter's value,
// a histogram's count (its _count series); an error when there is no such series.
func Value(families []*dto.MetricFamily, name string, labels map[string]string) (float64, error) {
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
		for _, m := range family.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount()), nil
			}
		}
	}
	return 0, fmt.Errorf("no series %s%v", name, labels)
}
