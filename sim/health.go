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

package sim

import (
	"context"
	"crypto/tls"
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	clusterapi "github.com/siderolabs/talos/pkg/machinery/api/cluster"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosclient "github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// This file is the server side of `talosctl health`: ClusterService.HealthCheck on a
// control-plane node runs talosctl's default cluster checks from the node, through the
// Talos API of every node (forwarded by this node, as machined's local client is) and the
// cluster's Kubernetes API, and streams each check's progress as machined words it.

// clusterService is the node's ClusterService.
type clusterService struct {
	clusterapi.UnimplementedClusterServiceServer
	node *Node
}

// errSkip is a check that does not apply, reported as SKIP.
var errSkip = errors.New("SKIP")

// healthCheck is one of the cluster checks: its description and what it asserts.
type healthCheck struct {
	description string
	assert      func(ctx context.Context, h *healthRun) error
}

// healthRun is what the checks of one HealthCheck call work with.
type healthRun struct {
	talos                  *talosclient.Client
	kube                   *kubernetes.Clientset
	controlPlanes, workers []string
}

func (h *healthRun) all() []string {
	return append(append([]string(nil), h.controlPlanes...), h.workers...)
}

// HealthCheck runs the cluster checks until each passes in turn or the wait timeout ends.
func (s *clusterService) HealthCheck(req *clusterapi.HealthCheckRequest, stream grpc.ServerStreamingServer[clusterapi.HealthCheckProgress]) error {
	n := s.node
	n.mu.Lock()
	cfg := n.cfg
	n.mu.Unlock()
	if cfg == nil || !n.isControlPlane() {
		return status.Error(codes.Unimplemented, "cluster health check is only available on control plane nodes")
	}
	ctx, cancel := context.WithTimeout(stream.Context(), req.GetWaitTimeout().AsDuration())
	defer cancel()
	roles, err := callerRoles(stream.Context())
	if err != nil {
		return err
	}
	talos, err := n.localClient(ctx, roles)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	defer func() { _ = talos.Close() }()
	kube, err := kubeClient(cfg, n.apiServerURL(), "admin", "system:masters")
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	h := &healthRun{talos: talos, kube: kube,
		controlPlanes: req.GetClusterInfo().GetControlPlaneNodes(), workers: req.GetClusterInfo().GetWorkerNodes()}
	if len(h.controlPlanes)+len(h.workers) == 0 {
		if h.controlPlanes, h.workers, err = kubernetesNodes(ctx, kube); err != nil {
			return err
		}
	}
	send := func(msg string) error { return stream.Send(&clusterapi.HealthCheckProgress{Message: msg}) }
	if err := send(fmt.Sprintf("discovered nodes: %q", h.all())); err != nil {
		return err
	}
	for _, check := range clusterChecks {
		if err := runCheck(ctx, h, check, send); err != nil {
			return err
		}
	}
	return nil
}

// runCheck polls a check every 5 s (each attempt given as long) until it passes or is
// skipped, reporting its state whenever it changes: "waiting for <check>: ..." at first,
// then the latest error, then OK or SKIP.
func runCheck(ctx context.Context, h *healthRun, check healthCheck, send func(string) error) error {
	const interval = 5 * time.Second
	last := "..."
	if err := send("waiting for " + check.description + ": " + last); err != nil {
		return err
	}
	for {
		attempt, cancel := context.WithTimeout(ctx, interval)
		err := check.assert(attempt, h)
		cancel()
		state := "OK"
		if err != nil {
			state = err.Error()
		}
		if state != last {
			if sendErr := send("waiting for " + check.description + ": " + state); sendErr != nil {
				return sendErr
			}
			last = state
		}
		if err == nil || errors.Is(err, errSkip) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// localClient is a Talos API client of this node with the caller's roles, as machined's
// local client provider: calls to other nodes go through this node's routing.
func (n *Node) localClient(ctx context.Context, roles role.Set) (*talosclient.Client, error) {
	n.mu.Lock()
	cfg, roots := n.cfg, n.clientCAs
	n.mu.Unlock()
	pem, err := issue(cfg.Machine().Security().IssuingCA(), "health", nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}, roles.Strings()...)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(pem.Crt, pem.Key)
	if err != nil {
		return nil, err
	}
	return talosclient.New(ctx, talosclient.WithEndpoints(n.opts.Address),
		talosclient.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: roots}))
}

// kubernetesNodes are the InternalIPs of the cluster's Nodes, control-plane and others.
func kubernetesNodes(ctx context.Context, kube *kubernetes.Clientset) (controlPlanes, workers []string, err error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, status.Errorf(codes.Unavailable, "failed to list the Kubernetes nodes: %v", err)
	}
	for _, node := range nodes.Items {
		ip := nodeIP(&node)
		if _, ok := node.Labels["node-role.kubernetes.io/control-plane"]; ok {
			controlPlanes = append(controlPlanes, ip)
		} else {
			workers = append(workers, ip)
		}
	}
	return controlPlanes, workers, nil
}

