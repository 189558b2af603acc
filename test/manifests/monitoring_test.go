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

package manifests

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/talon-capi/talon/test/envtest"
)

// managerDeployments reads the manager Deployment of each components file, by namespace.
func managerDeployments(t *testing.T) map[string]*appsv1.Deployment {
	t.Helper()
	deployments := map[string]*appsv1.Deployment{}
	for _, c := range components {
		for _, obj := range readComponents(t, c.file) {
			if obj.GetKind() != "Deployment" {
				continue
			}
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
				t.Fatalf("Deployment %s in %s: %v", obj.GetName(), c.file, err)
			}
			deployments[d.Namespace] = d
		}
	}
	return deployments
}

// containerPort is the port of the manager container named name, 0 when there is none.
func containerPort(d *appsv1.Deployment, name string) int32 {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
	}
	return 0
}

// TestMonitoringFindsTheManagers checks out/monitoring.yaml against the managers that
// clusterctl installs: each manager has a metrics Service that selects its Pod and targets
// its metrics port, and a ServiceMonitor that selects that Service and names its port. The
// objects other than the ServiceMonitors (whose CRD is the Prometheus Operator's) pass a
// server-side dry run.
func TestMonitoringFindsTheManagers(t *testing.T) {
	g := NewWithT(t)
	deployments := managerDeployments(t)
	g.Expect(deployments).To(HaveLen(3))
	objs := readComponents(t, "monitoring.yaml")
	services := map[string]*corev1.Service{}
	var monitors []unstructured.Unstructured
	readers := 0
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Service":
			s := &corev1.Service{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, s)).To(Succeed())
			services[s.Namespace] = s
		case "ServiceMonitor":
			monitors = append(monitors, obj)
		case "ClusterRole":
			readers++
			g.Expect(obj.Object["rules"]).To(ConsistOf(And(
				HaveKeyWithValue("nonResourceURLs", ConsistOf("/metrics")), HaveKeyWithValue("verbs", ConsistOf("get")))))
		}
	}
	g.Expect(readers).To(Equal(1), "one metrics-reader ClusterRole")
	g.Expect(services).To(HaveLen(len(deployments)), "a metrics Service per manager")
	for ns, d := range deployments {
		s := services[ns]
		g.Expect(s).NotTo(BeNil(), "a metrics Service in %s", ns)
		g.Expect(labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue(),
			"Service %s/%s selects the Pods of Deployment %s", ns, s.Name, d.Name)
		g.Expect(s.Spec.Ports).To(HaveLen(1))
		g.Expect(s.Spec.Ports[0].TargetPort).To(Equal(intstr.FromString("metrics")))
		g.Expect(containerPort(d, "metrics")).To(Equal(s.Spec.Ports[0].Port), "Deployment %s serves metrics on the Service's port", d.Name)
	}
	g.Expect(monitors).To(HaveLen(len(deployments)), "a ServiceMonitor per manager")
	for _, m := range monitors {
		s := services[m.GetNamespace()]
		g.Expect(s).NotTo(BeNil(), "ServiceMonitor %s/%s is beside a metrics Service", m.GetNamespace(), m.GetName())
		selector, _, _ := unstructured.NestedStringMap(m.Object, "spec", "selector", "matchLabels")
		g.Expect(labels.SelectorFromSet(selector).Matches(labels.Set(s.Labels))).To(BeTrue(), "ServiceMonitor %s selects Service %s", m.GetName(), s.Name)
		endpoints, _, _ := unstructured.NestedSlice(m.Object, "spec", "endpoints")
		g.Expect(endpoints).To(ConsistOf(And(HaveKeyWithValue("port", s.Spec.Ports[0].Name), HaveKeyWithValue("scheme", "https"))))
	}
	dryRun(t, objs)
}

// TestNetworkPoliciesLetTheManagersServe checks out/network-policies.yaml against the
// managers: each manager's Pod is selected by one policy that admits every port its
// container declares, the metrics port only from namespaces labelled for scraping.
func TestNetworkPoliciesLetTheManagersServe(t *testing.T) {
	g := NewWithT(t)
	deployments := managerDeployments(t)
	objs := readComponents(t, "network-policies.yaml")
	g.Expect(objs).To(HaveLen(len(deployments)), "a NetworkPolicy per manager")
	for _, obj := range objs {
		p := &networkingv1.NetworkPolicy{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, p)).To(Succeed())
		d := deployments[p.Namespace]
		g.Expect(d).NotTo(BeNil(), "NetworkPolicy %s/%s is beside a manager", p.Namespace, p.Name)
		selector, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(selector.Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue(), "NetworkPolicy %s selects the Pods of %s", p.Name, d.Name)
		g.Expect(p.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}), "egress stays open")
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, port := range c.Ports {
				var admitting []networkingv1.NetworkPolicyIngressRule
				for _, rule := range p.Spec.Ingress {
					if slices.ContainsFunc(rule.Ports, func(rp networkingv1.NetworkPolicyPort) bool {
						return rp.Port != nil && rp.Port.IntValue() == int(port.ContainerPort)
					}) {
						admitting = append(admitting, rule)
					}
				}
				g.Expect(admitting).To(HaveLen(1), "NetworkPolicy %s admits port %s (%d) of %s once", p.Name, port.Name, port.ContainerPort, d.Name)
				if port.Name == "metrics" {
					g.Expect(admitting[0].From).To(ConsistOf(HaveField("NamespaceSelector.MatchLabels", HaveKeyWithValue("talon.dev/metrics-scraper", "true"))),
						"metrics only from namespaces labelled for scraping")
				}
			}
		}
	}
	dryRun(t, objs)
}

// dryRun applies objs with a server-side dry run, in their namespaces, except the Prometheus
// Operator's ServiceMonitors, whose CRD the test plane lacks.
func dryRun(t *testing.T, objs []unstructured.Unstructured) {
	t.Helper()
	env := envtest.Get(t)
	g := NewWithT(t)
	ctx := t.Context()
	for i := range objs {
		obj := &objs[i]
		if obj.GetKind() == "ServiceMonitor" {
			continue
		}
		if ns := obj.GetNamespace(); ns != "" {
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("Failed to create namespace %s: %v", ns, err)
			}
		}
		err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.DryRunAll, client.ForceOwnership, client.FieldOwner("talon-test"))
		g.Expect(err).NotTo(HaveOccurred(), "server-side dry-run of %s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
	}
}
