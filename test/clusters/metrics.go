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
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"testing"

	. "github.com/onsi/gomega" //nolint:staticcheck // the assertions read as the tests' do
	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talon-capi/talon/internal/plane"
	testmetrics "github.com/talon-capi/talon/test/metrics"
)

// scraper is the ServiceAccount, in the default namespace, whose token ScrapeManager shows:
// its ClusterRole lets it get /metrics, as a Prometheus server's would.
const scraper = "talon-test-metrics-scraper"

// metricsPort is the managers' diagnostics port (--diagnostics-address=:8443).
const metricsPort = "8443"

// ScrapeManager reads the /metrics of the manager in namespace ns as Prometheus would: over
// HTTPS on its Pod's metrics port, with the token of a ServiceAccount allowed to get
// /metrics, which the manager has the API server authenticate and authorise.
func ScrapeManager(t *testing.T, p *plane.Plane, ns string) []*dto.MetricFamily {
	t.Helper()
	ctx, g := t.Context(), NewWithT(t)
	clientset, err := clientsetOf(p)
	g.Expect(err).NotTo(HaveOccurred())
	token, err := scraperToken(ctx, clientset)
	g.Expect(err).NotTo(HaveOccurred())
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).To(HaveLen(1), "one manager Pod in %s", ns)
	pod := pods.Items[0]
	g.Expect(pod.Status.PodIP).NotTo(BeEmpty(), "Pod %s/%s has an address", ns, pod.Name)

	url := "https://" + net.JoinHostPort(pod.Status.PodIP, metricsPort) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	// The manager serves metrics with a certificate it made itself, as controller-runtime
	// does without one given; Prometheus is told to skip its verification the same way.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	resp, err := c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close() //nolint:errcheck // read to the end below
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s", url)
	families, err := testmetrics.Parse(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return families
}

// scraperToken makes the scraper's ServiceAccount and role where they are missing and
// returns a token of it.
func scraperToken(ctx context.Context, clientset *kubernetes.Clientset) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scraper, Namespace: metav1.NamespaceDefault}}
	if _, err := clientset.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: scraper},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := clientset.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: scraper},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: scraper},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraper, Namespace: sa.Namespace}}}
	if _, err := clientset.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	token, err := clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, scraper, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to get a token of ServiceAccount %s: %w", scraper, err)
	}
	return token.Status.Token, nil
}
