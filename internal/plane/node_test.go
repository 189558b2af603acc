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

package plane

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// NodeLayer is the test layer of the kubelet-run plane (TALON_REQUIRE).
const NodeLayer = "kubelet"

// PauseImageEnv names the Pod sandbox image the tests give a plane with a node.
const PauseImageEnv = "TALON_PAUSE_IMAGE"

// hostState is what a plane with a node changes on the host and must put back.
type hostState struct {
	Sysctls     map[string]string
	KubeChains  []string // iptables chains named KUBE-*, in any table
	DockerUser  string   // the DOCKER-USER chain's rules
	NFTables    []string
	Mounts      []string // mounts below the plane's directory
	Containers  string   // Pod containers
	LogSymlinks []string // /var/log/containers entries that point below the plane's directory
	HostDirs    []string // which of the kubelet's fixed host directories exist
}

func snapshotHost(ctx context.Context, g Gomega, dir string) hostState {
	s := hostState{Sysctls: map[string]string{}}
	for _, key := range kubeletSysctls {
		if out, err := command(ctx, "sysctl", "--values", key); err == nil {
			s.Sysctls[key] = strings.TrimSpace(string(out))
		}
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		out, err := command(ctx, ipt+"-save")
		g.Expect(err).NotTo(HaveOccurred())
		for line := range strings.Lines(string(out)) {
			if strings.HasPrefix(line, ":KUBE-") {
				s.KubeChains = append(s.KubeChains, ipt+" "+strings.Fields(line)[0])
			}
		}
	}
	out, err := command(ctx, "iptables", "-S", "DOCKER-USER")
	g.Expect(err).NotTo(HaveOccurred())
	s.DockerUser = string(out)
	s.NFTables, err = nftTables(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	mounts, err := os.ReadFile("/proc/self/mounts")
	g.Expect(err).NotTo(HaveOccurred())
	for line := range strings.Lines(string(mounts)) {
		if fields := strings.Fields(line); len(fields) > 1 && strings.HasPrefix(fields[1], dir) {
			s.Mounts = append(s.Mounts, fields[1])
		}
	}
	containers, err := command(ctx, "docker", "ps", "--all", "--quiet", "--filter", "label="+podContainerLabel)
	g.Expect(err).NotTo(HaveOccurred())
	s.Containers = string(containers)
	for _, dir := range kubeletHostDirs {
		if _, err := os.Stat(dir); err == nil {
			s.HostDirs = append(s.HostDirs, dir)
		}
	}
	links, _ := filepath.Glob("/var/log/containers/*")
	for _, link := range links {
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, dir) {
			s.LogSymlinks = append(s.LogSymlinks, link)
		}
	}
	return s
}

