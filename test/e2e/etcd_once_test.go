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
	"context"
	"crypto/tls"
	stdx509 "crypto/x509"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/pki"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
)

// outage is how long a paused node stays unreachable while a restarted control-plane
// manager reconciles around it.
const outage = 30 * time.Second

// TestEtcdBootstrappedOnce follows a control plane of three Docker nodes, made by managers
// running as Pods, through the moments where a provider that guesses could bootstrap etcd a
// second time:
//
//  1. the first node stops answering (docker pause) as soon as its etcd runs, that is right
//     after Bootstrap, and the control-plane manager is SIGKILLed and started again by the
//     kubelet;
//  2. it stops answering again the moment the second Machine appears (which then cannot
//     join), with another SIGKILL and restart;
//  3. once all three Machines have Nodes (clusterctl refuses to move a cluster with a
//     Machine still provisioning), the cluster is moved with clusterctl move to a second
//     management plane, where the TalosControlPlane starts without status.
//
// At the end every node's etcd answers with one and the same cluster ID and the three
// Machines' members, and the records of the bootstrapped Machine and of the etcd cluster are
// those written before the first outage.
func TestEtcdBootstrappedOnce(t *testing.T) {
	ctx := t.Context()
	s := newDockerSuite(t)
	g, bin, config := s.g, s.bin, s.clusterctl
	const ns, name = "default", "once"
	t.Cleanup(func() {
		// A paused container is unpaused so that it can be removed.
		if out, err := dockertest.Docker(context.Background(), "ps", "--quiet", "--filter", "status=paused",
			"--filter", "label="+dockerruntime.LabelCluster+"="+name); err == nil {
			for _, id := range sortedFields(out) {
				_, _ = dockertest.Docker(context.Background(), "unpause", id)
			}
		}
		dockertest.RemoveLabelled(t, map[string]string{dockerruntime.LabelCluster: name})
	})

	source := s.podsPlane("source")
	mgmt := s.client(source.Kubeconfig())
	manifest, err := plane.RunClusterctl(ctx, bin, source.Kubeconfig(), []string{"TALOS_IMAGE=" + dockertest.SimImage()}, testWriter{t},
		"generate", "cluster", name, "--config", config, "--infrastructure", "talon", "--target-namespace", ns,
		"--kubernetes-version", newVersion, "--control-plane-machine-count", "3", "--worker-machine-count", "0")
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := utilyaml.ToUnstructured(manifest)
	g.Expect(err).NotTo(HaveOccurred())
	clusters.ApplyObjects(ctx, g, mgmt, objs, "e2e")
	tcpKey := client.ObjectKey{Namespace: ns, Name: name + "-control-plane"}

	t.Log("1. The first node stops answering as soon as its etcd runs; the control-plane manager is killed and restarted")
	var first *clusterv1.Machine
	g.Eventually(func(g Gomega) {
		tcp := &controlplanev1.TalosControlPlane{}
		g.Expect(mgmt.Get(ctx, tcpKey, tcp)).To(Succeed())
		chosen := tcp.Annotations[controlplanev1.BootstrapMachineAnnotation]
		g.Expect(chosen).NotTo(BeEmpty(), "the Machine to bootstrap is recorded")
		first = &clusterv1.Machine{}
		g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: chosen}, first)).To(Succeed())
		g.Expect(first.Status.Addresses).NotTo(BeEmpty())
	}).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	bundle := s.bundle(mgmt, ns, name)
	firstAddress := first.Status.Addresses[0].Address
	g.Eventually(func() error {
		_, _, err := etcdCluster(ctx, bundle, firstAddress)
		return err
	}).WithTimeout(3*time.Minute).WithPolling(200*time.Millisecond).Should(Succeed(), "etcd runs on %s", first.Name)
	s.pause(name, first.Name)
	tcp := &controlplanev1.TalosControlPlane{}
	g.Expect(mgmt.Get(ctx, tcpKey, tcp)).To(Succeed())
	t.Logf("Machine %s paused; the TalosControlPlane says initialized: %v", first.Name, tcp.Status.Initialization.ControlPlaneInitialized)
	clusters.KillManager(t, source, clusters.ControlPlaneNamespace)
	s.holdOutage(mgmt, tcpKey, first.Name, "")
	s.unpause(name, first.Name)

	t.Log("2. The first node stops answering again when the second Machine appears; another kill and restart")
	g.Eventually(func(g Gomega) {
		g.Expect(controlPlaneMachines(ctx, g, mgmt, ns, name)).To(HaveLen(2))
	}).WithTimeout(5 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	s.pause(name, first.Name)
	g.Expect(mgmt.Get(ctx, tcpKey, tcp)).To(Succeed())
	recorded := tcp.Annotations[controlplanev1.EtcdClusterAnnotation]
	g.Expect(recorded).NotTo(BeEmpty(), "a control plane that scales up has recorded its etcd cluster")
	clusters.KillManager(t, source, clusters.ControlPlaneNamespace)
	s.holdOutage(mgmt, tcpKey, first.Name, recorded)
	s.unpause(name, first.Name)
	g.Eventually(func(g Gomega) {
		g.Expect(clusters.UsableMachines(ctx, g, mgmt, ns, name)).To(HaveLen(3))
		g.Expect(mgmt.Get(ctx, tcpKey, tcp)).To(Succeed())
		g.Expect(conditions.IsTrue(tcp, controlplanev1.EtcdClusterHealthyCondition)).To(BeTrue(), "EtcdClusterHealthy")
	}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), func() string {
		return "the TalosControlPlane's conditions: " + s.unmetConditions(mgmt, tcpKey)
	})
	s.expectOneEtcdCluster(mgmt, bundle, ns, name)

	t.Log("3. clusterctl move to a second management plane: the TalosControlPlane starts there without status")
	target := s.plane("target")
	to := s.client(target.Kubeconfig())
	before := clusters.Names(clusters.UsableMachines(ctx, g, mgmt, ns, name))
	_, err = plane.RunClusterctl(ctx, bin, source.Kubeconfig(), nil, testWriter{t}, "move", "--namespace", ns, "--to-kubeconfig", target.Kubeconfig())
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		moved := &controlplanev1.TalosControlPlane{}
		g.Expect(to.Get(ctx, tcpKey, moved)).To(Succeed())
		g.Expect(moved.Status.Initialization.ControlPlaneInitialized).To(HaveValue(BeTrue()))
		g.Expect(conditions.IsTrue(moved, controlplanev1.EtcdClusterHealthyCondition)).To(BeTrue(), "EtcdClusterHealthy")
		g.Expect(moved.Annotations).To(HaveKeyWithValue(controlplanev1.BootstrapMachineAnnotation, first.Name))
		g.Expect(moved.Annotations).To(HaveKeyWithValue(controlplanev1.EtcdClusterAnnotation, recorded))
		g.Expect(clusters.Names(clusters.UsableMachines(ctx, g, to, ns, name))).To(Equal(before))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	s.expectOneEtcdCluster(to, bundle, ns, name)
	clusters.ExpectNoRefusals(t, source, clusters.ControlPlaneNamespace)

	g.Expect(to.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		left, err := dockertest.Leftovers(ctx, map[string]string{dockerruntime.LabelCluster: name})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(left).To(BeEmpty())
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// plane starts a management plane in the test's output directory with Cluster API and
// Talon installed by clusterctl, their managers as local processes and Docker nodes.
func (s *suite) plane(name string) *plane.Plane {
	s.t.Helper()
	p, err := plane.Start(s.t.Context(), plane.Options{Dir: filepath.Join(s.out, name), BinDir: s.bin, Log: testWriter{s.t}})
	s.g.Expect(err).NotTo(HaveOccurred())
	s.t.Cleanup(func() { _ = p.Remove(context.Background()) })
	s.g.Expect(quickstart.InstallProviders(s.t.Context(), p, s.clusterctl, quickstart.RuntimeDocker, nil)).To(Succeed())
	return p
}

// podsPlane starts a kubelet-run management cluster in the test's output directory where
// clusterctl init installs cert-manager, Cluster API and Talon as users install them: every
// manager a Deployment's Pod under its own ServiceAccount, with the images of make
// docker-build. Its nodes are simulator containers. Only one such cluster runs on a machine
// at a time (its node is the host).
func (s *suite) podsPlane(name string) *plane.Plane {
	s.t.Helper()
	p := s.startPodsPlane(name, func(p *plane.Plane) error {
		return quickstart.InstallProvidersAsPods(s.t.Context(), p, s.clusterctl, []string{"TALON_DOCKER_UNPRIVILEGED_NODES=true"})
	})
	clusters.ExpectManagersRunning(s.t, s.client(p.Kubeconfig()))
	return p
}

// startPodsPlane starts a kubelet-run management cluster in the test's output directory and
// installs providers on it with install. A failed test logs the managers' last lines.
func (s *suite) startPodsPlane(name string, install func(*plane.Plane) error) *plane.Plane {
	s.t.Helper()
	p := clusters.StartPodsPlane(s.t, filepath.Join(s.out, name), testWriter{s.t})
	s.g.Expect(install(p)).To(Succeed())
	return p
}

// restartManager kills p's manager called name with SIGKILL and starts it again, with args
// instead of its own arguments when there are any.
func restartManager(tb testing.TB, p *plane.Plane, name string, args ...string) {
	tb.Helper()
	g := NewWithT(tb)
	i := slices.IndexFunc(p.Processes(), func(proc plane.Process) bool { return proc.Name == name })
	g.Expect(i).To(BeNumerically(">=", 0), "the plane runs %s", name)
	proc := p.Processes()[i]
	g.Expect(syscall.Kill(proc.PID, syscall.SIGKILL)).To(Succeed())
	g.Eventually(proc.Alive).Should(BeFalse(), "%s (pid %d) is killed", name, proc.PID)
	j := slices.IndexFunc(p.Managers(), func(m plane.Manager) bool { return m.Name == name })
	g.Expect(j).To(BeNumerically(">=", 0))
	m := p.Managers()[j]
	if len(args) > 0 {
		m.Args = args
	}
	g.Expect(p.StartManager(tb.Context(), m)).To(Succeed())
	tb.Logf("%s (pid %d) killed with SIGKILL and started again", name, proc.PID)
}

// holdOutage keeps the outage for a while and checks that the records stay what they were:
// the bootstrapped Machine, and the etcd cluster (none yet when recorded is "").
func (s *suite) holdOutage(c client.Client, tcpKey client.ObjectKey, bootstrapped, recorded string) {
	s.t.Helper()
	s.g.Consistently(func(g Gomega) {
		tcp := &controlplanev1.TalosControlPlane{}
		g.Expect(c.Get(s.t.Context(), tcpKey, tcp)).To(Succeed())
		g.Expect(tcp.Annotations).To(HaveKeyWithValue(controlplanev1.BootstrapMachineAnnotation, bootstrapped))
		if recorded != "" {
			g.Expect(tcp.Annotations).To(HaveKeyWithValue(controlplanev1.EtcdClusterAnnotation, recorded))
		}
	}).WithTimeout(outage).WithPolling(time.Second).Should(Succeed())
	s.t.Logf("After %s: %s", outage, s.unmetConditions(c, tcpKey))
}

// unmetConditions are the TalosControlPlane's conditions that are not True, with their
// reasons and messages: what it waits for.
func (s *suite) unmetConditions(c client.Client, tcpKey client.ObjectKey) string {
	tcp := &controlplanev1.TalosControlPlane{}
	if err := c.Get(context.WithoutCancel(s.t.Context()), tcpKey, tcp); err != nil {
		return err.Error()
	}
	var unmet []string
	for _, cond := range tcp.Status.Conditions {
		if cond.Status != metav1.ConditionTrue {
			unmet = append(unmet, fmt.Sprintf("%s %s: %s", cond.Type, cond.Reason, cond.Message))
		}
	}
	return strings.Join(unmet, "; ")
}

// pause freezes the container of Machine machine of the cluster: its addresses stay, its
// processes answer nothing.
func (s *suite) pause(cluster, machine string) {
	s.t.Helper()
	_, err := dockertest.Docker(s.t.Context(), "pause", s.container(cluster, machine))
	s.g.Expect(err).NotTo(HaveOccurred())
	s.t.Logf("Machine %s's container paused", machine)
}

func (s *suite) unpause(cluster, machine string) {
	s.t.Helper()
	_, err := dockertest.Docker(s.t.Context(), "unpause", s.container(cluster, machine))
	s.g.Expect(err).NotTo(HaveOccurred())
	s.t.Logf("Machine %s's container unpaused", machine)
}

// container is the ID of the container of Machine machine of the cluster.
func (s *suite) container(cluster, machine string) string {
	s.t.Helper()
	out, err := dockertest.Docker(s.t.Context(), "ps", "--all", "--quiet", "--filter", "label="+dockerruntime.LabelCluster+"="+cluster,
		"--filter", "label="+dockerruntime.LabelMachine+"="+machine)
	s.g.Expect(err).NotTo(HaveOccurred())
	ids := sortedFields(out)
	s.g.Expect(ids).To(HaveLen(1), "one container for Machine %s", machine)
	return ids[0]
}

// bundle is the cluster's secrets bundle, once the bootstrap provider has made it.
func (s *suite) bundle(c client.Client, ns, name string) *secrets.Bundle {
	s.t.Helper()
	var bundle *secrets.Bundle
	s.g.Eventually(func(g Gomega) {
		var err error
		bundle, err = clustersecrets.Get(s.t.Context(), c, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(time.Minute).Should(Succeed())
	return bundle
}

// expectOneEtcdCluster checks every control-plane node's etcd: one and the same cluster ID,
// and exactly the members the Machines recorded.
func (s *suite) expectOneEtcdCluster(c client.Client, bundle *secrets.Bundle, ns, name string) {
	s.t.Helper()
	s.g.Eventually(func(g Gomega) {
		machines := controlPlaneMachines(s.t.Context(), g, c, ns, name)
		g.Expect(machines).To(HaveLen(3))
		want := make([]string, 0, len(machines))
		for _, m := range machines {
			want = append(want, m.Annotations[controlplanev1.EtcdMemberIDAnnotation])
		}
		slices.Sort(want)
		clusters := map[uint64][]string{}
		for _, m := range machines {
			g.Expect(m.Status.Addresses).NotTo(BeEmpty())
			id, members, err := etcdCluster(s.t.Context(), bundle, m.Status.Addresses[0].Address)
			g.Expect(err).NotTo(HaveOccurred(), "etcd of Machine %s", m.Name)
			g.Expect(members).To(Equal(want), "the members etcd lists on Machine %s", m.Name)
			clusters[id] = append(clusters[id], m.Name)
		}
		g.Expect(clusters).To(HaveLen(1), "one etcd cluster ID on every node: %v", clusters)
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// controlPlaneMachines are the cluster's control-plane Machines.
func controlPlaneMachines(ctx context.Context, g Gomega, c client.Client, ns, name string) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name},
		client.HasLabels{clusterv1.MachineControlPlaneLabel})).To(Succeed())
	return list.Items
}

// etcdCluster asks the etcd member at address (port 2379), as a client with a certificate
// from the cluster's etcd CA, for its cluster ID and its member IDs (hexadecimal, sorted).
func etcdCluster(ctx context.Context, bundle *secrets.Bundle, address string) (uint64, []string, error) {
	cert, err := pki.Issue(bundle.Certs.Etcd, "talon-e2e", nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth})
	if err != nil {
		return 0, nil, err
	}
	pair, err := tls.X509KeyPair(cert.Crt, cert.Key)
	if err != nil {
		return 0, nil, err
	}
	roots := stdx509.NewCertPool()
	roots.AppendCertsFromPEM(bundle.Certs.Etcd.Crt)
	endpoint := "https://" + net.JoinHostPort(address, "2379")
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		TLS:         &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialTimeout: 3 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	status, err := c.Status(ctx, endpoint)
	if err != nil {
		return 0, nil, err
	}
	list, err := c.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return 0, nil, err
	}
	members := make([]string, 0, len(list.Members))
	for _, m := range list.Members {
		members = append(members, fmt.Sprintf("%016x", m.ID))
	}
	slices.Sort(members)
	return status.Header.ClusterId, members, nil
}
