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

package envtest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // Cluster API's Cluster webhook converts from it
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Where Cluster API's manager serves its Cluster webhooks (its +kubebuilder:webhook markers).
const (
	clusterMutatingPath   = "/mutate-cluster-x-k8s-io-v1beta2-cluster"
	clusterValidatingPath = "/validate-cluster-x-k8s-io-v1beta2-cluster"
)

// withScheme is a manager whose scheme is another one.
type withScheme struct {
	ctrl.Manager
	scheme *runtime.Scheme
}

func (m withScheme) GetScheme() *runtime.Scheme { return m.scheme }

// clusterWebhookManager is mgr as Cluster API's Cluster webhooks are set up with: their
// conversion needs Cluster API's v1beta1 types in the scheme, which the test scheme leaves
// out (Talon reads no v1beta1 object).
func clusterWebhookManager(mgr ctrl.Manager) ctrl.Manager {
	scheme := runtime.NewScheme()
	utilruntime.Must(clusterv1.AddToScheme(scheme))
	utilruntime.Must(clusterv1beta1.AddToScheme(scheme))
	return withScheme{Manager: mgr, scheme: scheme}
}

// installClusterWebhooks registers Cluster API's Cluster webhooks, served by a test manager,
// with the API server for the Clusters of namespace, until the test ends. They are scoped to
// one namespace because only the manager that serves them answers: Clusters of tests whose
// managers do not would be refused.
func (e *Environment) installClusterWebhooks(tb testing.TB, namespace string) {
	tb.Helper()
	host, port, _ := e.WebhookServing()
	url := func(path string) *string {
		return ptr.To("https://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	}
	scope := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}}
	rule := func(operations ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: operations,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{clusterv1.GroupVersion.Group}, APIVersions: []string{clusterv1.GroupVersion.Version},
				Resources: []string{"clusters"},
			},
		}}
	}
	name := "capi-cluster-" + namespace
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "default.cluster.cluster.x-k8s.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: url(clusterMutatingPath), CABundle: e.WebhookCA()},
			Rules:                   rule(admissionregistrationv1.Create, admissionregistrationv1.Update),
			NamespaceSelector:       scope,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validation.cluster.cluster.x-k8s.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: url(clusterValidatingPath), CABundle: e.WebhookCA()},
			Rules:                   rule(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete),
			NamespaceSelector:       scope,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, mutating); err != nil {
		tb.Fatalf("Failed to register Cluster API's Cluster defaulting webhook: %v", err)
	}
	if err := e.Client.Create(ctx, validating); err != nil {
		tb.Fatalf("Failed to register Cluster API's Cluster validating webhook: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, err := range []error{e.Client.Delete(ctx, mutating), e.Client.Delete(ctx, validating)} {
			if err != nil {
				tb.Logf("Failed to remove Cluster API's Cluster webhooks of namespace %s: %v", namespace, err)
			}
		}
	})
	// The API server takes new webhook configurations up asynchronously: wait until the
	// validating webhook refuses a Cluster with nothing to build, as only it does.
	probe := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe", Namespace: namespace},
		Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}}}
	for {
		err := e.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set") {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("Cluster API's Cluster webhooks were not called within 30s (last answer: %v)", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
