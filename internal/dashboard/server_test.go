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

package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Run(m)) }

// createClusters creates n clusters as objects only (no controller runs): a Cluster, its
// TalosControlPlane, a MachineDeployment and a Machine for each node.
func createClusters(tb testing.TB, c client.Client, ns string, n int) {
	tb.Helper()
	ctx := tb.Context()
	for i := range n {
		name := fmt.Sprintf("c%04d", i)
		tcp := &controlplanev1.TalosControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-cp"}}
		tcp.Spec.Replicas = ptr.To[int32](1)
		tcp.Spec.Version = "v1.36.2"
		tcp.Spec.ControlPlaneConfig.GenerateType = bootstrapv1.GenerateTypeControlPlane
		tcp.Spec.MachineTemplate.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TalosDockerMachineTemplate", Name: name}
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		cluster.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "TalosControlPlane", Name: tcp.Name}
		cluster.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TalosDockerCluster", Name: name}
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-workers"}}
		md.Spec.ClusterName = name
		md.Spec.Replicas = ptr.To[int32](1)
		md.Spec.Selector.MatchLabels = map[string]string{"pool": name}
		md.Spec.Template.Labels = map[string]string{"pool": name}
		md.Spec.Template.Spec.ClusterName = name
		md.Spec.Template.Spec.Version = "v1.36.2"
		md.Spec.Template.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "TalosConfigTemplate", Name: name}
		md.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TalosDockerMachineTemplate", Name: name}
		objs := make([]client.Object, 0, 5)
		objs = append(objs, tcp, cluster, md)
		for j, role := range []string{"cp", "worker"} {
			m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%s-%d", name, role, j),
				Labels: map[string]string{clusterv1.ClusterNameLabel: name}}}
			if role == "cp" {
				m.Labels[clusterv1.MachineControlPlaneLabel] = ""
			} else {
				m.Labels[clusterv1.MachineDeploymentNameLabel] = md.Name
			}
			m.Spec.ClusterName = name
			m.Spec.Version = "v1.36.2"
			m.Spec.Bootstrap.DataSecretName = ptr.To(name)
			m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TalosDockerMachine", Name: m.Name}
			objs = append(objs, m)
		}
		for _, obj := range objs {
			if err := c.Create(ctx, obj); err != nil {
				tb.Fatalf("failed to create %T %s: %v", obj, obj.GetName(), err)
			}
		}
	}
}

// startServer runs a dashboard on the envtest plane and returns its URL and the page's token.
func startServer(tb testing.TB, env *envtest.Environment, ns string, readOnly bool) (string, string) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(tb.Context()))
	tb.Cleanup(cancel)
	s, err := New(ctx, Options{Config: env.Config, Scheme: env.Scheme, Namespace: ns, ReadOnly: readOnly, Log: testr.NewWithInterface(tb, testr.Options{})})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	return srv.URL, s.token
}

