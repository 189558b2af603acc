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

package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// Layer is this package's layer in TALON_REQUIRE: a headless Chromium (Debian's chromium,
// which make test-deps installs) driving talon dashboard.
const Layer = "browser"

func TestMain(m *testing.M) {
	code := m.Run()
	clusters.RemovePrograms()
	os.Exit(code)
}

// chromium is the browser the test drives, or why there is none.
func chromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errors.New("no chromium on PATH (make test-deps installs Debian's chromium)")
}

// TestDashboard runs talon dashboard against a management plane of processes with Cluster
// API and Talon's managers and two clusters of light simulated nodes, and drives it with
// headless Chromium as a person would: the fleet shows both clusters Ready; a condition
// message set on a Machine appears on the open cluster page without a reload; the scale
// form changes a MachineDeployment's spec.replicas; an even control-plane count is refused
// with the webhook's message; a user who may only read sees no actions and gets 403 from
// the action endpoint. It saves screenshots of the fleet and cluster pages at desktop and
// phone width (docs/images/dashboard-*.png with TALON_UPDATE_SCREENSHOTS=1).
func TestDashboard(t *testing.T) {
	browser, err := chromium()
	require.Layer(t, Layer, err)
	bin, err := clusters.Programs()
	require.Layer(t, Layer, err)
	config := filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml")
	if _, err := os.Stat(config); err != nil {
		require.Layer(t, Layer, fmt.Errorf("%s is missing: run 'make release-manifests' first", config))
	}
	g := NewWithT(t)
	ctx := t.Context()
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	p, err := plane.Start(ctx, plane.Options{Dir: filepath.Join(dir, "plane"), BinDir: bin})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Remove(context.WithoutCancel(ctx)) })
	g.Expect(quickstart.InstallProviders(ctx, p, config, quickstart.RuntimeSimLight, nil)).To(Succeed())
	c, err := p.Client(client.Options{Scheme: quickstart.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	// Two clusters at once: alpha 1 + 1, beta 1 + 0.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, spec := range []struct {
		name    string
		workers int
	}{{"alpha", 1}, {"beta", 0}} {
		wg.Go(func() {
			_, errs[i] = quickstart.Up(ctx, quickstart.Options{
				Name: spec.name, Namespace: "default", ControlPlanes: 1, Workers: spec.workers, KubernetesVersion: "v1.36.2",
				Runtime: quickstart.RuntimeSimLight, Kubeconfig: p.Kubeconfig(), BinDir: bin, ClusterctlConfig: config,
				OutDir: dir, Timeout: 5 * time.Minute, Out: io.Discard,
			})
		})
	}
	wg.Wait()
	g.Expect(errors.Join(errs...)).NotTo(HaveOccurred())

	admin := startDashboard(t, filepath.Join(bin, "talon"), p.Kubeconfig())
	shots := screenshotDir(t)
	tab := newTab(t, browser)

	t.Run("the fleet shows both clusters Ready", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(chromedp.Run(tab, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(admin+"/"))).To(Succeed())
		// The MachineDeployment's status may follow its Machine by a moment: the page shows
		// it when it comes.
		shows := func(selector, want string) {
			t.Helper()
			g.Eventually(func() string { return textOf(tab, selector) }).WithTimeout(30*time.Second).Should(Equal(want), selector)
		}
		for _, name := range []string{"alpha", "beta"} {
			shows(fmt.Sprintf(`tr[data-name="default/%s"] .badge`, name), "Ready")
		}
		shows(`[data-state-count="Ready"]`, "2")
		shows(`tr[data-name="default/alpha"] td[data-label="Workers"]`, "1/1")
		waitLive(tab, t)
		screenshot(tab, t, shots, "dashboard-fleet.png")
	})

	t.Run("a Machine's condition message appears without a reload", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(chromedp.Run(tab, chromedp.Navigate(admin+"/clusters/default/alpha"))).To(Succeed())
		waitLive(tab, t)
		machine := workerMachine(t, c, "alpha")
		// Open the Machine's conditions, and mark the page: a reload would lose the mark.
		g.Expect(chromedp.Run(tab,
			chromedp.Click(fmt.Sprintf(`tr[data-machine=%q] + tr.machine-conditions summary`, machine.Name), chromedp.ByQuery),
			chromedp.Evaluate(`window.talonTestMark = true`, nil),
		)).To(Succeed())
		message := fmt.Sprintf("disk pressure on the test's node at %s", time.Now().Format(time.StampMicro))
		start := time.Now()
		g.Eventually(func() error {
			m := &clusterv1.Machine{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(machine), m); err != nil {
				return err
			}
			m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: "TestDiskPressure", Status: metav1.ConditionTrue,
				Reason: "TestDiskPressure", Message: message, LastTransitionTime: metav1.Now()})
			return c.Status().Update(ctx, m)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		var visible string
		g.Eventually(func() string {
			_ = chromedp.Run(tab, chromedp.Evaluate(`document.getElementById('live').innerText`, &visible))
			return visible
		}).WithTimeout(10*time.Second).WithPolling(100*time.Millisecond).Should(ContainSubstring(message), "the message is shown, with the conditions still open")
		t.Logf("The condition message appeared %s after the status update", time.Since(start).Round(10*time.Millisecond))
		var mark bool
		g.Expect(chromedp.Run(tab, chromedp.Evaluate(`window.talonTestMark === true`, &mark))).To(Succeed())
		g.Expect(mark).To(BeTrue(), "the page was updated in place, not reloaded")
	})

	t.Run("the scale form changes the MachineDeployment", func(t *testing.T) {
		g := NewWithT(t)
		result := submit(tab, t, "#md-replicas-0", "2")
		g.Expect(result).To(ContainSubstring("scaled to 2"))
		md := &clusterv1.MachineDeployment{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "alpha-workers"}, md)).To(Succeed())
		g.Expect(md.Spec.Replicas).To(Equal(ptr.To[int32](2)))
	})

	t.Run("an even control-plane count is refused with the webhook's message", func(t *testing.T) {
		g := NewWithT(t)
		result := submit(tab, t, "#cp-replicas", "2")
		g.Expect(result).To(ContainSubstring("use an odd number"))
		tcp := &controlplanev1.TalosControlPlane{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "alpha-control-plane"}, tcp)).To(Succeed())
		g.Expect(tcp.Spec.Replicas).To(Equal(ptr.To[int32](1)))
		screenshot(tab, t, shots, "dashboard-cluster.png")
		var actions []byte
		g.Expect(chromedp.Run(tab, chromedp.Screenshot("section.actions", &actions, chromedp.ByQuery))).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(shots, "dashboard-cluster-actions.png"), actions, 0o644)).To(Succeed()) //nolint:gosec // a picture for the docs
	})

	t.Run("phone width", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(chromedp.Run(tab, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(admin+"/"))).To(Succeed())
		waitLive(tab, t)
		var overflow bool
		g.Expect(chromedp.Run(tab, chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow))).To(Succeed())
		g.Expect(overflow).To(BeFalse(), "the fleet page fits the phone's width")
		screenshot(tab, t, shots, "dashboard-fleet-phone.png")
		g.Expect(chromedp.Run(tab, chromedp.Navigate(admin+"/clusters/default/alpha"))).To(Succeed())
		waitLive(tab, t)
		g.Expect(chromedp.Run(tab, chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow))).To(Succeed())
		g.Expect(overflow).To(BeFalse(), "the cluster page fits the phone's width")
		screenshot(tab, t, shots, "dashboard-cluster-phone.png")
	})

	t.Run("a user who may only read sees no actions and gets 403", func(t *testing.T) {
		g := NewWithT(t)
		viewer := startDashboard(t, filepath.Join(bin, "talon"), viewerKubeconfig(t, p, dir))
		g.Expect(chromedp.Run(tab, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(viewer+"/clusters/default/alpha"))).To(Succeed())
		waitLive(tab, t)
		var forms, buttons, downloads int
		g.Expect(chromedp.Run(tab,
			chromedp.Evaluate(`document.querySelectorAll('form').length`, &forms),
			chromedp.Evaluate(`document.querySelectorAll('main button:not(th button)').length`, &buttons),
			chromedp.Evaluate(`document.querySelectorAll('a[download]').length`, &downloads),
		)).To(Succeed())
		g.Expect([]int{forms, buttons, downloads}).To(Equal([]int{0, 0, 0}), "forms, action buttons and downloads")
		g.Eventually(func() string { return textOf(tab, `#live .summary .badge`) }).WithTimeout(30*time.Second).
			Should(BeElementOf("Ready", "Updating"), "the viewer sees the cluster (its workers may still be scaling)")

		// The action endpoint, called with the page's own token: the API server refuses.
		var status int
		g.Expect(chromedp.Run(tab, chromedp.Evaluate(`fetch('/clusters/default/alpha/controlplane/replicas', {method: 'POST',
			headers: {'X-Talon-Token': document.querySelector('meta[name="talon-token"]').content},
			body: new URLSearchParams({replicas: '3'})}).then(r => r.status)`, &status, awaitPromise))).To(Succeed())
		g.Expect(status).To(Equal(403))
		tcp := &controlplanev1.TalosControlPlane{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "alpha-control-plane"}, tcp)).To(Succeed())
		g.Expect(tcp.Spec.Replicas).To(Equal(ptr.To[int32](1)))
	})
}

