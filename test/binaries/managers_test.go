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

package binaries

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) {
	code := envtest.Run(m)
	if dir, err := builtCommands(); err == nil {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// builtCommands builds every program under cmd/ once per test binary, as a user would with
// "go build ./...".
var builtCommands = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "talon-cmd-")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(context.Background(), "go", "build", "-o", dir+string(filepath.Separator), "./cmd/...")
	cmd.Dir = envtest.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/... failed: %w\n%s", err, out)
	}
	return dir, nil
})

func buildCommands(tb testing.TB) string {
	tb.Helper()
	dir, err := builtCommands()
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Failed to find a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatalf("Failed to release port %d: %v", port, err)
	}
	return port
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), errors.Join(err, resp.Body.Close())
}

func TestManagersServeHealthAndStopOnSIGTERM(t *testing.T) {
	env := envtest.Get(t)
	bin := buildCommands(t)
	kubeconfig, err := env.AdminKubeconfig("talon-managers")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"bootstrap", "controlplane", "infrastructure"} {
		t.Run(name+"-manager", func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			ns := env.NewNamespace(t, "leases")
			health, diagnostics, webhook := freePort(t), freePort(t), freePort(t)
			// Serve webhooks with the certificate envtest made for the test process.
			_, _, certDir := env.WebhookServing()
			args := []string{
				"--kubeconfig=" + kubeconfigPath,
				"--health-addr=127.0.0.1:" + strconv.Itoa(health),
				"--diagnostics-address=127.0.0.1:" + strconv.Itoa(diagnostics),
				"--insecure-diagnostics",
				"--webhook-port=" + strconv.Itoa(webhook),
				"--webhook-cert-dir=" + certDir,
				"--leader-elect",
				"--leader-elect-namespace=" + ns,
			}
			extension := freePort(t)
			if name == "controlplane" {
				args = append(args, "--runtime-extension-port="+strconv.Itoa(extension))
			}
			manager := startProcess(t, filepath.Join(bin, name+"-manager"), nil, args...)

			for _, path := range []string{"/healthz", "/readyz"} {
				url := fmt.Sprintf("http://127.0.0.1:%d%s", health, path)
				g.Eventually(func(g Gomega) {
					code, body, err := httpGet(ctx, url)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(code).To(Equal(http.StatusOK), body)
				}, 60*time.Second, 100*time.Millisecond).Should(Succeed(), "%s never answered 200", url)
			}

			t.Log("The manager holds its leader election Lease")
			lease := &coordinationv1.Lease{}
			leaseKey := client.ObjectKey{Namespace: ns, Name: "talon-" + providerName(name) + "-manager-leader-election"}
			g.Eventually(func(g Gomega) {
				g.Expect(env.Client.Get(ctx, leaseKey, lease)).To(Succeed())
				g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

			t.Log("Prometheus metrics include the manager's requests to the API server")
			g.Eventually(func(g Gomega) {
				code, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", diagnostics))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(code).To(Equal(http.StatusOK))
				g.Expect(body).To(ContainSubstring("rest_client_requests_total"))
				g.Expect(body).To(ContainSubstring("leader_election_master_status"))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

			if name == "controlplane" {
				t.Log("The control-plane manager answers Cluster API's discovery call with its three in-place update hooks")
				g.Eventually(func(g Gomega) {
					handlers, err := discover(ctx, extension)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(handlers).To(ConsistOf("can-update-machineset", "can-update-machine", "update-machine"))
				}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
			}

			t.Log("SIGTERM stops the manager with exit code 0 and releases the Lease")
			manager.terminate(t)
			g.Expect(manager.logs.String()).To(ContainSubstring("Manager stopped"))
			g.Expect(env.Client.Get(ctx, leaseKey, lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())))
		})
	}
}

// discover makes Cluster API's discovery call on the runtime extension at port and returns
// the names of the handlers it lists. The certificate is not verified here: the end-to-end
// suite runs Cluster API's own client, which trusts the CA it injected.
func discover(ctx context.Context, port int) ([]string, error) {
	body := strings.NewReader(`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryRequest"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("https://127.0.0.1:%d/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", port), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close() //nolint:errcheck // read to the end below
	var discovery struct {
		Status   string `json:"status"`
		Handlers []struct {
			Name string `json:"name"`
		} `json:"handlers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&discovery); err != nil {
		return nil, err
	}
	if discovery.Status != "Success" {
		return nil, fmt.Errorf("discovery answered %q", discovery.Status)
	}
	names := make([]string, 0, len(discovery.Handlers))
	for _, h := range discovery.Handlers {
		names = append(names, h.Name)
	}
	return names, nil
}

// providerName maps a cmd directory to the manager's name: the control plane is
// "control-plane" in names users see.
func providerName(cmdName string) string {
	if cmdName == "controlplane" {
		return "control-plane"
	}
	return cmdName
}

func TestManagersRejectBadFlags(t *testing.T) {
	bin := buildCommands(t)
	tests := []struct {
		args []string
		want string
	}{
		{args: []string{"--concurrency=0"}, want: "--concurrency must be at least 1"},
		{args: []string{"--webhook-port=70000"}, want: "--webhook-port must be a port number"},
		{args: []string{"--feature-gates=NoSuchGate=true"}, want: "unrecognized feature gate: NoSuchGate"},
		{args: []string{"--no-such-flag"}, want: "unknown flag: --no-such-flag"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			// No kubeconfig is needed: bad flags are refused before the manager connects.
			cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "infrastructure-manager"), tt.args...)
			cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
			out, err := cmd.CombinedOutput()
			g.Expect(err).To(HaveOccurred(), "manager accepted %v:\n%s", tt.args, out)
			g.Expect(string(out)).To(ContainSubstring(tt.want))
		})
	}
}

func TestTalonVersion(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.CommandContext(t.Context(), filepath.Join(buildCommands(t), "talon"), "version", "-o", "short").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(strings.TrimSpace(string(out))).NotTo(BeEmpty())
}
