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

// Package deployed runs Talon as users deploy it: clusterctl init installs cert-manager,
// Cluster API's core provider and Talon's three providers as Deployments on a real
// kubelet-run management cluster (internal/plane with a node), whose managers run as Pods
// under their own ServiceAccounts, with the certificates cert-manager issues; a cluster
// is then made, scaled and deleted, and no manager may have been refused anything.
package deployed

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// Layer is the test layer of the kubelet-run management cluster (TALON_REQUIRE).
const Layer = "kubelet"

// Images every Pod of the test runs; no image is pulled, so each must be in the Docker
// Engine under exactly this name.
var images = map[string]string{
	"ghcr.io/talon-capi/talon-bootstrap-manager:dev":                    "make docker-build",
	"ghcr.io/talon-capi/talon-controlplane-manager:dev":                 "make docker-build",
	"ghcr.io/talon-capi/talon-infrastructure-manager:dev":               "make docker-build",
	"registry.k8s.io/cluster-api/cluster-api-controller:" + capiVersion: "make docker-build",
	"quay.io/jetstack/cert-manager-controller:" + certManagerVersion:    "make cert-manager",
	"quay.io/jetstack/cert-manager-webhook:" + certManagerVersion:       "make cert-manager",
	"quay.io/jetstack/cert-manager-cainjector:" + certManagerVersion:    "make cert-manager",
}

const (
	capiVersion        = "v1.14.2"
	certManagerVersion = "v1.19.1"
)

// providerNamespaces are where clusterctl installs the managers.
var providerNamespaces = []string{"cert-manager", "capi-system", "talon-bootstrap-system", "talon-control-plane-system", "talon-infrastructure-system"}

// TestProvidersAsPods installs everything with clusterctl init on a kubelet-run management
// cluster and makes a 1 + 1 cluster of simulator containers, scales its workers to 2 and
// deletes it, with every manager a Pod under its own ServiceAccount.
func TestProvidersAsPods(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	m := startManagementCluster(t, "pods")

	t.Log("clusterctl init installs cert-manager, Cluster API and Talon as Deployments")
	start := time.Now()
	// CLUSTER_TOPOLOGY: Talon's ClusterClass needs Cluster API's topology reconciler (docs/clusterclass.md).
	env := []string{"TALON_DOCKER_UNPRIVILEGED_NODES=true", "TALON_LOG_LEVEL=2", "CLUSTER_TOPOLOGY=true"}
	out, err := plane.RunClusterctl(ctx, envtest.BinDir(), m.p.Kubeconfig(), env, testLog{t}, "init", "--config", m.config,
		"--core", "cluster-api", "--bootstrap", "talon", "--control-plane", "talon", "--infrastructure", "talon", "--wait-providers", "--wait-provider-timeout", "180")
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	t.Logf("clusterctl init took %s", time.Since(start).Round(time.Second))
	m.expectManagersRunning(t)

	workload := m.createCluster(t, "--infrastructure", "talon")

	t.Log("Scaling the workers to 2")
	start = time.Now()
	md := &clusterv1.MachineDeployment{}
	g.Expect(m.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: m.cluster + "-workers"}, md)).To(Succeed())
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To[int32](2)
	g.Expect(m.c.Patch(ctx, md, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(clusters.UsableMachines(ctx, g, m.c, "default", m.cluster)).To(HaveLen(3))
		g.Expect(clusters.ReadyNodes(ctx, g, workload)).To(HaveLen(3))
	}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("Scaled in %s", time.Since(start).Round(time.Second))

	t.Log("A cluster of Talon's ClusterClass, its topology then upgraded")
	const classNamespace, className = "topology", "pods-class"
	root := envtest.RepoRoot()
	clusters.CreateClassCluster(ctx, g, t.Logf, m.c, envtest.BinDir(), filepath.Join(root, "out", "clusterclass-talos-docker.yaml"),
		classNamespace, className, dockertest.SimImage())
	m.others = append(m.others, className)
	clusters.UpgradeClassCluster(ctx, g, t.Logf, m.c, classNamespace, className)

	t.Log("clusterctl move of the ClusterClass cluster to a second management cluster (managers as processes), which deletes it")
	m.moveAndDelete(t, classNamespace, className)

	m.deleteCluster(t)
	m.expectNoRefusals(t)
}

