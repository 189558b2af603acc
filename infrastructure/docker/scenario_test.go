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

package docker_test

import (
	"context"
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	bootstrapsetup "github.com/talon-capi/talon/bootstrap/setup"
	controlplanesetup "github.com/talon-capi/talon/controlplane/setup"
	"github.com/talon-capi/talon/infrastructure/docker"
	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	infrasetup "github.com/talon-capi/talon/infrastructure/setup"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/sim/simtest"
	testdocker "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

func TestMain(m *testing.M) {
	if os.Getenv("TALON_DEBUG_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	}
	os.Exit(envtest.Run(m))
}

// startProviders runs Cluster API's core reconcilers and Talon's three providers, the
// infrastructure provider on rt, as their managers wire them.
func startProviders(tb testing.TB, env *envtest.Environment, rt runtime.Runtime, lbImage string) {
	tb.Helper()
	env.StartManager(tb, envtest.ManagerOptions{
		CoreReconcilers: true,
		Setup: func(ctx context.Context, mgr ctrl.Manager) error {
			opts := manager.NewOptions()
			settings := infrasetup.NewSettings()
			settings.LoadBalancerImage = lbImage
			for _, setup := range []func() error{
				func() error { return bootstrapsetup.Reconcilers(ctx, mgr, opts) },
				func() error { return controlplanesetup.Reconcilers(ctx, mgr, opts) },
				func() error { return infrasetup.Reconcilers(ctx, mgr, opts, settings, rt) },
			} {
				if err := setup(); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// clusterSpec is what a scenario varies between runtimes.
type clusterSpec struct {
	name, namespace string
	subnet          string
	image           string // of the nodes; empty = the default Talos image
	controlPlanes   int32
	workers         int32
	// inspect, when set, checks the nodes of the Running Machines in the runtime.
	inspect func(t *testing.T, machines []clusterv1.Machine)
}

// createCluster applies the shipped cluster template (templates/cluster-template.yaml), as
// clusterctl generate cluster renders it, with the scenario's subnet and node image.
func createCluster(tb testing.TB, c client.Client, s clusterSpec) {
	tb.Helper()
	variables := map[string]string{
		"CLUSTER_NAME": s.name, "NAMESPACE": s.namespace, "KUBERNETES_VERSION": simtest.KubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": strconv.Itoa(int(s.controlPlanes)), "WORKER_MACHINE_COUNT": strconv.Itoa(int(s.workers)),
	}
	if s.image != "" {
		variables["TALOS_IMAGE"] = s.image
	}
	applyTemplate(tb, c, "cluster-template.yaml", variables, func(o *unstructured.Unstructured) {
		if o.GetKind() == "TalosDockerCluster" && s.subnet != "" {
			NewWithT(tb).Expect(unstructured.SetNestedField(o.Object, s.subnet, "spec", "network", "subnet")).To(Succeed())
		}
	})
}

// applyTemplate creates the objects of a file in templates/, processed as clusterctl does
// with variables (a variable without a value and without a default fails the test), each
// changed by mutate first.
func applyTemplate(tb testing.TB, c client.Client, file string, variables map[string]string, mutate func(*unstructured.Unstructured)) {
	tb.Helper()
	g := NewWithT(tb)
	objs, err := envtest.Template(file, variables)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range objs {
		o := &objs[i]
		if mutate != nil {
			mutate(o)
		}
		g.Expect(c.Create(tb.Context(), o)).To(Succeed(), "create %s %s", o.GetKind(), o.GetName())
	}
}

// waitForRunning waits until the cluster has want Machines, all Running (their Nodes
// linked by providerID), and returns them.
func waitForRunning(tb testing.TB, c client.Client, s clusterSpec, want int) []clusterv1.Machine {
	tb.Helper()
	var machines []clusterv1.Machine
	NewWithT(tb).Eventually(func(g Gomega) {
		machines = running(tb.Context(), g, c, s, want)
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return machines
}

// running expects the cluster to have want Machines, all Running with a Node.
func running(ctx context.Context, g Gomega, c client.Client, s clusterSpec, want int) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: s.name})).To(Succeed())
	states := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		state := m.Name + ": " + m.Status.Phase
		if c := conditions.Get(&m, clusterv1.MachineReadyCondition); c != nil && c.Status != metav1.ConditionTrue {
			state += " (" + c.Message + ")"
		}
		states = append(states, state)
	}
	g.Expect(list.Items).To(HaveLen(want), "Machines: %v", states)
	for _, m := range list.Items {
		g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "Machines: %v", states)
		g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "Machines: %v", states)
	}
	return list.Items
}

// workload returns a client of the workload cluster through its kubeconfig Secret, which
// names the control-plane endpoint.
func workload(tb testing.TB, c client.Client, s clusterSpec) *kubernetes.Clientset {
	tb.Helper()
	data, err := kubeconfig.FromSecret(tb.Context(), c, client.ObjectKey{Namespace: s.namespace, Name: s.name})
	if err != nil {
		tb.Fatal(err)
	}
	config, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		tb.Fatal(err)
	}
	config.Timeout = 5 * time.Second
	return kubernetes.NewForConfigOrDie(config)
}

// runScenario is the Docker provider's acceptance scenario on rt: a cluster of one
// control-plane and two worker Machines comes up with linked Nodes; its only control-plane
// node is replaced while the endpoint keeps answering through the load balancer; deleting
// the cluster leaves nothing in the runtime.
func runScenario(t *testing.T, env *envtest.Environment, rt runtime.Runtime, s clusterSpec) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	createCluster(t, c, s)
	key := runtime.Cluster{Namespace: s.namespace, Name: s.name}

	start := time.Now()
	machines := waitForRunning(t, c, s, int(s.controlPlanes+s.workers))
	t.Logf("%d Machines Running after %s on the %s runtime", len(machines), time.Since(start).Round(time.Second), rt.Name())

	// Every Node carries its Machine's providerID, set by the provider.
	kube := workload(t, c, s)
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).To(HaveLen(len(machines)))
	for _, m := range machines {
		g.Expect(m.Spec.ProviderID).To(Equal(docker.ProviderID(key, m.Name)))
		node := findNode(nodes.Items, m.Status.NodeRef.Name)
		g.Expect(node).NotTo(BeNil(), "Node of Machine %s", m.Name)
		g.Expect(node.Spec.ProviderID).To(Equal(m.Spec.ProviderID))
	}
	if s.inspect != nil {
		s.inspect(t, machines)
	}
	dc := &infrav1.TalosDockerCluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, dc)).To(Succeed())
	g.Expect(dc.Spec.ControlPlaneEndpoint.Host).To(Equal(dc.Status.LoadBalancer.Address))
	g.Expect(dc.Status.LoadBalancer.Backends).To(HaveLen(int(s.controlPlanes)))

	// Replace the only control-plane node: the endpoint keeps answering.
	var oldCP string
	for _, m := range machines {
		if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
			oldCP = m.Name
		}
	}
	probe := newEndpointProbe(ctx, kube)
	tcp := &controlplanev1.TalosControlPlane{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name + "-control-plane"}, tcp)).To(Succeed())
	patch := client.MergeFrom(tcp.DeepCopy())
	tcp.Spec.Rollout.After = metav1.Now()
	g.Expect(c.Patch(ctx, tcp, patch)).To(Succeed())
	start = time.Now()
	g.Eventually(func(g Gomega) {
		for _, m := range running(ctx, g, c, s, int(s.controlPlanes+s.workers)) {
			g.Expect(m.Name).NotTo(Equal(oldCP))
		}
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	ok, failedRequests, longest := probe.stop()
	t.Logf("Control-plane node replaced after %s; endpoint: %d requests answered, %d failed, longest outage %s",
		time.Since(start).Round(time.Second), ok, failedRequests, longest.Round(10*time.Millisecond))
	g.Expect(ok).To(BeNumerically(">", 0))
	// The balancer drops a backend only once it is gone: at most a request caught in the
	// switch fails. An endpoint that stops answering for a while fails dozens (one every 200 ms).
	g.Expect(failedRequests).To(BeNumerically("<=", 2), "requests to the endpoint failed during the replacement")
	nodes, err = kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "the endpoint answers after the replacement")
	g.Expect(findNode(nodes.Items, oldCP)).To(BeNil(), "the old control-plane Node is gone")

	deleteCluster(t, c, rt, s)
}

