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
	"errors"
	"fmt"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation"
)

// RandomPlaceholder is the part of a machineNaming template that makes names unique.
const RandomPlaceholder = "{{ .random }}"

// MachineName renders a machineNaming.template for a control plane tcpName of Cluster
// clusterName with random as {{ .random }}. The name must be a DNS label: Nodes, and etcd
// members, are named after their Machines.
func MachineName(tmpl, clusterName, tcpName, random string) (string, error) {
	if !strings.Contains(tmpl, RandomPlaceholder) {
		return "", fmt.Errorf("the template must contain %s, so that every Machine gets a name of its own", RandomPlaceholder)
	}
	t, err := template.New("machineNaming").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", fmt.Errorf("the template does not parse: %w", err)
	}
	var b strings.Builder
	data := map[string]any{
		"cluster":           map[string]string{"name": clusterName},
		"talosControlPlane": map[string]string{"name": tcpName},
		"random":            random,
	}
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("the template cannot be rendered (it may use {{ .cluster.name }}, {{ .talosControlPlane.name }} and {{ .random }}): %w", err)
	}
	name := b.String()
	if problems := validation.IsDNS1123Label(name); len(problems) > 0 {
		return "", errors.New("the template renders " + fmt.Sprintf("%q", name) + ", not a DNS label: " + strings.Join(problems, "; "))
	}
	return name, nil
}