// TestPlaneWithNode starts a plane with a node and shows that it is a real cluster: a
// Deployment of a locally built image runs under its own service account, which lists
// what its Role allows through the kubernetes Service and is refused the rest, reaches a
// container on another Docker network, and has its log read through the kubelet. Then the
// plane is killed (SIGKILL of every process it started), and the next plane with a node puts
// the host back after it before it starts; removing that one leaves the host as it was
// before the first: sysctls, iptables chains, nftables tables, mounts, Pod containers.
func TestPlaneWithNode(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	pauseImage := cmp.Or(os.Getenv(PauseImageEnv), DefaultPauseImage)
	require.Layer(t, NodeLayer, CheckNode(ctx, envtest.BinDir(), pauseImage))

	t.Log("The probe's image and a server on a Docker network of its own, as a Docker cluster's node is")
	image := "talon.test/plane-probe:" + fmt.Sprint(time.Now().UnixNano())
	build := t.TempDir()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(build, "probe"), "./testdata/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(os.WriteFile(filepath.Join(build, "Dockerfile"), []byte("FROM scratch\nCOPY probe /probe\nUSER 65532:65532\nENTRYPOINT [\"/probe\"]\n"), 0o600)).To(Succeed())
	_, err = docker.Docker(ctx, "build", "--quiet", "-t", image, build)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _, _ = docker.Docker(context.Background(), "image", "rm", "--force", image) })
	network := "talon-plane-test-" + fmt.Sprint(os.Getpid())
	_, err = docker.Docker(ctx, "network", "create", network)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _, _ = docker.Docker(context.Background(), "network", "rm", network) })
	_, err = docker.Docker(ctx, "run", "--detach", "--name", network, "--network", network, image, "serve", ":8080")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _, _ = docker.Docker(context.Background(), "rm", "--force", network) })
	serverIP, err := docker.Docker(ctx, "inspect", "--format", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", network)
	g.Expect(err).NotTo(HaveOccurred())
	probeURL := "http://" + strings.TrimSpace(serverIP) + ":8080/"

	// The host as it is before and after this plane, with no other plane with a node (of
	// another package's test) changing it in between.
	lock, err := takeNodeLock(ctx, testLog{t})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = lock.Close() })
	dir := filepath.Join(t.TempDir(), "plane")
	before := snapshotHost(ctx, g, dir)
	g.Expect(before.Containers).To(BeEmpty(), "no Pod of another kubelet")
	start := time.Now()
	p, err := Start(ctx, Options{Dir: dir, BinDir: envtest.BinDir(), Node: true, PauseImage: pauseImage, Log: testLog{t}, nodeLock: lock})
	g.Expect(err).NotTo(HaveOccurred())
	removed := false
	t.Cleanup(func() {
		if !removed {
			_ = p.Remove(context.Background())
		}
	})
	t.Logf("The plane's node was Ready and Pods could get tokens %s after it started", time.Since(start).Round(time.Millisecond))
	g.Expect(p.NodeHostIP()).NotTo(BeEmpty())
	running := snapshotHost(ctx, g, dir)
	g.Expect(running.KubeChains).NotTo(BeEmpty(), "kube-proxy programs the host's iptables")
	g.Expect(running.DockerUser).NotTo(Equal(before.DockerUser), "the plane lets Pods reach other Docker networks")
	g.Expect(running.HostDirs).To(ConsistOf(kubeletHostDirs), "the kubelet makes its fixed host directories")

	c, err := p.Client(client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	const ns = "probe"
	labels := map[string]string{"app": "probe"}
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
		}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "probe"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "probe"}},
		},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "listed-by-the-probe"}},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: "probe",
						Containers: []corev1.Container{{
							Name: "probe", Image: image, ImagePullPolicy: corev1.PullNever,
							Env: []corev1.EnvVar{{Name: "PROBE_URL", Value: probeURL}},
							SecurityContext: &corev1.SecurityContext{
								RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
								Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							},
						}},
					},
				},
			},
		},
	}
	for _, obj := range objects {
		g.Expect(c.Create(ctx, obj)).To(Succeed())
	}

	t.Log("The Deployment's Pod runs, and its log (read through the kubelet) shows what it could do")
	cfg, err := p.RESTConfig()
	g.Expect(err).NotTo(HaveOccurred())
	clientset, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	var log string
	g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
		raw, err := clientset.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		log = string(raw)
		g.Expect(log).To(ContainSubstring("get " + probeURL))
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("The probe's log:\n%s", log)
	g.Expect(log).To(MatchRegexp(`list configmaps via https://10\.96\.0\.1:443: 200 OK items .*\blisted-by-the-probe\b`))
	g.Expect(log).To(MatchRegexp(`list secrets via https://10\.96\.0\.1:443: 403 Forbidden .*system:serviceaccount:probe:probe`))
	g.Expect(log).To(ContainSubstring("get " + probeURL + ": 200 OK probe"))

	t.Log("The plane is killed: every process it started gets SIGKILL")
	for _, proc := range p.Processes() {
		_ = syscall.Kill(proc.PID, syscall.SIGKILL)
	}
	g.Eventually(func() bool { return slices.ContainsFunc(p.Processes(), Process.Alive) }).WithTimeout(30 * time.Second).Should(BeFalse())
	removed = true // nothing of it runs; the next plane puts the host back
	t.Cleanup(func() {
		if killed, err := Open(dir, testLog{t}); err == nil {
			_ = killed.Remove(context.Background()) // when the next plane did not
		}
	})
	g.Expect(snapshotHost(ctx, g, dir).Containers).NotTo(BeEmpty(), "the killed plane's Pods outlive it")

	t.Log("The next plane with a node puts the host back after the killed one, then starts")
	next := filepath.Join(t.TempDir(), "plane")
	p2, err := Start(ctx, Options{Dir: next, BinDir: envtest.BinDir(), Node: true, PauseImage: pauseImage, Log: testLog{t}, nodeLock: lock})
	g.Expect(err).NotTo(HaveOccurred())
	removedNext := false
	t.Cleanup(func() {
		if !removedNext {
			_ = p2.Remove(context.Background())
		}
	})
	g.Expect(snapshotHost(ctx, g, dir).Mounts).To(BeEmpty(), "the killed plane's volumes are unmounted")

	t.Log("Removing the plane removes its Pods and puts the host back as it was before the first")
	g.Expect(p2.Remove(ctx)).To(Succeed())
	removedNext = true
	g.Expect(snapshotHost(ctx, g, dir)).To(Equal(before))
	g.Expect(snapshotHost(ctx, g, next)).To(Equal(before))
	_, err = os.Stat(next)
	g.Expect(err).To(MatchError(os.ErrNotExist))
	g.Expect(slices.ContainsFunc(p2.Processes(), Process.Alive)).To(BeFalse())
}

// testLog writes a plane's steps to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
