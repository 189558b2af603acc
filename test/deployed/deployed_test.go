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
	pauseImage := cmp.Or(os.Getenv("TALON_PAUSE_IMAGE"), plane.DefaultPauseImage)
	require.Layer(t, Layer, plane.CheckNode(ctx, envtest.BinDir(), pauseImage))
	for image, how := range images {
		if _, err := dockertest.Docker(ctx, "image", "inspect", image); err != nil {
			t.Fatalf("image %s is missing: run '%s' first", image, how)
		}
	}
	simImage := dockertest.SimImage()
	if _, err := dockertest.Docker(ctx, "image", "inspect", simImage); err != nil {
		t.Fatalf("image %s is missing: run 'make sim-image' first", simImage)
	}
	root := envtest.RepoRoot()
	// clusterctl reads a file:// URL as a repository: <name>/<version>/<file>.
	certManager := filepath.Join(root, "out", "cert-manager", "cert-manager", certManagerVersion, "cert-manager.yaml")
	base, err := os.ReadFile(filepath.Join(root, "out", "clusterctl.yaml"))
	if err != nil {
		t.Fatalf("run 'make release-manifests' first: %v", err)
	}
	if _, err := os.Stat(certManager); err != nil {
		t.Fatalf("run 'make cert-manager' first: %v", err)
	}
	// clusterctl installs cert-manager from this machine's build, not from GitHub.
	config := filepath.Join(t.TempDir(), "clusterctl.yaml")
	g.Expect(os.WriteFile(config, fmt.Appendf(base, "cert-manager:\n  url: file://%s\n  version: %s\n", certManager, certManagerVersion), 0o600)).To(Succeed())
	t.Setenv("HOME", t.TempDir())

	start := time.Now()
	p, err := plane.Start(ctx, plane.Options{Dir: filepath.Join(t.TempDir(), "plane"), BinDir: envtest.BinDir(), Node: true, PauseImage: pauseImage, Log: testLog{t}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := p.Remove(context.Background()); err != nil {
			t.Errorf("Failed to remove the management cluster: %v", err)
		}
		dockertest.RemoveLabelled(t, map[string]string{"cluster.x-k8s.io/cluster-name": "pods"})
	})
	// Cleanups run last-in first-out: this one, while the cluster still runs.
	t.Cleanup(func() {
		if t.Failed() {
			logManagers(t, p)
		}
	})
	t.Logf("The management cluster's node was Ready after %s", time.Since(start).Round(time.Second))

	t.Log("clusterctl init installs cert-manager, Cluster API and Talon as Deployments")
	start = time.Now()
	env := []string{"TALON_DOCKER_UNPRIVILEGED_NODES=true", "TALON_LOG_LEVEL=2"}
	out, err := plane.RunClusterctl(ctx, envtest.BinDir(), p.Kubeconfig(), env, testLog{t}, "init", "--config", config,
		"--core", "cluster-api", "--bootstrap", "talon", "--control-plane", "talon", "--infrastructure", "talon", "--wait-providers", "--wait-provider-timeout", "180")
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	t.Logf("clusterctl init took %s", time.Since(start).Round(time.Second))
	c, err := client.New(mustConfig(g, p.Kubeconfig()), client.Options{Scheme: quickstart.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	for _, ns := range providerNamespaces {
		var deployments appsv1.DeploymentList
		g.Expect(c.List(ctx, &deployments, client.InNamespace(ns))).To(Succeed())
		g.Expect(deployments.Items).NotTo(BeEmpty(), "namespace %s", ns)
		for _, d := range deployments.Items {
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](1)), "Deployment %s/%s is not scaled down", ns, d.Name)
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1), "Deployment %s/%s", ns, d.Name)
			g.Expect(d.Spec.Template.Spec.ServiceAccountName).NotTo(BeEmpty())
		}
	}

	t.Log("A 1 + 1 cluster of simulator containers, from Talon's cluster template")
	start = time.Now()
	manifest, err := plane.RunClusterctl(ctx, envtest.BinDir(), p.Kubeconfig(), []string{"TALOS_IMAGE=" + simImage}, nil,
		"generate", "cluster", "pods", "--config", config, "--infrastructure", "talon", "--target-namespace", "default",
		"--kubernetes-version", "v1.36.3", "--control-plane-machine-count", "1", "--worker-machine-count", "1")
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := utilyaml.ToUnstructured(manifest)
	g.Expect(err).NotTo(HaveOccurred())
	// A webhook's Service gets its endpoint a moment after its Deployment is available.
	for i := range objs {
		g.Eventually(func() error {
			err := c.Create(ctx, &objs[i])
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	}
	kubeconfigSecret := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(clusters.UsableMachines(ctx, g, c, "default", "pods")).To(HaveLen(2))
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pods-kubeconfig"}, kubeconfigSecret)).To(Succeed())
	}).WithTimeout(6 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("The cluster's 2 Machines were Running with Ready Nodes after %s", time.Since(start).Round(time.Second))
	workloadConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfigSecret.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	workload, err := client.New(workloadConfig, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { g.Expect(clusters.ReadyNodes(ctx, g, workload)).To(HaveLen(2)) }).WithTimeout(time.Minute).Should(Succeed())

	t.Log("Scaling the workers to 2")
	start = time.Now()
	md := &clusterv1.MachineDeployment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pods-workers"}, md)).To(Succeed())
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To[int32](2)
	g.Expect(c.Patch(ctx, md, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(clusters.UsableMachines(ctx, g, c, "default", "pods")).To(HaveLen(3))
		g.Expect(clusters.ReadyNodes(ctx, g, workload)).To(HaveLen(3))
	}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("Scaled in %s", time.Since(start).Round(time.Second))

	t.Log("Deleting the cluster removes its Machines and containers")
	start = time.Now()
	cluster := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pods"}, cluster)).To(Succeed())
	g.Expect(c.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}))
	}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(BeTrue())
	left, err := dockertest.Leftovers(ctx, map[string]string{"cluster.x-k8s.io/cluster-name": "pods"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeEmpty())
	t.Logf("Deleted in %s", time.Since(start).Round(time.Second))

	t.Log("No manager was refused anything by the management cluster's RBAC")
	logs, err := managerLogs(ctx, p)
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
