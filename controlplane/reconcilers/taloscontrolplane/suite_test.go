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

package taloscontrolplane_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	bootstrapsetup "github.com/talon-capi/talon/bootstrap/setup"
	controlplanesetup "github.com/talon-capi/talon/controlplane/setup"
	"github.com/talon-capi/talon/internal/imagefactory/factorytest"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

func TestMain(m *testing.M) {
	// The controllers' errors are kept for the failure messages of the tests (and printed
	// as they come with TALON_DEBUG_LOGS).
	var out io.Writer = controllerErrors
	if os.Getenv("TALON_DEBUG_LOGS") != "" {
		out = io.MultiWriter(os.Stderr, controllerErrors)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(out), zap.Level(zapcore.ErrorLevel), zap.StacktraceLevel(zapcore.PanicLevel)))
	os.Exit(envtest.Run(m))
}

// controllerErrors are the last errors the controllers of this test process logged.
var controllerErrors = &logTail{max: 30}

// logTail keeps the last max lines written to it.
type logTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	if over := len(l.lines) - l.max; over > 0 {
		l.lines = slices.Delete(l.lines, 0, over)
	}
	return len(p), nil
}

// String is the lines kept, oldest first.
func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

const simFinalizer = "test.talon.dev/sim-node"

// simInfra stands in for an infrastructure provider in these tests: for every
// TalosDockerMachine whose Machine has bootstrap data it starts a simulated Talos node in
// this process, on its own loopback address, booted with that data; deleting the machine
// powers the node off. The cluster endpoint is a load balancer over the control-plane nodes.
type simInfra struct {
	t      testing.TB
	client client.Client
	prefix string // e.g. 127.0.47.
	lb     *simtest.LoadBalancer
	// domain is the domain every node gets from the platform, as from a site's DHCP server.
	domain string

	// kind is the infrastructure machine kind the nodes stand for: TalosDockerMachine
	// (container nodes) unless metal is asked for (TalosMetalMachine: metal nodes, which
	// install and upgrade Talos).
	kind string
	// options adjust the options of every new node.
	options func(*sim.Options)

	mu    sync.Mutex
	next  int
	nodes map[string]*sim.Node // by infrastructure machine name
	// gone counts the Bootstrap calls answered by nodes that were deleted since.
	gone int
}

func newSimInfra(tb testing.TB, prefix string) *simInfra {
	tb.Helper()
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(tb, envtest.Layer, err)
	require.HeavyNodes(tb)
	return &simInfra{t: tb, prefix: prefix, kind: "TalosDockerMachine", nodes: map[string]*sim.Node{}, lb: simtest.NewLoadBalancer(tb, prefix+"254", 6443, 50001)}
}

// newInfraMachine is an empty infrastructure machine of the kind the nodes stand for.
func (s *simInfra) newInfraMachine() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(infrav1.GroupVersion.WithKind(s.kind))
	return u
}

// logEtcdOnFailure prints the end of n's etcd log when the test failed: what a member did
// is what explains a control plane that did not converge.
func logEtcdOnFailure(tb testing.TB, n *sim.Node) {
	tb.Helper()
	if !tb.Failed() {
		return
	}
	var lines []string
	for _, line := range n.LogTail("etcd", 1000) {
		// Skip etcd's per-request statistics and traces: they drown what happened.
		if !strings.Contains(line, `"msg":"request stats"`) && !strings.Contains(line, `"msg":"trace[`) {
			lines = append(lines, line)
		}
	}
	tb.Logf("etcd log of %s, last lines:\n%s", n.Address(), strings.Join(lines[max(0, len(lines)-25):], "\n"))
}

// endpoint is the cluster endpoint: the load balancer.
func (s *simInfra) endpoint() clusterv1.APIEndpoint {
	return clusterv1.APIEndpoint{Host: s.prefix + "254", Port: 6443}
}

func (s *simInfra) setup(_ context.Context, mgr ctrl.Manager) error {
	s.client = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		For(s.newInfraMachine()).
		Named(fmt.Sprintf("siminfra-%s", s.prefix)).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			m := o.(*clusterv1.Machine)
			return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}}}
		})).
		Complete(s)
}