// deleteCluster deletes the Cluster, waits until it is gone and expects no node of it left
// in the runtime.
func deleteCluster(tb testing.TB, c client.Client, rt runtime.Runtime, s clusterSpec) {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace}}
	g.Expect(c.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "Cluster %s is gone", s.name)
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(rt.Nodes(ctx, runtime.Cluster{Namespace: s.namespace, Name: s.name})).To(BeEmpty())
}

// expectStoppedNodeStarts stops the container of Machine m, as a restart of the Docker host
// does, and checks that the provider starts it again as the node it was when it next
// reconciles the Machine (asked for here by an annotation, as the manager's own restart
// would); then pauses it and checks that a frozen container is left as it is, its
// ContainerProvisioned condition still true.
func expectStoppedNodeStarts(t *testing.T, c client.Client, s clusterSpec, m clusterv1.Machine) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	key := client.ObjectKey{Namespace: s.namespace, Name: m.Spec.InfrastructureRef.Name}
	reconcile := func() {
		dm := &infrav1.TalosDockerMachine{}
		g.Expect(c.Get(ctx, key, dm)).To(Succeed())
		patch := client.MergeFrom(dm.DeepCopy())
		if dm.Annotations == nil {
			dm.Annotations = map[string]string{}
		}
		dm.Annotations["talon.dev/test-reconcile"] = time.Now().Format(time.RFC3339Nano)
		g.Expect(c.Patch(ctx, dm, patch)).To(Succeed())
	}
	provisioned := func(g Gomega) *metav1.Condition {
		dm := &infrav1.TalosDockerMachine{}
		g.Expect(c.Get(ctx, key, dm)).To(Succeed())
		cond := meta.FindStatusCondition(dm.Status.Conditions, infrav1.ContainerProvisionedCondition)
		g.Expect(cond).NotTo(BeNil())
		return cond
	}
	inspect := func(format string) string {
		out, err := testdocker.Docker(ctx, "inspect", "--format", format, m.Name)
		g.Expect(err).NotTo(HaveOccurred())
		return strings.TrimSpace(out)
	}
	state := func() string { return inspect("{{.State.Status}}") }

	// The provider may start the container again before the test looks (any event of the
	// Machine's makes it reconcile), so a new start time, not the exited state, shows the
	// stop took effect and the start followed it.
	t.Logf("Machine %s's container stopped, as a restart of the Docker host leaves it", m.Name)
	started := inspect("{{.State.StartedAt}}")
	_, err := testdocker.Docker(ctx, "stop", "--time", "1", m.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inspect("{{.State.FinishedAt}}")).NotTo(HavePrefix("0001-"), "the container stopped")
	reconcile()
	g.Eventually(func() string {
		if inspect("{{.State.StartedAt}}") == started {
			return "not started again: " + state()
		}
		return state()
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("running"),
		func() string { return "ContainerProvisioned: " + provisioned(g).Message })
	g.Expect(provisioned(g).Status).To(Equal(metav1.ConditionTrue))

	t.Logf("Machine %s's container paused: left frozen", m.Name)
	_, err = testdocker.Docker(ctx, "pause", m.Name)
	g.Expect(err).NotTo(HaveOccurred())
	reconcile()
	g.Consistently(func(g Gomega) {
		cond := provisioned(g)
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), cond.Message)
	}).WithTimeout(5 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(state()).To(Equal("paused"))
	_, err = testdocker.Docker(ctx, "unpause", m.Name)
	g.Expect(err).NotTo(HaveOccurred())
}

