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
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega" //nolint:staticcheck // the assertions read as the tests' do
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	dockertest "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// PodsLayer is the test layer of the kubelet-run management cluster, where the managers run
// as Pods (TALON_REQUIRE).
const PodsLayer = "kubelet"

// podImages are the images every Pod of a management cluster runs, with the make target
// that builds each; no image is pulled, so each must be in the Docker Engine under exactly
// this name.
var podImages = map[string]string{
	"ghcr.io/talon-capi/talon-bootstrap-manager:dev":                            "make docker-build",
	"ghcr.io/talon-capi/talon-controlplane-manager:dev":                         "make docker-build",
	"ghcr.io/talon-capi/talon-infrastructure-manager:dev":                       "make docker-build",
	"registry.k8s.io/cluster-api/cluster-api-controller:" + CAPIVersion:         "make docker-build",
	"quay.io/jetstack/cert-manager-controller:" + quickstart.CertManagerVersion: "make cert-manager",
	"quay.io/jetstack/cert-manager-webhook:" + quickstart.CertManagerVersion:    "make cert-manager",
	"quay.io/jetstack/cert-manager-cainjector:" + quickstart.CertManagerVersion: "make cert-manager",
}

// CAPIVersion is the Cluster API release Talon is built and tested with (go.mod).
const CAPIVersion = "v1.14.2"

// ProviderNamespaces are where clusterctl installs the managers.
var ProviderNamespaces = []string{"cert-manager", "capi-system", "talon-bootstrap-system", ControlPlaneNamespace, "talon-infrastructure-system"}

// ControlPlaneNamespace is where clusterctl installs Talon's control-plane manager.
const ControlPlaneNamespace = "talon-control-plane-system"

// SideroNamespaces are where clusterctl installs Sidero Labs' bootstrap and control-plane
// managers.
var SideroNamespaces = []string{"cabpt-system", "cacppt-system"}

// PodsPrerequisites skips the test, or fails it when its layer is required, if this
// machine cannot run a kubelet, and fails it when an image its Pods or nodes run is not in
// the Docker Engine. It returns the Pod sandbox image.
func PodsPrerequisites(t *testing.T) (pauseImage string) {
	t.Helper()
	ctx := t.Context()
	pauseImage = cmp.Or(os.Getenv("TALON_PAUSE_IMAGE"), plane.DefaultPauseImage)
	require.Layer(t, PodsLayer, plane.CheckNode(ctx, envtest.BinDir(), pauseImage))
	for image, how := range podImages {
		if _, err := dockertest.Docker(ctx, "image", "inspect", image); err != nil {
			t.Fatalf("image %s is missing: run '%s' first", image, how)
		}
	}
	if _, err := dockertest.Docker(ctx, "image", "inspect", dockertest.SimImage()); err != nil {
		t.Fatalf("image %s is missing: run 'make sim-image' first", dockertest.SimImage())
	}
	return pauseImage
}

// StartPodsPlane starts a management cluster with a kubelet-run node in dir, for Pods: it
// checks the prerequisites first (PodsPrerequisites), removes the cluster when the test ends
// and, when the test failed, logs the end of every manager's log before that.
func StartPodsPlane(t *testing.T, dir string, log io.Writer) *plane.Plane {
	t.Helper()
	pauseImage := PodsPrerequisites(t)
	p, err := plane.Start(t.Context(), plane.Options{Dir: dir, BinDir: envtest.BinDir(), Node: true, PauseImage: pauseImage, Log: log})
	if err != nil {
		t.Fatalf("Failed to start the management cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Remove(context.Background()); err != nil {
			t.Errorf("Failed to remove the management cluster: %v", err)
		}
	})
	// Cleanups run last-in first-out: this one, while the cluster still runs.
	t.Cleanup(func() {
		if t.Failed() {
			LogManagers(t, p)
		}
	})
	return p
}