// awaitPromise makes chromedp.Evaluate return what the promise resolves to.
func awaitPromise(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
	return p.WithAwaitPromise(true)
}

// startDashboard runs talon dashboard with kubeconfig until the test ends and returns its URL.
func startDashboard(t *testing.T, talon, kubeconfig string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	cmd := exec.CommandContext(ctx, talon, "dashboard", "--kubeconfig", kubeconfig, "--address", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "dashboard.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			if log, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("talon dashboard's log:\n%s", log)
			}
		}
	})
	urls := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if rest, ok := strings.CutPrefix(scanner.Text(), "Talon dashboard at "); ok {
				urls <- strings.TrimSuffix(rest, "/")
			}
		}
	}()
	select {
	case url := <-urls:
		return url
	case <-time.After(2 * time.Minute):
		log, _ := os.ReadFile(logFile.Name())
		t.Fatalf("talon dashboard did not start within 2 minutes:\n%s", log)
	}
	return ""
}

// newTab starts headless Chromium and returns its first tab.
func newTab(t *testing.T, browser string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox, // root in CI
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	allocator, cancelAllocator := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	tab, cancelTab := chromedp.NewContext(allocator, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelTab(); cancelAllocator() })
	if err := chromedp.Run(tab); err != nil {
		t.Fatalf("failed to start %s: %v", browser, err)
	}
	return tab
}