// expectTalosContainer checks that the Machine's container is what Talos expects in Docker
// (see docs/docker.md): named and labelled after its Machine, the Machine's bootstrap data
// as USERDATA, the platform, read-only root, tmpfs and volumes, on the cluster network at
// the Machine's address.
func expectTalosContainer(t *testing.T, c client.Client, s clusterSpec, m clusterv1.Machine, privileged bool) {
	t.Helper()
	g := NewWithT(t)
	inspected := testdocker.Inspect(t, m.Name)
	role := runtime.RoleWorker
	if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
		role = runtime.RoleControlPlane
	}
	g.Expect(inspected.Config.Hostname).To(Equal(m.Name))
	g.Expect(inspected.Config.Image).To(Equal(s.image))
	g.Expect(inspected.Config.Labels).To(Equal(map[string]string{
		runtime.LabelNamespace: s.namespace, runtime.LabelCluster: s.name, runtime.LabelMachine: m.Name, runtime.LabelRole: role,
	}))
	data := &corev1.Secret{}
	g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: s.namespace, Name: *m.Spec.Bootstrap.DataSecretName}, data)).To(Succeed())
	env := map[string]string{}
	for _, e := range inspected.Config.Env {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	g.Expect(env).To(HaveKeyWithValue("PLATFORM", "container"))
	g.Expect(env).To(HaveKeyWithValue("TALOSSKU", "2CPU-2048RAM"))
	g.Expect(base64.StdEncoding.DecodeString(env["USERDATA"])).To(Equal(data.Data["value"]), "USERDATA is the Machine's bootstrap data")
	g.Expect(inspected.HostConfig.Privileged).To(Equal(privileged))
	g.Expect(inspected.HostConfig.SecurityOpt).To(ConsistOf("seccomp=unconfined"))
	g.Expect(inspected.HostConfig.ReadonlyRootfs).To(BeTrue())
	g.Expect(inspected.HostConfig.Tmpfs).To(SatisfyAll(HaveKey("/run"), HaveKey("/system"), HaveKey("/tmp")))
	g.Expect(inspected.HostConfig.Sysctls).To(HaveKeyWithValue("net.ipv6.conf.all.disable_ipv6", "0"))
	volumes := map[string]string{}
	for _, mount := range inspected.Mounts {
		volumes[mount.Destination] = mount.Name
	}
	for _, path := range []string{"/var", "/system/state", "/etc/cni", "/etc/kubernetes", "/usr/libexec/kubernetes", "/opt"} {
		g.Expect(volumes).To(HaveKey(path), "a volume for %s (Talos 1.13 in a container)", path)
	}
	network := inspected.NetworkSettings.Networks[docker.NetworkName(runtime.Cluster{Namespace: s.namespace, Name: s.name})]
	g.Expect(network).NotTo(BeNil())
	g.Expect(network.IPAddress.String()).To(Equal(m.Status.Addresses[0].Address))
}