// ExpectManagersRunning checks that every manager runs as one available Pod under its own
// ServiceAccount, none scaled down.
func ExpectManagersRunning(t *testing.T, c client.Client) {
	t.Helper()
	g := NewWithT(t)
	for _, ns := range ProviderNamespaces {
		var deployments appsv1.DeploymentList
		g.Expect(c.List(t.Context(), &deployments, client.InNamespace(ns))).To(Succeed())
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

// ExpectNoRefusals fails the test when any manager's log shows an RBAC refusal, or a
// container restarted other than the managers of the namespaces in killed, which the test
// killed itself (KillManager). Every other restart fails it, whatever its cause: a manager
// the kubelet killed for its liveness probe, or one that exited because it could not renew
// its leader lease in time, is one a user would see restart too (docs/managers.md gives the
// settings of a small management cluster).
func ExpectNoRefusals(t *testing.T, p *plane.Plane, killed ...string) {
	t.Helper()
	g := NewWithT(t)
	t.Log("No manager was refused anything by the management cluster's RBAC")
	logs, restarts, err := managerLogs(t.Context(), p)
	g.Expect(err).NotTo(HaveOccurred())
	// How the API server words an RBAC refusal: `<resource> is forbidden: User "<name>"
	// cannot <verb> ...`; klog quotes an error value, so its quotes come escaped.
	forbidden := regexp.MustCompile(`forbidden: User \\?"`)
	for pod, log := range logs {
		for line := range strings.Lines(log) {
			g.Expect(forbidden.MatchString(line)).To(BeFalse(), "the log of %s says: %s", pod, line)
		}
	}
	// cert-manager's three, Cluster API's, the infrastructure provider's, and Talon's or
	// Sidero's bootstrap and control-plane managers.
	g.Expect(logs).To(HaveLen(7), "one container per manager")
	for container, r := range restarts {
		ns, _, _ := strings.Cut(container, "/")
		if !slices.Contains(killed, ns) {
			t.Errorf("%s %s", container, r)
		}
	}
}

// ManagerLogs are the logs of every manager (every container in the providers' namespaces,
// Talon's and Sidero's), by "namespace/pod/container", read through the kubelet.
func ManagerLogs(t *testing.T, p *plane.Plane) map[string]string {
	t.Helper()
	logs, _, err := managerLogs(t.Context(), p)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return logs
}

// managerLogs are the logs of every container in the providers' namespaces, by
// "namespace/pod/container", read through the kubelet, and for each container that restarted
// how many times and why it last ended, with the last lines it wrote before (its log then
// begins with what it wrote before its last restart).
func managerLogs(ctx context.Context, p *plane.Plane) (logs, restarts map[string]string, err error) {
	clientset, err := clientsetOf(p)
	if err != nil {
		return nil, nil, err
	}
	logs, restarts = map[string]string{}, map[string]string{}
	var errs []error
	for _, ns := range slices.Concat(ProviderNamespaces, SideroNamespaces) {
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
				for _, status := range pod.Status.ContainerStatuses {
					if status.Name != container.Name || status.RestartCount == 0 {
						continue
					}
					previous, err := clientset.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container.Name, Previous: true}).DoRaw(ctx)
					if err == nil {
						logs[key] = string(previous) + logs[key]
					}
					restarts[key] = describeRestart(status, string(previous)) + podEvents(ctx, clientset, &pod)
				}
			}
		}
	}
	return logs, restarts, errors.Join(errs...)
}

// describeRestart says how many times a container restarted, why it last ended, and the last
// lines it wrote before: the kubelet's reason (Error, OOMKilled, Completed) and exit code
// tell a crash from a failed liveness probe, which ends in SIGTERM's 143 or SIGKILL's 137.
func describeRestart(status corev1.ContainerStatus, previousLog string) string {
	ended := "for a reason the kubelet no longer knows"
	if last := status.LastTerminationState.Terminated; last != nil {
		ended = fmt.Sprintf("with %s, exit code %d, signal %d, at %s %s", last.Reason, last.ExitCode, last.Signal,
			last.FinishedAt.UTC().Format(time.RFC3339), last.Message)
	}
	lines := strings.Split(strings.TrimRight(previousLog, "\n"), "\n")
	return fmt.Sprintf("restarted %d times; its last run ended %s; the last lines it wrote:\n%s",
		status.RestartCount, ended, strings.Join(lines[max(0, len(lines)-40):], "\n"))
}

// podEvents lists the events of pod, where the kubelet says why it restarted a container (a
// failed liveness probe, say), as lines after a heading ("" when there are none).
func podEvents(ctx context.Context, clientset *kubernetes.Clientset, pod *corev1.Pod) string {
	list, err := clientset.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
	if err != nil {
		return "\nits Pod's events could not be read: " + err.Error()
	}
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "\n%s %s %s (%d times): %s", e.LastTimestamp.UTC().Format(time.RFC3339), e.Type, e.Reason, e.Count, e.Message)
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nits Pod's events:" + b.String()
}

// clientsetOf is a clientset of p's API server.
func clientsetOf(p *plane.Plane) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig())
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// KillManager kills the manager of namespace ns with SIGKILL, as the kernel's OOM killer
// would: docker kill sends the signal to its container's first process, the manager. The
// kubelet then starts the container again (its Pod's restart policy), as it would after any
// crash; KillManager returns once the new container is ready.
func KillManager(tb testing.TB, p *plane.Plane, ns string) {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	clientset, err := clientsetOf(p)
	g.Expect(err).NotTo(HaveOccurred())
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).To(HaveLen(1), "one manager Pod in %s", ns)
	pod := pods.Items[0]
	g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1), "Pod %s/%s has one container", ns, pod.Name)
	before := pod.Status.ContainerStatuses[0]
	runtime, id, _ := strings.Cut(before.ContainerID, "://")
	g.Expect(runtime).To(Equal("docker"), "the container %s of Pod %s/%s runs in the Docker Engine", before.ContainerID, ns, pod.Name)
	_, err = dockertest.Docker(ctx, "kill", "--signal", "KILL", id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		now, err := clientset.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now.Status.ContainerStatuses).To(HaveLen(1))
		status := now.Status.ContainerStatuses[0]
		g.Expect(status.RestartCount).To(BeNumerically(">", before.RestartCount), "the kubelet restarted %s", pod.Name)
		g.Expect(status.Ready).To(BeTrue(), "%s is ready again", pod.Name)
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	tb.Logf("The manager of %s (Pod %s, container %.12s) killed with SIGKILL and started again by the kubelet", ns, pod.Name, id)
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

// LogManagers logs the end of every manager's log, to tell why a step failed.
func LogManagers(t *testing.T, p *plane.Plane) {
	t.Helper()
	logs, _, err := managerLogs(context.Background(), p)
	if err != nil {
		t.Logf("Not every manager's log could be read: %v", err)
	}
	for pod, log := range logs {
		lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
		t.Logf("The last lines of %s:\n%s", pod, strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
}
