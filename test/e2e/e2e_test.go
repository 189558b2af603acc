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

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// Layer is the name of this package's layer in TALON_REQUIRE.
const Layer = "e2e"

// Versions of the topology upgrade.
const (
	oldVersion = clusters.OldVersion
	newVersion = clusters.NewVersion
)

func TestMain(m *testing.M) {
	code := m.Run()
	clusters.RemovePrograms()
	os.Exit(code)
}

// binDir is the directory of this build's programs and the tools (clusters.Programs).
var binDir = clusters.Programs

// suite is what every step of the end-to-end run shares.
type suite struct {
	t          *testing.T
	g          *WithT
	bin        string
	out        string
	clusterctl string
	// pauseImage is the Pod sandbox image of a management cluster whose managers run as Pods.
	pauseImage string
}

// newDockerSuite is the suite of a test whose nodes are simulator containers: it needs
// Docker, the programs of binDir and the clusterctl config of make release-manifests.
func newDockerSuite(t *testing.T) *suite {
	t.Helper()
	require.Layer(t, "docker", dockertest.Available(t.Context()))
	bin, err := binDir()
	require.Layer(t, Layer, err)
	config := filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml")
	if _, err := os.Stat(config); err != nil {
		t.Fatalf("%s is missing: run 'make release-manifests' first", config)
	}
	// clusterctl keeps files under $HOME; the test keeps them to itself.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("TALON_SIM_IMAGE", dockertest.SimImage())
	return &suite{t: t, g: NewWithT(t), bin: bin, out: t.TempDir(), clusterctl: config}
}