// moveAndDelete moves the Docker cluster name in namespace ns with clusterctl move to a
// second management cluster, the process-run plane with Cluster API and Talon installed by
// clusterctl, which then runs it as it was and deletes it.
func (m *managementCluster) moveAndDelete(t *testing.T, ns, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	target, err := plane.Start(ctx, plane.Options{Dir: filepath.Join(t.TempDir(), "target"), BinDir: envtest.BinDir(), Log: testLog{t}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = target.Remove(context.Background()) })
	g.Expect(quickstart.InstallProviders(ctx, target, filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml"), quickstart.RuntimeDocker)).To(Succeed())
	to, err := client.New(mustConfig(g, target.Kubeconfig()), client.Options{Scheme: quickstart.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	clusters.MoveAndDelete(ctx, g, t.Logf, testLog{t}, envtest.BinDir(), m.p.Kubeconfig(), target.Kubeconfig(), m.c, to, ns, name)
	g.Expect(target.Remove(ctx)).To(Succeed())
}

// managementCluster is a test's kubelet-run management cluster and the workload cluster it
// makes on it.
type managementCluster struct {
	p *plane.Plane
	c client.Client
	// config is a clusterctl.yaml of Talon's local repository and this build's cert-manager.
	config string
	// certManager is cert-manager's install manifest.
	certManager string
	// cluster is the name of the workload cluster.
	cluster string
	// others are the names of other Docker clusters the test makes, whose containers are
	// removed with the management cluster's (after its managers stopped).
	others []string
}

// startManagementCluster starts a kubelet-run management cluster, after checking that
// every image its Pods run is in the Docker Engine, and removes it (and the containers of
// the workload cluster named cluster) when the test ends.
func startManagementCluster(t *testing.T, cluster string) *managementCluster {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	pauseImage := cmp.Or(os.Getenv("TALON_PAUSE_IMAGE"), plane.DefaultPauseImage)
	require.Layer(t, Layer, plane.CheckNode(ctx, envtest.BinDir(), pauseImage))
	for image, how := range images {
		if _, err := dockertest.Docker(ctx, "image", "inspect", image); err != nil {
			t.Fatalf("image %s is missing: run '%s' first", image, how)
		}
	}
	if _, err := dockertest.Docker(ctx, "image", "inspect", dockertest.SimImage()); err != nil {
		t.Fatalf("image %s is missing: run 'make sim-image' first", dockertest.SimImage())
	}
	root := envtest.RepoRoot()
	m := &managementCluster{cluster: cluster}
	// clusterctl reads a file:// URL as a repository: <name>/<version>/<file>.
	m.certManager = filepath.Join(root, "out", "cert-manager", "cert-manager", certManagerVersion, "cert-manager.yaml")
	base, err := os.ReadFile(filepath.Join(root, "out", "clusterctl.yaml"))
	if err != nil {
		t.Fatalf("run 'make release-manifests' first: %v", err)
	}
	if _, err := os.Stat(m.certManager); err != nil {
		t.Fatalf("run 'make cert-manager' first: %v", err)
	}
	// clusterctl installs cert-manager from this machine's build, not from GitHub.
	m.config = filepath.Join(t.TempDir(), "clusterctl.yaml")
	g.Expect(os.WriteFile(m.config, fmt.Appendf(base, "cert-manager:\n  url: file://%s\n  version: %s\n", m.certManager, certManagerVersion), 0o600)).To(Succeed())
	t.Setenv("HOME", t.TempDir())

	start := time.Now()
	m.p, err = plane.Start(ctx, plane.Options{Dir: filepath.Join(t.TempDir(), "plane"), BinDir: envtest.BinDir(), Node: true, PauseImage: pauseImage, Log: testLog{t}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := m.p.Remove(context.Background()); err != nil {
			t.Errorf("Failed to remove the management cluster: %v", err)
		}
		for _, name := range append([]string{cluster}, m.others...) {
			dockertest.RemoveLabelled(t, map[string]string{dockerruntime.LabelCluster: name})
		}
	})
	// Cleanups run last-in first-out: this one, while the cluster still runs.
	t.Cleanup(func() {
		if t.Failed() {
			logManagers(t, m.p)
		}
	})
	t.Logf("The management cluster's node was Ready after %s", time.Since(start).Round(time.Second))
	m.c, err = client.New(mustConfig(g, m.p.Kubeconfig()), client.Options{Scheme: quickstart.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return m
}

// expectManagersRunning checks that every manager runs as one available Pod under its own
// ServiceAccount, none scaled down.
func (m *managementCluster) expectManagersRunning(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	for _, ns := range providerNamespaces {
		var deployments appsv1.DeploymentList
		g.Expect(m.c.List(t.Context(), &deployments, client.InNamespace(ns))).To(Succeed())
		g.Expect(deployments.Items).NotTo(BeEmpty(), "namespace %s", ns)
		for _, d := range deployments.Items {
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](1)), "Deployment %s/%s is not scaled down", ns, d.Name)
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1), "Deployment %s/%s", ns, d.Name)
			g.Expect(d.Spec.Template.Spec.ServiceAccountName).NotTo(BeEmpty())
			if !strings.HasPrefix(ns, "talon-") {
				continue
			}
			// Talon's managers work from a read-only root file system, without privileges;
			// only the Docker provider's runs as root, the owner of the Docker socket.
			spec := d.Spec.Template.Spec
			docker := slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil })
			g.Expect(spec.SecurityContext).NotTo(BeNil(), "Deployment %s/%s", ns, d.Name)
			g.Expect(ptr.Deref(spec.SecurityContext.RunAsNonRoot, false)).To(Equal(!docker), "Deployment %s/%s", ns, d.Name)
			for _, c := range spec.Containers {
				g.Expect(c.SecurityContext).NotTo(BeNil(), "Deployment %s/%s", ns, d.Name)
				g.Expect(ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false)).To(BeTrue(), "Deployment %s/%s", ns, d.Name)
				g.Expect(ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true)).To(BeFalse(), "Deployment %s/%s", ns, d.Name)
			}
		}
	}
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