func (s *simInfra) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	infra := s.newInfraMachine()
	if err := s.client.Get(ctx, req.NamespacedName, infra); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if infra.GetDeletionTimestamp() != nil {
		s.mu.Lock()
		if n, ok := s.nodes[infra.GetName()]; ok {
			n.PowerOff()
			s.gone += n.Bootstraps()
			delete(s.nodes, infra.GetName())
		}
		s.updateBackends()
		s.mu.Unlock()
		patch := client.MergeFrom(infra.DeepCopy())
		controllerutil.RemoveFinalizer(infra, simFinalizer)
		return ctrl.Result{}, client.IgnoreNotFound(s.client.Patch(ctx, infra, patch))
	}
	if controllerutil.AddFinalizer(infra, simFinalizer) {
		return ctrl.Result{}, s.client.Update(ctx, infra)
	}
	if provisioned, _, _ := unstructured.NestedBool(infra.Object, "status", "initialization", "provisioned"); provisioned {
		return s.patchNodeProviderID(ctx, infra)
	}
	var owner *metav1.OwnerReference
	machine := &clusterv1.Machine{}
	for _, ref := range infra.GetOwnerReferences() {
		if ref.Kind == "Machine" {
			owner = &ref
		}
	}
	if owner == nil {
		return ctrl.Result{}, nil
	}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: infra.GetNamespace(), Name: owner.Name}, machine); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		return ctrl.Result{}, nil
	}
	data := &corev1.Secret{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: infra.GetNamespace(), Name: *machine.Spec.Bootstrap.DataSecretName}, data); err != nil {
		return ctrl.Result{}, err
	}
	s.mu.Lock()
	n, ok := s.nodes[infra.GetName()]
	if !ok {
		s.next++
		opts := sim.Options{
			Address: fmt.Sprintf("%s%d", s.prefix, s.next), StateDir: s.t.TempDir(), BinDir: envtest.BinDir(), Domainname: s.domain,
			Log: testr.NewWithInterface(s.t, testr.Options{Verbosity: 0}),
		}
		if s.options != nil {
			s.options(&opts)
		}
		var err error
		n, err = sim.NewNode(opts)
		if err == nil {
			err = n.Start(s.t.Context(), data.Data["value"])
		}
		if err != nil {
			s.mu.Unlock()
			return ctrl.Result{}, err
		}
		s.t.Cleanup(n.PowerOff)
		s.t.Cleanup(func() { logEtcdOnFailure(s.t, n) })
		s.nodes[infra.GetName()] = n
		if _, isControlPlane := machine.Labels[clusterv1.MachineControlPlaneLabel]; isControlPlane {
			s.updateBackends()
		}
	}
	s.mu.Unlock()
	if err := unstructured.SetNestedField(infra.Object, "talon-sim://"+n.Address(), "spec", "providerID"); err != nil {
		return ctrl.Result{}, err
	}
	if err := s.client.Update(ctx, infra); err != nil {
		return ctrl.Result{}, err
	}
	addresses := []any{map[string]any{"type": string(clusterv1.MachineInternalIP), "address": n.Address()}}
	if err := unstructured.SetNestedSlice(infra.Object, addresses, "status", "addresses"); err != nil {
		return ctrl.Result{}, err
	}
	if err := unstructured.SetNestedField(infra.Object, true, "status", "initialization", "provisioned"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, s.client.Status().Update(ctx, infra)
}

// patchNodeProviderID sets the providerID of the machine's Node in the workload cluster, as
// an infrastructure provider without a cloud provider does, so that Cluster API links the
// Machine to its Node.
func (s *simInfra) patchNodeProviderID(ctx context.Context, infra *unstructured.Unstructured) (ctrl.Result, error) {
	retry := ctrl.Result{RequeueAfter: time.Second}
	data, err := kubeconfig.FromSecret(ctx, s.client, client.ObjectKey{Namespace: infra.GetNamespace(), Name: infra.GetLabels()[clusterv1.ClusterNameLabel]})
	addresses, _, _ := unstructured.NestedSlice(infra.Object, "status", "addresses")
	providerID, _, _ := unstructured.NestedString(infra.Object, "spec", "providerID")
	if err != nil || len(addresses) == 0 {
		return retry, nil //nolint:nilerr // the kubeconfig appears once the control plane is initialized
	}
	address, _, _ := unstructured.NestedString(addresses[0].(map[string]any), "address")
	config, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return ctrl.Result{}, err
	}
	config.Timeout = 5 * time.Second
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return ctrl.Result{}, err
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return retry, nil //nolint:nilerr // the workload API server may be starting or rolling
	}
	for i := range nodes.Items {
		node := &nodes.Items[i]
		for _, a := range node.Status.Addresses {
			if a.Type != corev1.NodeInternalIP || a.Address != address {
				continue
			}
			// Checked again now and then, as a cloud provider's node controller keeps doing.
			recheck := ctrl.Result{RequeueAfter: 10 * time.Second}
			if node.Spec.ProviderID == providerID {
				return recheck, nil
			}
			node.Spec.ProviderID = providerID
			if _, err := kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				return retry, nil //nolint:nilerr // retried: the kubelet updates the Node too
			}
			return recheck, nil
		}
	}
	return retry, nil
}

// powerOff cuts the power of the node of the infrastructure machine name.
func (s *simInfra) powerOff(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.nodes[name]; ok {
		n.PowerOff()
	}
}

// bootstraps counts the Bootstrap calls every node of this infrastructure ever answered.
func (s *simInfra) bootstraps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := s.gone
	for _, n := range s.nodes {
		total += n.Bootstraps()
	}
	return total
}

// node is the simulated node of the infrastructure machine name, or nil.
func (s *simInfra) node(name string) *sim.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[name]
}