// talon runs the talon CLI and returns its output; it fails the test if talon fails.
func (s *suite) talon(args ...string) string {
	s.t.Helper()
	cmd := exec.CommandContext(s.t.Context(), filepath.Join(s.bin, "talon"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	s.t.Logf("talon %s:\n%s", strings.Join(args, " "), out.String())
	if err != nil {
		s.logPlaneProcesses()
	}
	s.g.Expect(err).NotTo(HaveOccurred(), "talon %s failed", strings.Join(args, " "))
	return out.String()
}

// logPlaneProcesses logs the last lines of what each process of talon up's management plane
// wrote (its managers, kube-apiserver, etcd), to tell why a step failed.
func (s *suite) logPlaneProcesses() {
	logs, _ := filepath.Glob(filepath.Join(s.out, quickstart.PlaneDirName, "logs", "*.log"))
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		s.t.Logf("The last lines of %s:\n%s", filepath.Base(path), strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
}

// client is a client of the cluster of kubeconfig.
func (s *suite) client(kubeconfig string) client.Client {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	s.g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: quickstart.Scheme})
	s.g.Expect(err).NotTo(HaveOccurred())
	return c
}

// TestEndToEnd is the user's path through Talon, with every manager running as a Pod under
// its own ServiceAccount as users deploy them: the quickstart (talon up --managers pods: a
// kubelet-run management cluster where clusterctl init installs cert-manager, Cluster API
// and Talon as Deployments), a look with talon status and clusterctl describe, scaling
// workers, Kubernetes patch releases in place (control plane and workers, through Cluster
// API's hooks) and by replacement with the core manager's in-place gates off, a
// ClusterClass cluster upgraded through its topology and deleted, a KubernetesCluster
// (the optional API installed as docs/kubernetescluster.md says) built and deleted, and
// talon down. No manager may have been refused anything by RBAC, nor restarted.
func TestEndToEnd(t *testing.T) {
	s := newDockerSuite(t)
	s.pauseImage = clusters.PodsPrerequisites(t)
	t.Cleanup(func() {
		// Whatever a failed run left: the management cluster, the clusters' containers.
		if p, err := plane.Open(filepath.Join(s.out, quickstart.PlaneDirName), nil); err == nil {
			if t.Failed() && p.Running() {
				clusters.LogManagers(t, p)
			}
			if err := p.Remove(context.Background()); err != nil {
				t.Errorf("Failed to remove the management cluster: %v", err)
			}
		}
		for _, name := range []string{"e2e", "e2e-class", "e2e-kc"} {
			dockertest.RemoveLabelled(t, map[string]string{dockerruntime.LabelCluster: name})
		}
	})

	mgmt := s.quickstart()
	s.scaleWorkers(mgmt)
	s.updateInPlace(mgmt)
	s.expectMetricsAndEvents(mgmt)
	s.topologyUpgrade(mgmt)
	// clusterctl move is proven by TestEtcdBootstrappedOnce (a Docker cluster from this kind
	// of management cluster to a plane of processes), TestHelmInstall (after a Helm install),
	// TestMoveKubernetesCluster (a ClusterClass cluster) and TestMoveMetalCluster.
	clusters.DeleteCluster(s.t.Context(), s.g, s.t.Logf, mgmt, "topology", "e2e-class")
	s.kubernetesCluster(mgmt)
	p, err := plane.Open(filepath.Join(s.out, quickstart.PlaneDirName), nil)
	s.g.Expect(err).NotTo(HaveOccurred())
	clusters.ExpectNoRefusals(t, p)
	s.down()
}

// quickstartSubnet is the cluster network talon up is asked for: outside Docker's default
// address pools, so that no network another test makes takes it first.
const quickstartSubnet = "10.213.7.0/24"

// quickstart runs talon up for 1 + 2 nodes, with its Kubernetes API published on a host
// port and a subnet of its own, and checks what the user gets.
func (s *suite) quickstart() client.Client {
	t, g := s.t, s.g
	start := time.Now()
	apiPort := freeHostPort(t)
	out := s.talon("up", "--out", s.out, "--name", "e2e", "--bin-dir", s.bin, "--config", s.clusterctl, "--runtime", "docker", "--timeout", "5m",
		"--api-port", strconv.Itoa(apiPort), "--subnet", quickstartSubnet, "--managers", "pods", "--pause-image", s.pauseImage)
	t.Logf("talon up took %s", time.Since(start).Round(time.Second))
	clusterDir := filepath.Join(s.out, "e2e")
	g.Expect(out).To(ContainSubstring("Docker with the node simulator image"))
	g.Expect(out).To(ContainSubstring(filepath.Join(clusterDir, "kubeconfig")))
	g.Expect(out).To(ContainSubstring("Cluster e2e is ready"))
	for _, file := range []string{"kubeconfig", "talosconfig", "cluster.yaml"} {
		g.Expect(filepath.Join(clusterDir, file)).To(BeARegularFile())
	}
	configs, err := filepath.Glob(filepath.Join(clusterDir, "configs", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(configs).To(HaveLen(3), "one rendered config per Machine")

	t.Log("kubectl --kubeconfig _out/e2e/kubeconfig get nodes: three Ready nodes")
	workload := s.client(filepath.Join(clusterDir, "kubeconfig"))
	g.Eventually(func(g Gomega) { g.Expect(clusters.ReadyNodes(s.t.Context(), g, workload)).To(HaveLen(3)) }).
		WithTimeout(time.Minute).Should(Succeed())

	t.Logf("The same through the port the host publishes (https://127.0.0.1:%d), the certificate verified", apiPort)
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("https://127.0.0.1:%d", apiPort)))
	kubeconfig, err := clientcmd.LoadFromFile(filepath.Join(clusterDir, "kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	hostContext := kubeconfig.CurrentContext + quickstart.HostContextSuffix
	g.Expect(kubeconfig.Contexts).To(HaveKey(hostContext))
	hostConfig, err := clientcmd.NewNonInteractiveClientConfig(*kubeconfig, hostContext, nil, nil).ClientConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hostConfig.Host).To(Equal(fmt.Sprintf("https://127.0.0.1:%d", apiPort)))
	g.Expect(hostConfig.Insecure).To(BeFalse())
	g.Expect(hostConfig.CAData).NotTo(BeEmpty())
	fromHost, err := client.New(hostConfig, client.Options{Scheme: quickstart.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { g.Expect(clusters.ReadyNodes(s.t.Context(), g, fromHost)).To(HaveLen(3)) }).
		WithTimeout(time.Minute).Should(Succeed())

	t.Log("Every manager runs as one available Pod under its own ServiceAccount, none scaled down, none as a local process")
	p, err := plane.Open(filepath.Join(s.out, quickstart.PlaneDirName), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Managers()).To(BeEmpty())
	mgmt := s.client(p.Kubeconfig())
	clusters.ExpectManagersRunning(t, mgmt)
	docker := &infrav1.TalosDockerCluster{}
	g.Expect(mgmt.Get(s.t.Context(), client.ObjectKey{Namespace: "default", Name: "e2e"}, docker)).To(Succeed())
	g.Expect(docker.Status.Network.Subnet).To(Equal(quickstartSubnet))
	g.Expect(docker.Status.LoadBalancer.HostPort).To(BeEquivalentTo(apiPort))

	t.Log("talon status shows Machines, Nodes and etcd members")
	status := s.talon("status", "--out", s.out, "--name", "e2e")
	machines := &clusterv1.MachineList{}
	g.Expect(mgmt.List(s.t.Context(), machines, client.InNamespace("default"))).To(Succeed())
	for _, m := range machines.Items {
		g.Expect(status).To(ContainSubstring(m.Name))
	}
	g.Expect(status).To(ContainSubstring("ETCD MEMBER"))
	// One row per member: name, 16-digit ID, peer URLs, voter, healthy ("unhealthy" is not).
	memberRows := regexp.MustCompile(`(?m)^\S+\s+[0-9a-f]{16}\s+\S+\s+voter\s+healthy\s*$`).FindAllString(status, -1)
	g.Expect(memberRows).To(HaveLen(1), "the control plane's one etcd member is a healthy voter:\n%s", status)
	g.Expect(status).NotTo(ContainSubstring("unhealthy"))

	t.Log("clusterctl describe shows Talon's objects and conditions, etcd healthy and every control-plane Machine up to date")
	describe, err := plane.RunClusterctl(s.t.Context(), s.bin, p.Kubeconfig(), nil, nil, "describe", "cluster", "e2e", "-n", "default",
		"--show-conditions", "all", "--grouping=false")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("clusterctl describe cluster e2e:\n%s", describe)
	g.Expect(string(describe)).To(ContainSubstring("TalosControlPlane default/e2e-control-plane"))
	g.Expect(string(describe)).To(MatchRegexp(`EtcdClusterHealthy\s+True\b`))
	g.Expect(string(describe)).To(ContainSubstring("TalosDockerCluster default/e2e"))
	controlPlane := 0
	for _, m := range machines.Items {
		if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; !ok {
			continue
		}
		controlPlane++
		// The row of a Machine, "Machine default/<name>, <version>": its replicas, available,
		// ready and up-to-date counters.
		row := regexp.MustCompile(`Machine default/` + regexp.QuoteMeta(m.Name) + `(?:, \S+)?\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)`).FindStringSubmatch(string(describe))
		g.Expect(row).NotTo(BeNil(), "clusterctl describe has a row for Machine %s", m.Name)
		g.Expect(row[4]).To(Equal("1"), "clusterctl describe shows Machine %s up to date", m.Name)
	}
	g.Expect(controlPlane).To(Equal(1))
	return mgmt
}

// scaleWorkers scales the quickstart cluster's workers 2 -> 5 -> 2.
func (s *suite) scaleWorkers(mgmt client.Client) {
	ctx := s.t.Context()
	workload := s.client(filepath.Join(s.out, "e2e", "kubeconfig"))
	for _, replicas := range []int32{5, 2} {
		start := time.Now()
		md := &clusterv1.MachineDeployment{}
		s.g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: "default", Name: "e2e-workers"}, md)).To(Succeed())
		patch := client.MergeFrom(md.DeepCopy())
		md.Spec.Replicas = ptr.To(replicas)
		s.g.Expect(mgmt.Patch(ctx, md, patch)).To(Succeed())
		s.g.Eventually(func(g Gomega) {
			g.Expect(clusters.UsableMachines(ctx, g, mgmt, "default", "e2e")).To(HaveLen(1 + int(replicas)))
			g.Expect(clusters.ReadyNodes(ctx, g, workload)).To(HaveLen(1 + int(replicas)))
		}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		s.t.Logf("Workers scaled to %d in %s", replicas, time.Since(start).Round(time.Second))
	}
}

// topologyUpgrade builds a cluster from the shipped ClusterClass and upgrades its
// Kubernetes version through the topology.
func (s *suite) topologyUpgrade(mgmt client.Client) {
	const ns, name = "topology", "e2e-class"
	classFile := filepath.Join(filepath.Dir(s.clusterctl), "clusterclass-talos-docker.yaml")
	clusters.CreateClassCluster(s.t.Context(), s.g, s.t.Logf, mgmt, s.bin, classFile, ns, name, dockertest.SimImage())
	clusters.UpgradeClassCluster(s.t.Context(), s.g, s.t.Logf, mgmt, ns, name)
}

// down runs talon down and checks that nothing is left: no process of the management
// cluster, no container, volume or network of the cluster, no file.
func (s *suite) down() {
	ctx, g := s.t.Context(), s.g
	p, err := plane.Open(filepath.Join(s.out, quickstart.PlaneDirName), nil)
	g.Expect(err).NotTo(HaveOccurred())
	processes := p.Processes()
	g.Expect(processes).NotTo(BeEmpty(), "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, cri-dockerd, the kubelet and kube-proxy")
	s.talon("down", "--out", s.out)
	for _, proc := range processes {
		g.Expect(proc.Alive()).To(BeFalse(), "%s (pid %d) still runs", proc.Name, proc.PID)
	}
	left, err := dockertest.Leftovers(ctx, map[string]string{dockerruntime.LabelCluster: "e2e"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeEmpty())
	entries, err := os.ReadDir(s.out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty(), "talon down removes the plane and the clusters' files")
}

// freeHostPort is a TCP port free on the host right now.
func freeHostPort(t *testing.T) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// sortedFields splits out into sorted words.
func sortedFields(out string) []string {
	fields := strings.Fields(out)
	sort.Strings(fields)
	return fields
}

// testWriter logs what is written to it.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestUpOnAnExistingCluster: talon up --kubeconfig on a cluster without Cluster API
// installs Cluster API and Talon there with clusterctl, runs their managers here and makes
// the cluster (simulated nodes in the infrastructure manager); talon down deletes the
// cluster and uninstalls what up installed, and leaves the cluster itself running.
func TestUpOnAnExistingCluster(t *testing.T) {
	ctx := t.Context()
	bin, err := binDir()
	require.Layer(t, Layer, err)
	config := filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml")
	if _, err := os.Stat(config); err != nil {
		t.Fatalf("%s is missing: run 'make release-manifests' first", config)
	}
	t.Setenv("HOME", t.TempDir())
	s := &suite{t: t, g: NewWithT(t), bin: bin, out: t.TempDir(), clusterctl: config}
	existing, err := plane.Start(ctx, plane.Options{Dir: filepath.Join(t.TempDir(), "existing"), BinDir: bin})
	s.g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = existing.Remove(context.Background()) })
	t.Cleanup(func() {
		if p, err := plane.Open(filepath.Join(s.out, quickstart.PlaneDirName), nil); err == nil {
			_ = p.Stop(context.Background())
		}
	})

	out := s.talon("up", "--kubeconfig", existing.Kubeconfig(), "--out", s.out, "--name", "attached", "--workers", "1",
		"--bin-dir", s.bin, "--config", s.clusterctl, "--runtime", "sim", "--timeout", "5m")
	s.g.Expect(out).To(ContainSubstring("has no Talon: installing Cluster API and Talon there"))
	s.g.Expect(out).To(ContainSubstring("Cluster attached is ready"))
	c := s.client(existing.Kubeconfig())
	s.g.Expect(clusters.UsableMachines(ctx, s.g, c, "default", "attached")).To(HaveLen(2))
	p, err := plane.Open(filepath.Join(s.out, quickstart.PlaneDirName), nil)
	s.g.Expect(err).NotTo(HaveOccurred())
	managers := p.Processes()
	s.g.Expect(managers).NotTo(BeEmpty(), "the managers run here, as local processes")
	t.Log("Cluster API's core manager, a local process, reaches the in-place update hooks of Talon's control-plane manager, another")
	s.expectInPlaceHooks(c)

	s.talon("down", "--out", s.out)
	for _, proc := range managers {
		s.g.Expect(proc.Alive()).To(BeFalse(), "%s (pid %d) still runs", proc.Name, proc.PID)
	}
	s.g.Expect(existing.Running()).To(BeTrue(), "the existing cluster keeps running")
	// The API server removes a deleted CRD once it has removed its objects.
	s.g.Eventually(func(g Gomega) {
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		g.Expect(c.List(ctx, crds)).To(Succeed())
		for _, crd := range crds.Items {
			g.Expect(crd.Spec.Group).NotTo(Or(HaveSuffix("cluster.x-k8s.io"), Equal("cert-manager.io")), "CRD %s is left", crd.Name)
		}
	}).WithTimeout(time.Minute).Should(Succeed())
	entries, err := os.ReadDir(s.out)
	s.g.Expect(err).NotTo(HaveOccurred())
	s.g.Expect(entries).To(BeEmpty())
}