// TestActionsNeedTheTokenAndRespectReadOnly checks what stands between a request and the
// API server (the page's token, --read-only, the form's values, the host name) and the
// actions the browser test does not take: a backup now, a kubeconfig download.
func TestActionsNeedTheTokenAndRespectReadOnly(t *testing.T) {
	env := envtest.Get(t)
	env.StartManager(t, envtest.ManagerOptions{})
	ns := env.NewNamespace(t, "dashboard")
	createClusters(t, env.Client, ns, 1)
	post := func(base, token, path string, form url.Values) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if token != "" {
			req.Header.Set("X-Talon-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	scale := "/clusters/" + ns + "/c0000/controlplane/replicas"
	base, token := startServer(t, env, ns, false)
	g := NewWithT(t)

	code, body := post(base, "", scale, url.Values{"replicas": {"3"}})
	g.Expect(code).To(Equal(http.StatusForbidden))
	g.Expect(body).To(ContainSubstring("token"))
	code, body = post(base, token, scale, url.Values{"replicas": {"three"}})
	g.Expect(code).To(Equal(http.StatusBadRequest))
	g.Expect(body).To(ContainSubstring("replicas must be a whole number"))
	code, body = post(base, token, scale, url.Values{"replicas": {"2"}})
	g.Expect(code).To(BeNumerically(">=", 400), body)
	g.Expect(body).To(ContainSubstring("use an odd number"))
	code, body = post(base, token, scale, url.Values{"replicas": {"3"}})
	g.Expect(code).To(Equal(http.StatusOK), body)
	tcp := &controlplanev1.TalosControlPlane{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "c0000-cp"}, tcp)).To(Succeed())
	g.Expect(tcp.Spec.Replicas).To(Equal(ptr.To[int32](3)))

	// Backups: none to copy the storage from, then one.
	backups := "/clusters/" + ns + "/c0000/backups"
	code, body = post(base, token, backups, nil)
	g.Expect(code).To(Equal(http.StatusBadRequest))
	g.Expect(body).To(ContainSubstring("has no etcd backup to take the storage from"))
	first := &controlplanev1.TalosEtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c0000-first"},
		Spec: controlplanev1.TalosEtcdBackupSpec{ClusterName: "c0000", Storage: controlplanev1.EtcdBackupStorage{S3: controlplanev1.S3Storage{
			Endpoint: "https://s3.example.com", Bucket: "backups", CredentialsSecretName: "s3"}}}}
	g.Expect(env.Client.Create(t.Context(), first)).To(Succeed())
	code, body = post(base, token, backups, nil)
	g.Expect(code).To(Equal(http.StatusOK), body)
	list := &controlplanev1.TalosEtcdBackupList{}
	g.Expect(env.Client.List(t.Context(), list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2))
	for _, b := range list.Items {
		g.Expect(b.Spec).To(Equal(first.Spec), "backup %s is taken like the newest one", b.Name)
	}

	// Downloads: the Secret's data, as an attachment.
	kubeconfig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c0000-kubeconfig"}, Data: map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\n")}}
	g.Expect(env.Client.Create(t.Context(), kubeconfig)).To(Succeed())
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/clusters/"+ns+"/c0000/kubeconfig", http.NoBody)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	data, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(string(data)).To(Equal("apiVersion: v1\nkind: Config\n"))
	g.Expect(resp.Header.Get("Content-Disposition")).To(Equal(`attachment; filename="c0000.kubeconfig"`))

	readOnly, roToken := startServer(t, env, ns, true)
	code, body = post(readOnly, roToken, scale, url.Values{"replicas": {"5"}})
	g.Expect(code).To(Equal(http.StatusForbidden))
	g.Expect(body).To(ContainSubstring("--read-only"))
	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, readOnly+"/clusters/"+ns+"/c0000", http.NoBody)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(string(page)).To(ContainSubstring("Cluster c0000"))
	g.Expect(string(page)).NotTo(ContainSubstring("<form"), "a read-only dashboard offers no actions")

	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, readOnly+"/clusters/"+ns+"/c0000/kubeconfig", http.NoBody)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	page, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden), "a read-only dashboard serves no Secrets")
	g.Expect(string(page)).NotTo(ContainSubstring("kind: Config"))

	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, readOnly+"/clusters/"+ns+"/absent", http.NoBody)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	page, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("text/html"))
	g.Expect(string(page)).To(ContainSubstring("Cluster not found"))

	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/", http.NoBody)
	g.Expect(err).NotTo(HaveOccurred())
	req.Host = "evil.example"
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusMisdirectedRequest), "a name the dashboard is not served under")
}

// BenchmarkFleetPage renders the fleet page of 500 clusters (objects only: a Cluster, its
// TalosControlPlane, a MachineDeployment and two Machines each) from the dashboard's caches:
// "server" is the page as a browser asks for it over HTTP, "browser" the whole page load in
// headless Chromium (navigation start to the load event, the script's sort included), when
// a Chromium is installed.
func BenchmarkFleetPage(b *testing.B) {
	env := envtest.Get(b)
	env.StartManager(b, envtest.ManagerOptions{})
	ns := env.NewNamespace(b, "fleet")
	start := time.Now()
	createClusters(b, env.Client, ns, 500)
	b.Logf("Created 500 clusters' objects in %s", time.Since(start).Round(time.Second))
	base, _ := startServer(b, env, ns, true)
	b.Run("server", func(b *testing.B) {
		var size int
		for b.Loop() {
			req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, base+"/", http.NoBody)
			if err != nil {
				b.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("GET /: %d %v", resp.StatusCode, err)
			}
			size = len(body)
		}
		b.ReportMetric(float64(size)/1024, "KiB/page")
	})
	b.Run("browser", func(b *testing.B) {
		path, err := exec.LookPath("chromium")
		if err != nil {
			b.Skip("Skipping: no chromium on PATH (make test-deps installs it)")
		}
		allocator, cancelAllocator := chromedp.NewExecAllocator(b.Context(),
			append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))...)
		defer cancelAllocator()
		tab, cancelTab := chromedp.NewContext(allocator)
		defer cancelTab()
		var total time.Duration
		var rows int
		for b.Loop() {
			var loadMs float64
			if err := chromedp.Run(tab, chromedp.Navigate(base+"/"),
				chromedp.Evaluate(`performance.getEntriesByType('navigation')[0].loadEventEnd`, &loadMs),
				chromedp.Evaluate(`document.querySelectorAll('table.fleet tbody tr').length`, &rows)); err != nil {
				b.Fatal(err)
			}
			total += time.Duration(loadMs * float64(time.Millisecond))
		}
		if rows != 500 {
			b.Fatalf("the page shows %d clusters, not 500", rows)
		}
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/load")
	})
}
