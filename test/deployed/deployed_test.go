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
	"ghcr.io/talon-capi/talon-bootstrap-manager:dev":                            "make docker-build",
	"ghcr.io/talon-capi/talon-controlplane-manager:dev":                         "make docker-build",
	"ghcr.io/talon-capi/talon-infrastructure-manager:dev":                       "make docker-build",
	"registry.k8s.io/cluster-api/cluster-api-controller:" + capiVersion:         "make docker-build",
	"quay.io/jetstack/cert-manager-controller:" + quickstart.CertManagerVersion: "make cert-manager",
	"quay.io/jetstack/cert-manager-webhook:" + quickstart.CertManagerVersion:    "make cert-manager",
	"quay.io/jetstack/cert-manager-cainjector:" + quickstart.CertManagerVersion: "make cert-manager",
}

// capiVersion is the Cluster API release Talon is built and tested with (go.mod).
const capiVersion = "v1.14.2"

// providerNamespaces are where clusterctl installs the managers.
var providerNamespaces = []string{"cert-manager", "capi-system", "talon-bootstrap-system", "talon-control-plane-system", "talon-infrastructure-system"}

func TestMain(m *testing.M) {
	code := m.Run()
	clusters.RemovePrograms()
	os.Exit(code)
}

// TestProvidersAsPods runs talon up with its managers as Pods: a kubelet-run management
// cluster where clusterctl init installs cert-manager, Cluster API and Talon as Deployments,
// and a 1 + 1 cluster of simulator containers on it. Its workers are then scaled to 2, a
// cluster of Talon's ClusterClass is made, its topology upgraded and moved to a second
// management cluster with clusterctl move, and talon down deletes the first cluster and
// the management cluster, leaving nothing. Every manager is a Pod under its own
// ServiceAccount, and none may be refused anything.
func TestProvidersAsPods(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	pauseImage := checkPrerequisites(t)
	t.Setenv("HOME", t.TempDir())
	out := t.TempDir()
	planeDir := filepath.Join(out, quickstart.PlaneDirName)
	const classNamespace, className = "topology", "pods-class"
	t.Cleanup(func() {
		// Whatever a failed run left: the management cluster, then the clusters' containers.
		if p, err := plane.Open(planeDir, testLog{t}); err == nil {
			if t.Failed() && p.Running() {
				logManagers(t, p)
			}
			if err := p.Remove(context.Background()); err != nil {
				t.Errorf("Failed to remove the management cluster: %v", err)
			}
		}
		for _, name := range []string{"pods", className} {
			dockertest.RemoveLabelled(t, map[string]string{dockerruntime.LabelCluster: name})
		}
	})

	t.Log("talon up --managers pods: clusterctl init installs cert-manager, Cluster API and Talon as Deployments, then a 1 + 1 cluster")
	start := time.Now()
	_, err := quickstart.Up(ctx, quickstart.Options{
		Name: "pods", Namespace: "default", ControlPlanes: 1, Workers: 1, KubernetesVersion: "v1.36.3", Runtime: quickstart.RuntimeDocker,
		BinDir: envtest.BinDir(), ClusterctlConfig: filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml"), OutDir: out,
		ManagersAsPods: true, PauseImage: pauseImage, Timeout: 6 * time.Minute, Out: testLog{t},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("talon up took %s", time.Since(start).Round(time.Second))
	m := &managementCluster{cluster: "pods"}
	m.p, err = plane.Open(planeDir, testLog{t})
	g.Expect(err).NotTo(HaveOccurred())
	m.c, err = client.New(mustConfig(g, m.p.Kubeconfig()), client.Options{Scheme: quickstart.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	m.expectManagersRunning(t)
	workload, err := client.New(mustConfig(g, filepath.Join(out, "pods", "kubeconfig")), client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { g.Expect(clusters.ReadyNodes(ctx, g, workload)).To(HaveLen(2)) }).WithTimeout(time.Minute).Should(Succeed())

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
	clusters.CreateClassCluster(ctx, g, t.Logf, m.c, envtest.BinDir(), filepath.Join(envtest.RepoRoot(), "out", "clusterclass-talos-docker.yaml"),
		classNamespace, className, dockertest.SimImage())
	clusters.UpgradeClassCluster(ctx, g, t.Logf, m.c, classNamespace, className)

	t.Log("clusterctl move of the ClusterClass cluster to a second management cluster (managers as processes), which deletes it")
	m.moveAndDelete(t, classNamespace, className)
	m.expectNoRefusals(t)

	t.Log("talon down deletes the cluster and removes the management cluster")
	start = time.Now()
	clusters.Containers(ctx, g, "pods") // there are some
	g.Expect(quickstart.Down(ctx, quickstart.DownOptions{OutDir: out, Timeout: 5 * time.Minute, Out: testLog{t}})).To(Succeed())
	left, err := dockertest.Leftovers(ctx, map[string]string{dockerruntime.LabelCluster: "pods"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeEmpty())
	entries, err := os.ReadDir(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty(), "talon down removes the management cluster and the cluster's files")
	t.Logf("talon down took %s", time.Since(start).Round(time.Second))
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
	g.Expect(quickstart.InstallProviders(ctx, target, filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml"), quickstart.RuntimeDocker)).To(Succeed())
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
	ctx := t.Context()
	pauseImage := checkPrerequisites(t)
	root := envtest.RepoRoot()
	m := &managementCluster{cluster: cluster, config: filepath.Join(root, "out", "clusterctl.yaml")}
	m.certManager = quickstart.CertManagerManifest(m.config)
	for _, file := range []string{m.config, m.certManager} {
		if _, err := os.Stat(file); err != nil {
			t.Fatalf("run 'make release-manifests cert-manager' first: %v", err)
		}
	}
	t.Setenv("HOME", t.TempDir())

	start := time.Now()
	var err error
	m.p, err = plane.Start(ctx, plane.Options{Dir: filepath.Join(t.TempDir(), "plane"), BinDir: envtest.BinDir(), Node: true, PauseImage: pauseImage, Log: testLog{t}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := m.p.Remove(context.Background()); err != nil {
			t.Errorf("Failed to remove the management cluster: %v", err)
		}
		dockertest.RemoveLabelled(t, map[string]string{dockerruntime.LabelCluster: cluster})
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

// checkPrerequisites skips the test, or fails it when its layer is required, if this
// machine cannot run a kubelet, and fails it when an image its Pods or nodes run is not in
// the Docker Engine. It returns the Pod sandbox image.
func checkPrerequisites(t *testing.T) (pauseImage string) {
	t.Helper()
	ctx := t.Context()
	pauseImage = cmp.Or(os.Getenv("TALON_PAUSE_IMAGE"), plane.DefaultPauseImage)
	require.Layer(t, Layer, plane.CheckNode(ctx, envtest.BinDir(), pauseImage))
	for image, how := range images {
		if _, err := dockertest.Docker(ctx, "image", "inspect", image); err != nil {
			t.Fatalf("image %s is missing: run '%s' first", image, how)
		}
	}
	if _, err := dockertest.Docker(ctx, "image", "inspect", dockertest.SimImage()); err != nil {
		t.Fatalf("image %s is missing: run 'make sim-image' first", dockertest.SimImage())
	}
	return pauseImage
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
			// only the infrastructure provider's runs as root when it mounts the node's files:
			// the Docker socket (its owner's), the boot service's directories (whose ports
			// need capabilities Kubernetes grants only to root).
			spec := d.Spec.Template.Spec
			hostFiles := slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil })
			g.Expect(spec.SecurityContext).NotTo(BeNil(), "Deployment %s/%s", ns, d.Name)
			g.Expect(ptr.Deref(spec.SecurityContext.RunAsNonRoot, false)).To(Equal(!hostFiles), "Deployment %s/%s", ns, d.Name)
			for _, c := range spec.Containers {
				g.Expect(c.SecurityContext).NotTo(BeNil(), "Deployment %s/%s", ns, d.Name)
				g.Expect(ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false)).To(BeTrue(), "Deployment %s/%s", ns, d.Name)
				g.Expect(ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true)).To(BeFalse(), "Deployment %s/%s", ns, d.Name)
				// Every capability dropped; only the boot service gets two back, and host networking.
				g.Expect(c.SecurityContext.Capabilities).NotTo(BeNil(), "Deployment %s/%s", ns, d.Name)
				g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")), "Deployment %s/%s", ns, d.Name)
				boot := slices.Contains(c.Args, "--boot-service")
				if !boot {
					g.Expect(c.SecurityContext.Capabilities.Add).To(BeEmpty(), "Deployment %s/%s", ns, d.Name)
				}
				g.Expect(spec.HostNetwork).To(Equal(boot), "Deployment %s/%s: host networking is the boot service's only", ns, d.Name)
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