// textOf waits for the selector and returns its text.
//
// The element is found and read in one script: a live update replaces the part of the page
// it is in at any time, and an element read after it was replaced has no text.
func textOf(tab context.Context, selector string) string {
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	quoted, err := json.Marshal(selector)
	if err != nil {
		return fmt.Sprintf("(%s: %v)", selector, err)
	}
	for {
		var text *string
		err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%s)?.innerText ?? null`, quoted), &text))
		switch {
		case err != nil:
			return fmt.Sprintf("(%s: %v)", selector, err)
		case text != nil:
			return strings.TrimSpace(*text)
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("(%s: no such element)", selector)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitLive waits until the page's event stream is connected.
func waitLive(tab context.Context, t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func() string { return textOf(tab, "#live-status") }).WithTimeout(30 * time.Second).Should(Equal("Live"))
}

// submit types value into the input, submits its form and returns the form's result.
func submit(tab context.Context, t *testing.T, input, value string) string {
	t.Helper()
	g := NewWithT(t)
	form := fmt.Sprintf(`form:has(%s)`, input)
	g.Expect(chromedp.Run(tab,
		chromedp.SetValue(input, value, chromedp.ByQuery),
		chromedp.Click(form+` button[type="submit"]`, chromedp.ByQuery),
	)).To(Succeed())
	var result string
	g.Eventually(func() string {
		result = textOf(tab, form+` [data-result]`)
		return result
	}).WithTimeout(30*time.Second).ShouldNot(Or(BeEmpty(), Equal("Working…")), "the form shows the answer")
	t.Logf("%s = %s: %s", input, value, result)
	return result
}

// workerMachine is the cluster's worker Machine.
func workerMachine(t *testing.T, c client.Client, cluster string) *clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	g := NewWithT(t)
	g.Expect(c.List(t.Context(), list, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})).To(Succeed())
	for i := range list.Items {
		if _, cp := list.Items[i].Labels[clusterv1.MachineControlPlaneLabel]; !cp {
			return &list.Items[i]
		}
	}
	t.Fatalf("cluster %s has no worker Machine", cluster)
	return nil
}

// viewerKubeconfig is a kubeconfig of a ServiceAccount that may read the dashboard's kinds
// and nothing else.
func viewerKubeconfig(t *testing.T, p *plane.Plane, dir string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	restConfig, err := p.RESTConfig()
	g.Expect(err).NotTo(HaveOccurred())
	kube, err := kubernetes.NewForConfig(restConfig)
	g.Expect(err).NotTo(HaveOccurred())
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dashboard-viewer"}}
	_, err = kube.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "dashboard-viewer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"clusters", "machines", "machinedeployments"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{controlplanev1.GroupVersion.Group}, Resources: []string{"taloscontrolplanes", "talosetcdbackups"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	_, err = kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dashboard-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: sa.Name}},
	}
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	token, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	config, err := clientcmd.LoadFromFile(p.Kubeconfig())
	g.Expect(err).NotTo(HaveOccurred())
	current := config.Contexts[config.CurrentContext]
	g.Expect(current).NotTo(BeNil())
	config.AuthInfos = map[string]*clientcmdapi.AuthInfo{"viewer": {Token: token.Status.Token}}
	current.AuthInfo = "viewer"
	path := filepath.Join(dir, "viewer.kubeconfig")
	g.Expect(clientcmd.WriteToFile(*config, path)).To(Succeed())
	return path
}

// screenshotDir is where the screenshots go: docs/images with TALON_UPDATE_SCREENSHOTS=1,
// which docs/dashboard.md shows, else out/dashboard-screenshots.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(envtest.RepoRoot(), "out", "dashboard-screenshots")
	if os.Getenv("TALON_UPDATE_SCREENSHOTS") == "1" {
		dir = filepath.Join(envtest.RepoRoot(), "docs", "images")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // docs/images is part of the repository
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the top of the page, a window's worth, as a PNG (the whole of a
// cluster's page is several screens, half a megabyte).
func screenshot(tab context.Context, t *testing.T, dir, name string) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(tab, chromedp.Evaluate(`window.scrollTo(0, 0)`, nil), chromedp.CaptureScreenshot(&png)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil { //nolint:gosec // a picture for the docs
		t.Fatal(err)
	}
	t.Logf("Saved %s (%d KiB)", filepath.Join(dir, name), len(png)>>10)
}