// nodeIP is a Node's InternalIP.
func nodeIP(node *corev1.Node) string {
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// clusterChecks are talosctl's default cluster checks, in its order.
var clusterChecks = []healthCheck{
	{"etcd to be healthy", func(ctx context.Context, h *healthRun) error { return serviceHealthy(ctx, h, "etcd") }},
	{"etcd members to be consistent across nodes", etcdConsistent},
	{"etcd members to be control plane nodes", etcdMembersAreControlPlanes},
	{"apid to be ready", func(ctx context.Context, h *healthRun) error {
		_, err := h.talos.Version(talosclient.WithNodes(ctx, h.all()...))
		return err
	}},
	{"all nodes memory sizes", memorySizes},
	{"all nodes disk sizes", diskSizes},
	{"no diagnostics", noDiagnostics},
	{"kubelet to be healthy", func(ctx context.Context, h *healthRun) error { return serviceHealthy(ctx, h, "kubelet") }},
	{"all nodes to finish boot sequence", bootFinished},
	{"all k8s nodes to report", k8sNodesReport},
	{"all control plane static pods to be running", staticPodsRunning},
	{"all control plane components to be ready", controlPlaneComponentsReady},
	{"all k8s nodes to report ready", func(ctx context.Context, h *healthRun) error {
		return eachNode(ctx, h, func(node *corev1.Node) error {
			if !nodeConditionTrue(node, corev1.NodeReady) {
				return fmt.Errorf("node %q is not ready", node.Name)
			}
			return nil
		})
	}},
	{"kube-proxy to report ready", func(ctx context.Context, h *healthRun) error {
		return absentSkips(ctx, h, "daemonsets", "k8s-app=kube-proxy")
	}},
	{"coredns to report ready", func(ctx context.Context, h *healthRun) error {
		return absentSkips(ctx, h, "deployments", "k8s-app=kube-dns")
	}},
	{"all k8s nodes to report schedulable", func(ctx context.Context, h *healthRun) error {
		return eachNode(ctx, h, func(node *corev1.Node) error {
			if node.Spec.Unschedulable {
				return fmt.Errorf("node %q is not schedulable", node.Name)
			}
			return nil
		})
	}},
}

// serviceHealthy checks that service runs and is healthy on every control-plane node.
func serviceHealthy(ctx context.Context, h *healthRun, service string) error {
	resp, err := h.talos.ServiceList(talosclient.WithNodes(ctx, h.controlPlanes...))
	if err != nil {
		return err
	}
	for _, msg := range resp.GetMessages() {
		node := msg.GetMetadata().GetHostname()
		i := slices.IndexFunc(msg.GetServices(), func(s *machine.ServiceInfo) bool { return s.GetId() == service })
		if i < 0 {
			return fmt.Errorf("%s: service %q not found", node, service)
		}
		s := msg.GetServices()[i]
		if s.GetState() != serviceRunning {
			return fmt.Errorf("%s: service %q not in expected state %q: current state [%s]", node, service, serviceRunning, s.GetState())
		}
		if !s.GetHealth().GetHealthy() {
			return fmt.Errorf("%s: service is not healthy: %s", node, service)
		}
	}
	return nil
}

// etcdConsistent checks that every control-plane node lists the same etcd members.
func etcdConsistent(ctx context.Context, h *healthRun) error {
	resp, err := h.talos.EtcdMemberList(talosclient.WithNodes(ctx, h.controlPlanes...), &machine.EtcdMemberListRequest{})
	if err != nil {
		return err
	}
	var first []string
	for i, msg := range resp.GetMessages() {
		var members []string
		for _, m := range msg.GetMembers() {
			members = append(members, fmt.Sprintf("%s/%x/%t", m.GetHostname(), m.GetId(), m.GetIsLearner()))
		}
		slices.Sort(members)
		if i == 0 {
			first = members
		} else if !slices.Equal(first, members) {
			return fmt.Errorf("%s: etcd members differ from %s's", msg.GetMetadata().GetHostname(), resp.GetMessages()[0].GetMetadata().GetHostname())
		}
	}
	return nil
}

// etcdMembersAreControlPlanes checks that every etcd member is one of the control-plane
// nodes.
func etcdMembersAreControlPlanes(ctx context.Context, h *healthRun) error {
	resp, err := h.talos.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	if err != nil {
		return err
	}
	for _, m := range resp.GetMessages()[0].GetMembers() {
		for _, peer := range m.GetPeerUrls() {
			host := strings.TrimPrefix(strings.TrimPrefix(peer, "https://"), "http://")
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			if !slices.Contains(h.controlPlanes, host) {
				return fmt.Errorf("etcd member %s is not a control plane node: %s", m.GetHostname(), host)
			}
		}
	}
	return nil
}

// memorySizes checks that nodes have Talos' minimum memory (nodes in containers share
// their host's and are not checked).
func memorySizes(ctx context.Context, h *healthRun) error {
	for _, node := range h.all() {
		version, err := h.talos.Version(talosclient.WithNode(ctx, node))
		if err != nil {
			return err
		}
		if version.GetMessages()[0].GetPlatform().GetMode() == "container" {
			continue
		}
		memory, err := h.talos.Memory(talosclient.WithNode(ctx, node))
		if err != nil {
			return err
		}
		minimum := uint64(874)
		if slices.Contains(h.controlPlanes, node) {
			minimum = 1698
		}
		if total := memory.GetMessages()[0].GetMeminfo().GetMemtotal() / 1024; total < minimum {
			return fmt.Errorf("%s: memory size is %d MiB, less than the minimum %d MiB", node, total, minimum)
		}
	}
	return nil
}

// diskSizes checks that every node's EPHEMERAL volume is large enough for Talos.
func diskSizes(ctx context.Context, h *healthRun) error {
	const minimum = (6 << 30) - (2101+100+1+10)<<20
	for _, node := range h.all() {
		volume, err := safe.StateGetByID[*block.VolumeStatus](talosclient.WithNode(ctx, node), h.talos.COSI, "EPHEMERAL")
		if status.Code(err) == codes.PermissionDenied {
			return errSkip
		}
		if err != nil {
			return err
		}
		if size := volume.TypedSpec().Size; size < minimum {
			return fmt.Errorf("%s: ephemeral volume size is %d MiB, less than the minimum %d MiB", node, size>>20, minimum>>20)
		}
	}
	return nil
}

// noDiagnostics checks that no node reports a diagnostic.
func noDiagnostics(ctx context.Context, h *healthRun) error {
	for _, node := range h.all() {
		list, err := safe.StateListAll[*runtime.Diagnostic](talosclient.WithNode(ctx, node), h.talos.COSI)
		if status.Code(err) == codes.PermissionDenied {
			return errSkip
		}
		if err != nil {
			return err
		}
		if list.Len() > 0 {
			return fmt.Errorf("%s: active diagnostics: %s", node, list.Get(0).TypedSpec().Message)
		}
	}
	return nil
}

// bootFinished checks that every node reached the running stage.
func bootFinished(ctx context.Context, h *healthRun) error {
	for _, node := range h.all() {
		ms, err := safe.StateGetByID[*runtime.MachineStatus](talosclient.WithNode(ctx, node), h.talos.COSI, runtime.MachineStatusID)
		if err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		if ms.TypedSpec().Stage != runtime.MachineStageRunning {
			return fmt.Errorf("%s: stage is %s", node, ms.TypedSpec().Stage)
		}
	}
	return nil
}

// k8sNodesReport checks that the cluster's Nodes are exactly the nodes checked.
func k8sNodesReport(ctx context.Context, h *healthRun) error {
	controlPlanes, workers, err := kubernetesNodes(ctx, h.kube)
	if err != nil {
		return err
	}
	got, want := append(controlPlanes, workers...), h.all()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("expected nodes %q, got %q", want, got)
	}
	return nil
}