// deleteCluster deletes the workload cluster and checks that its Machines and containers go.
func (m *managementCluster) deleteCluster(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	t.Log("Deleting the cluster removes its Machines and containers")
	start := time.Now()
	clusters.Containers(ctx, g, m.cluster) // there are some
	cluster := &clusterv1.Cluster{}
	g.Expect(m.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: m.cluster}, cluster)).To(Succeed())
	g.Expect(m.c.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(m.c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}))
	}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(BeTrue())
	left, err := dockertest.Leftovers(ctx, map[string]string{dockerruntime.LabelCluster: m.cluster})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeEmpty())
	t.Logf("Deleted in %s", time.Since(start).Round(time.Second))
}

// expectNoRefusals fails the test when any manager's log shows an RBAC refusal, or a
// container restarted.
func (m *managementCluster) expectNoRefusals(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	t.Log("No manager was refused anything by the management cluster's RBAC")
	logs, err := managerLogs(t.Context(), m.p)
	g.Expect(err).NotTo(HaveOccurred())
	// How the API server words an RBAC refusal: `<resource> is forbidden: User "<name>"
	// cannot <verb> ...`; klog quotes an error value, so its quotes come escaped.
	forbidden := regexp.MustCompile(`forbidden: User \\?"`)
	for pod, log := range logs {
		for line := range strings.Lines(log) {
			g.Expect(forbidden.MatchString(line)).To(BeFalse(), "the log of %s says: %s", pod, line)
		}
	}
	g.Expect(logs).To(HaveLen(len(images)), "one container per image")
}

// managerLogs are the logs of every container in the providers' namespaces, by
// "namespace/pod/container", read through the kubelet.
func managerLogs(ctx context.Context, p *plane.Plane) (map[string]string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig())
	if err != nil {
		return nil, err
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	logs := map[string]string{}
	var errs []error
	for _, ns := range providerNamespaces {
		pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, pod := range pods.Items {
			for _, container := range pod.Spec.Containers {
				key := ns + "/" + pod.Name + "/" + container.Name
				raw, err := clientset.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container.Name}).DoRaw(ctx)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s (phase %s, %s): %w", key, pod.Status.Phase, containerStates(pod.Status.ContainerStatuses), err))
					continue
				}
				logs[key] = string(raw)
				// What a container logged before it restarted (the test fails on restarts).
				for _, status := range pod.Status.ContainerStatuses {
					if status.Name != container.Name || status.RestartCount == 0 {
						continue
					}
					errs = append(errs, fmt.Errorf("%s restarted %d times", key, status.RestartCount))
					previous, err := clientset.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container.Name, Previous: true}).DoRaw(ctx)
					if err == nil {
						logs[key] = string(previous) + logs[key]
					}
				}
			}
		}
	}
	return logs, errors.Join(errs...)
}

// containerStates says how each container of a Pod is, for error messages.
func containerStates(statuses []corev1.ContainerStatus) string {
	var states []string
	for _, s := range statuses {
		switch {
		case s.State.Waiting != nil:
			states = append(states, fmt.Sprintf("%s waiting: %s %s (restarts %d)", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message, s.RestartCount))
		case s.State.Terminated != nil:
			states = append(states, fmt.Sprintf("%s terminated: %s %s", s.Name, s.State.Terminated.Reason, s.State.Terminated.Message))
		default:
			states = append(states, fmt.Sprintf("%s running (ready %t, restarts %d)", s.Name, s.Ready, s.RestartCount))
		}
	}
	return strings.Join(states, "; ")
}

// logManagers logs the end of every manager's log, to tell why a step failed.
func logManagers(t *testing.T, p *plane.Plane) {
	t.Helper()
	logs, err := managerLogs(context.Background(), p)
	if err != nil {
		t.Logf("Not every manager's log could be read: %v", err)
	}
	for pod, log := range logs {
		lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
		t.Logf("The last lines of %s:\n%s", pod, strings.Join(lines[max(0, len(lines)-30):], "\n"))
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