// updateBackends points the load balancer at every running node (workers do not listen on
// 6443 or 50001, so the balancer skips them).
func (s *simInfra) updateBackends() {
	addresses := make([]string, 0, len(s.nodes))
	for _, n := range s.nodes {
		addresses = append(addresses, n.Address())
	}
	s.lb.SetBackends(addresses...)
}

// startProviders runs Cluster API's core reconcilers, the bootstrap and control-plane
// providers wired as their managers wire them, and the simulated infrastructure.
func startProviders(tb testing.TB, env *envtest.Environment, infra *simInfra) {
	tb.Helper()
	startProvidersWith(tb, env, infra, manager.NewOptions())
}

// startProvidersWith is startProviders with the providers' options.
func startProvidersWith(tb testing.TB, env *envtest.Environment, infra *simInfra, opts *manager.Options) {
	tb.Helper()
	env.StartManager(tb, envtest.ManagerOptions{CoreReconcilers: true, Setup: providers(infra, opts)})
}

// providers registers the bootstrap and control-plane providers, wired as their managers
// wire them, and the simulated infrastructure.
func providers(infra *simInfra, opts *manager.Options) func(ctx context.Context, mgr ctrl.Manager) error {
	return func(ctx context.Context, mgr ctrl.Manager) error {
		if err := startOthers(ctx, mgr, opts); err != nil {
			return err
		}
		if err := controlplanesetup.Reconcilers(ctx, mgr, opts); err != nil {
			return err
		}
		return infra.setup(ctx, mgr)
	}
}

// startMetalProviders starts the providers over simulated bare-metal nodes at addresses of
// prefix that run Talos release and install and upgrade Talos from a local Image Factory,
// which serves releases.
func startMetalProviders(tb testing.TB, env *envtest.Environment, prefix, release string, releases ...string) *simInfra {
	tb.Helper()
	infra, opts := newMetalInfra(tb, prefix, release, releases...)
	startProvidersWith(tb, env, infra, opts)
	return infra
}

// newMetalInfra is the simulated bare-metal infrastructure of startMetalProviders, with the
// providers' options naming its Image Factory.
func newMetalInfra(tb testing.TB, prefix, release string, releases ...string) (*simInfra, *manager.Options) {
	tb.Helper()
	factory := factorytest.Start(tb, releases...)
	infra := newSimInfra(tb, prefix)
	infra.kind = "TalosMetalMachine"
	infra.options = func(o *sim.Options) { o.Mode, o.TalosVersion = configgen.ModeMetal, release }
	opts := manager.NewOptions()
	opts.ImageFactoryURL = factory.URL
	return infra, opts
}

// startOthers registers the bootstrap provider.
func startOthers(ctx context.Context, mgr ctrl.Manager, opts *manager.Options) error {
	return bootstrapsetup.Reconcilers(ctx, mgr, opts)
}

// newCluster creates a Cluster with a provisioned TalosDockerCluster at the simulated
// infrastructure's endpoint and a TalosControlPlane of replicas.
func newCluster(tb testing.TB, env *envtest.Environment, infra *simInfra, ns, name string, replicas int32,
	mutate ...func(*controlplanev1.TalosControlPlane)) *controlplanev1.TalosControlPlane {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	infraCluster := &infrav1.TalosDockerCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       infrav1.TalosDockerClusterSpec{ControlPlaneEndpoint: infra.endpoint()},
	}
	g.Expect(env.Client.Create(ctx, infraCluster)).To(Succeed())
	infraCluster.Status.Initialization.Provisioned = ptr.To(true)
	g.Expect(env.Client.Status().Update(ctx, infraCluster)).To(Succeed())
	var template client.Object = &infrav1.TalosDockerMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name + "-cp", Namespace: ns}}
	if infra.kind == "TalosMetalMachine" {
		// The nodes do not network-boot here: the assets are never fetched.
		asset := &infrav1.Asset{URL: "http://assets.invalid/talos", SHA512: strings.Repeat("0", 128)}
		template = &infrav1.TalosMetalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name + "-cp", Namespace: ns},
			Spec: infrav1.TalosMetalMachineTemplateSpec{Template: infrav1.TalosMetalMachineTemplateResource{Spec: infrav1.TalosMetalMachineSpec{
				BootAssets: infrav1.BootAssets{Kernel: asset, Initramfs: asset},
			}}}}
	}
	g.Expect(env.Client.Create(ctx, template)).To(Succeed())
	tcp := &controlplanev1.TalosControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: controlplanev1.TalosControlPlaneSpec{
			Replicas: ptr.To(replicas),
			Version:  simtest.KubernetesVersion,
			MachineTemplate: controlplanev1.TalosControlPlaneMachineTemplate{
				Spec: controlplanev1.TalosControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: infra.kind + "Template", Name: template.GetName(),
					},
				},
			},
			ControlPlaneConfig: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane},
		},
	}
	for _, m := range mutate {
		m(tcp)
	}
	g.Expect(env.Client.Create(ctx, tcp)).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerCluster", Name: name},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "TalosControlPlane", Name: name},
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
			},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	return tcp
}
