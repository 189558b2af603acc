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

// Package deployed installs Talon as users do, other than talon up (whose path with the
// managers as Pods is test/e2e's TestEndToEnd): with Helm, and with clusterctl for bare
// metal with the boot service, on a real kubelet-run management cluster (internal/plane
// with a node) whose managers run as Pods under their own ServiceAccounts, with the
// certificates cert-manager issues; a cluster is then made and deleted, and no manager may
// have been refused anything (test/clusters' checks of such a cluster).
package deployed

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	clusters.RemovePrograms()
	os.Exit(code)
}

// moveAndDelete moves the Docker cluster name in namespace ns with clusterctl move to a
// second management cluster, the process-run plane with Cluster API and Talon installed by
// clusterctl, which then runs it as it was and deletes it.
func (m *managementCluster) moveAndDelete(t *testing.T, ns, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	bin, err := clusters.Programs()
	g.Expect(err).NotTo(HaveOccurred())
	target, err := plane.Start(ctx, plane.Options{Dir: filepath.Join(t.TempDir(), "target"), BinDir: bin, Log: testLog{t}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = target.Remove(context.Background()) })
	g.Expect(quickstart.InstallProviders(ctx, target, filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml"), quickstart.RuntimeDocker, nil)).To(Succeed())
	to, err := client.New(mustConfig(g, target.Kubeconfig()), client.Options{Scheme: quickstart.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	clusters.MoveAndDelete(ctx, g, t.Logf, testLog{t}, bin, m.p.Kubeconfig(), target.Kubeconfig(), m.c, to, ns, name)
	g.Expect(target.Remove(ctx)).To(Succeed())
}

// managementCluster is a test's kubelet-run management cluster and the workload cluster it
// makes on it.
type managementCluster struct {
	p *plane.Plane
	c client.Client
	// config is the clusterctl.yaml of Talon's local repository (make release-manifests).
	config string
	// certManager is cert-manager's install manifest.
	certManager string
	// cluster is the name of the workload cluster.
	cluster string
}

// startManagementCluster starts a kubelet-run management cluster, after checking that
// every image its Pods run is in the Docker Engine, and removes it (and the containers of
// the workload cluster named cluster) when the test ends.
func startManagementCluster(t *testing.T, cluster string) *managementCluster {
	t.Helper()
	g := NewWithT(t)
	t.Setenv("HOME", t.TempDir())
	start := time.Now()
	// The workload cluster's containers go after the management cluster (cleanups run last-in
	// first-out), whose managers could otherwise make them again.
	t.Cleanup(func() { dockertest.RemoveLabelled(t, map[string]string{dockerruntime.LabelCluster: cluster}) })
	p := clusters.StartPodsPlane(t, filepath.Join(t.TempDir(), "plane"), testLog{t})
	m := &managementCluster{p: p, cluster: cluster, config: filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml")}
	m.certManager = quickstart.CertManagerManifest(m.config)
	for _, file := range []string{m.config, m.certManager} {
		if _, err := os.Stat(file); err != nil {
			t.Fatalf("run 'make release-manifests cert-manager' first: %v", err)
		}
	}
	var err error
	t.Logf("The management cluster's node was Ready after %s", time.Since(start).Round(time.Second))
	m.c, err = client.New(mustConfig(g, m.p.Kubeconfig()), client.Options{Scheme: quickstart.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return m
}

// createCluster makes a 1 + 1 cluster of simulator containers from Talon's cluster template,
// which clusterctl takes from where template says ("--infrastructure talon", "--from
// <file>"), and returns a client of it once both Machines run with Ready Nodes.
func (m *managementCluster) createCluster(t *testing.T, template ...string) client.Client {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	t.Log("A 1 + 1 cluster of simulator containers, from Talon's cluster template")
	start := time.Now()
	manifest, err := plane.RunClusterctl(ctx, envtest.BinDir(), m.p.Kubeconfig(), []string{"TALOS_IMAGE=" + dockertest.SimImage()}, nil,
		append([]string{"generate", "cluster", m.cluster, "--config", m.config, "--target-namespace", "default",
			"--kubernetes-version", "v1.36.3", "--control-plane-machine-count", "1", "--worker-machine-count", "1"}, template...)...)
	g.Expect(err).NotTo(HaveOccurred())
	m.apply(t, manifest)
	kubeconfigSecret := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(clusters.UsableMachines(ctx, g, m.c, "default", m.cluster)).To(HaveLen(2))
		g.Expect(m.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: m.cluster + "-kubeconfig"}, kubeconfigSecret)).To(Succeed())
	}).WithTimeout(6 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("The cluster's 2 Machines were Running with Ready Nodes after %s", time.Since(start).Round(time.Second))
	workloadConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfigSecret.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	workload, err := client.New(workloadConfig, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { g.Expect(clusters.ReadyNodes(ctx, g, workload)).To(HaveLen(2)) }).WithTimeout(time.Minute).Should(Succeed())
	return workload
}

// apply creates every object of manifest, in its order, each once the API server takes it:
// a webhook's Service gets its endpoint a moment after its Deployment is available, a
// CRD's kinds are served a moment after it is created.
func (m *managementCluster) apply(t *testing.T, manifest []byte) {
	t.Helper()
	g := NewWithT(t)
	objs, err := utilyaml.ToUnstructured(manifest)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range objs {
		g.Eventually(func() error {
			err := m.c.Create(t.Context(), &objs[i])
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "%s %s", objs[i].GetKind(), objs[i].GetName())
	}
}

// mustConfig is the client configuration of kubeconfig.
func mustConfig(g Gomega, kubeconfig string) *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	return cfg
}

// testLog writes lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	if s := strings.TrimRight(string(bytes.TrimSpace(b)), "\n"); s != "" {
		l.t.Log(s)
	}
	return len(b), nil
}
