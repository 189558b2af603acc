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
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega" //nolint:staticcheck // the assertions read as the tests' do
	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/test/envtest"
	testmetrics "github.com/talon-capi/talon/test/metrics"
)

// scraper is the ServiceAccount, in the default namespace, whose token ScrapeManager shows:
// it is bound to out/monitoring.yaml's talon-metrics-reader, as a Prometheus server's would be.
const scraper = "talon-test-metrics-scraper"

// ScrapeManager reads the /metrics of the manager in namespace ns as a Prometheus server set
// up by docs/managers.md would: at the endpoint of the metrics Service of out/monitoring.yaml (applied
// here without its ServiceMonitors, whose CRD the plane lacks), over HTTPS, with the token of
// a ServiceAccount bound to that file's talon-metrics-reader ClusterRole, which the manager
// has the API server authenticate and authorise.
func ScrapeManager(t *testing.T, p *plane.Plane, ns string) []*dto.MetricFamily {
	t.Helper()
	ctx, g := t.Context(), NewWithT(t)
	c, err := p.Client(client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "out", "monitoring.yaml"))
	g.Expect(err).NotTo(HaveOccurred(), "run 'make release-manifests' first")
	objs, err := utilyaml.ToUnstructured(raw)
	g.Expect(err).NotTo(HaveOccurred())
	objs = slices.DeleteFunc(objs, func(o unstructured.Unstructured) bool { return o.GetKind() == "ServiceMonitor" })
	ApplyObjects(ctx, g, c, objs, "talon-test")

	clientset, err := clientsetOf(p)
	g.Expect(err).NotTo(HaveOccurred())
	token, err := scraperToken(ctx, clientset)
	g.Expect(err).NotTo(HaveOccurred())
	services, err := clientset.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: "talon.dev/metrics"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(services.Items).To(HaveLen(1), "one metrics Service in %s", ns)
	svc := services.Items[0]

	// The manager serves metrics with a certificate it made itself, as controller-runtime
	// does without one given; the ServiceMonitor tells Prometheus to skip its verification.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	var families []*dto.MetricFamily
	// Prometheus scrapes what a ServiceMonitor's Service resolves to: each ready endpoint's
	// address at the port the Service's named target port found in the Pod. The endpoint
	// controller lists them a moment after the Service is made.
	g.Eventually(func() error {
		endpointSlices, err := clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			return err
		}
		var url string
		for _, es := range endpointSlices.Items {
			for _, port := range es.Ports {
				if ptr.Deref(port.Name, "") != svc.Spec.Ports[0].Name || port.Port == nil {
					continue
				}
				for _, e := range es.Endpoints {
					if ptr.Deref(e.Conditions.Ready, false) && len(e.Addresses) > 0 {
						url = "https://" + net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(*port.Port))) + "/metrics"
					}
				}
			}
		}
		if url == "" {
			return fmt.Errorf("service %s/%s has no ready endpoint at port %s", ns, svc.Name, svc.Spec.Ports[0].Name)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close() //nolint:errcheck // read to the end below
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		families, err = testmetrics.Parse(resp.Body)
		return err
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return families
}

// scraperToken makes the scraper's ServiceAccount and its binding to talon-metrics-reader
// where they are missing and returns a token of it.
func scraperToken(ctx context.Context, clientset *kubernetes.Clientset) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scraper, Namespace: metav1.NamespaceDefault}}
	if _, err := clientset.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: scraper},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "talon-metrics-reader"},
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