// staticPodsRunning checks that every control-plane node reports its three static pods.
func staticPodsRunning(ctx context.Context, h *healthRun) error {
	for _, node := range h.controlPlanes {
		list, err := safe.StateListAll[*k8s.StaticPodStatus](talosclient.WithNode(ctx, node), h.talos.COSI)
		if err != nil {
			return err
		}
		for _, pod := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			if _, ok := list.Find(func(s *k8s.StaticPodStatus) bool {
				return strings.HasPrefix(s.Metadata().ID(), "kube-system/"+pod)
			}); !ok {
				return fmt.Errorf("%s: static pod %q is not running", node, pod)
			}
		}
	}
	return nil
}

// controlPlaneComponentsReady checks that each control-plane component has one Ready pod
// per control-plane Node.
func controlPlaneComponentsReady(ctx context.Context, h *healthRun) error {
	for _, app := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		pods, err := h.kube.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + app})
		if err != nil {
			return err
		}
		if len(pods.Items) != len(h.controlPlanes) {
			return fmt.Errorf("expected %d %s pods, got %d", len(h.controlPlanes), app, len(pods.Items))
		}
		for _, pod := range pods.Items {
			ready := slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			if !ready {
				return fmt.Errorf("pod %s is not ready", pod.Name)
			}
		}
	}
	return nil
}

// eachNode applies check to every Node of the cluster.
func eachNode(ctx context.Context, h *healthRun, check func(*corev1.Node) error) error {
	nodes, err := h.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range nodes.Items {
		if err := check(&nodes.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// nodeConditionTrue reports whether a Node's condition is True.
func nodeConditionTrue(node *corev1.Node, t corev1.NodeConditionType) bool {
	return slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == t && c.Status == corev1.ConditionTrue })
}

// absentSkips skips a check of workloads the simulator never runs (kube-proxy, CoreDNS)
// when, as here, they are absent; present, they could not be ready.
func absentSkips(ctx context.Context, h *healthRun, kind, selector string) error {
	var count int
	switch kind {
	case "daemonsets":
		list, err := h.kube.AppsV1().DaemonSets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		count = len(list.Items)
	default:
		list, err := h.kube.AppsV1().Deployments(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		count = len(list.Items)
	}
	if count == 0 {
		return errSkip
	}
	return fmt.Errorf("%s %s are not ready: the simulator runs no workloads", kind, selector)
}