func findNode(nodes []corev1.Node, name string) *corev1.Node {
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i]
		}
	}
	return nil
}

// endpointProbe asks the workload API server for its Nodes through the endpoint five times
// a second and counts what fails.
type endpointProbe struct {
	mu         sync.Mutex
	ok, failed int
	longest    time.Duration
	lastOK     time.Time
	cancel     context.CancelFunc
	done       chan struct{}
}

func newEndpointProbe(ctx context.Context, kube *kubernetes.Clientset) *endpointProbe {
	ctx, cancel := context.WithCancel(ctx)
	p := &endpointProbe{cancel: cancel, done: make(chan struct{}), lastOK: time.Now()}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			_, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
			p.mu.Lock()
			if err == nil {
				p.ok++
				p.lastOK = time.Now()
			} else if ctx.Err() == nil {
				p.failed++
				p.longest = max(p.longest, time.Since(p.lastOK))
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *endpointProbe) stop() (ok, failed int, longest time.Duration) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.failed, p.longest
}

// TestDockerRuntime runs the scenario against the Docker Engine with the simulator image
// standing in for the Talos image and running the load balancer ('talon lb'), and checks
// that the deleted cluster left no container, volume or network with its labels.
func TestDockerRuntime(t *testing.T) {
	require.Layer(t, testdocker.Layer, testdocker.Available(t.Context()))
	env := envtest.Get(t)
	var opts []runtime.DockerOption
	if !testdocker.CanRunPrivileged(t.Context()) {
		t.Log("This Docker Engine cannot run privileged containers: the simulated nodes run unprivileged")
		opts = append(opts, runtime.WithUnprivilegedNodes())
	}
	rt, err := runtime.NewDocker(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	s := clusterSpec{
		name: "docker-quick", namespace: env.NewNamespace(t, "docker-runtime"), subnet: "172.30.121.0/24",
		image: testdocker.SimImage(), controlPlanes: 1, workers: 2,
	}
	s.inspect = func(t *testing.T, machines []clusterv1.Machine) {
		t.Helper()
		for _, m := range machines {
			expectTalosContainer(t, env.Client, s, m, len(opts) == 0)
		}
		for _, m := range machines {
			if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; !ok {
				expectStoppedNodeStarts(t, env.Client, s, m)
				break
			}
		}
	}
	// Container names are the host's: remove what an interrupted run left, in any namespace.
	testdocker.RemoveLabelled(t, map[string]string{runtime.LabelCluster: s.name})
	labels := runtime.Cluster{Namespace: s.namespace, Name: s.name}.Labels()
	startProviders(t, env, rt, testdocker.SimImage())
	runScenario(t, env, rt, s)
	NewWithT(t).Expect(testdocker.Leftovers(t.Context(), labels)).To(BeEmpty())
}
