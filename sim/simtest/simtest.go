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

// Package simtest drives simulated Talos nodes from tests the way a user drives Talos nodes:
// configs rendered by Talon's configgen, machinery's own client with a talosconfig from the
// cluster's bundle, and the Kubernetes API of the workload cluster.
package simtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosclient "github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/role"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// KubernetesVersion is the Kubernetes version the rendered configs ask for.
const KubernetesVersion = "v1.36.3"

// Bundle is one secrets bundle per test binary: making one costs half a second.
var Bundle = sync.OnceValue(func() *secrets.Bundle {
	b, err := configgen.NewBundle("", time.Now())
	if err != nil {
		panic(err)
	}
	return b
})

// Render renders the config of a node of cluster "sim" (the bundle's) whose endpoint is
// endpoint's kube-apiserver, with patches (JSON 6902) applied.
func Render(tb testing.TB, generateType bootstrapv1.GenerateType, hostname, endpoint string, patches ...bootstrapv1.ConfigPatch) []byte {
	tb.Helper()
	return RenderFor(tb, configgen.ModeContainer, generateType, hostname, endpoint, patches...)
}

// RenderFor renders a config as Render does, for a node of mode (container or metal).
func RenderFor(tb testing.TB, mode configgen.Mode, generateType bootstrapv1.GenerateType, hostname, endpoint string, patches ...bootstrapv1.ConfigPatch) []byte {
	tb.Helper()
	data, err := configgen.Render(Bundle(), configgen.Cluster{
		Name: "sim", Endpoint: configgen.Endpoint{Host: endpoint, Port: 6443}, KubernetesVersion: KubernetesVersion,
	}, configgen.Machine{
		Spec:     bootstrapv1.TalosConfigSpec{GenerateType: generateType, ConfigPatches: patches},
		Hostname: hostname, Mode: mode,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// Client is a machinery client trusting bundle's OS CA with an admin certificate from it,
// or one holding roles when given.
func Client(tb testing.TB, bundle *secrets.Bundle, endpoint string, roles ...role.Role) *talosclient.Client {
	tb.Helper()
	return ClientWithCert(tb, bundle, bundle, endpoint, roles...)
}

// ClientWithCert trusts server's OS CA but presents a certificate issued by issuer's CA
// with roles (admin when none are given).
func ClientWithCert(tb testing.TB, server, issuer *secrets.Bundle, endpoint string, roles ...role.Role) *talosclient.Client {
	tb.Helper()
	tc, err := configgen.NewTalosconfig(server, "sim", []string{endpoint}, time.Now(), time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := clientconfig.FromBytes(tc.Data)
	if err != nil {
		tb.Fatal(err)
	}
	if len(roles) == 0 {
		roles = []role.Role{role.Admin}
	}
	cert, err := secrets.NewAdminCertificateAndKey(time.Now(), issuer.Certs.OS, role.MakeSet(roles...), time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Contexts["sim"].Crt = base64.StdEncoding.EncodeToString(cert.Crt)
	cfg.Contexts["sim"].Key = base64.StdEncoding.EncodeToString(cert.Key)
	c, err := talosclient.New(tb.Context(), talosclient.WithConfig(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// MaintenanceClient is a client of a node in maintenance mode.
func MaintenanceClient(tb testing.TB, endpoint string) *talosclient.Client {
	tb.Helper()
	//nolint:gosec // Talos clients do not verify a node in maintenance mode: it has no identity yet.
	c, err := talosclient.New(tb.Context(), talosclient.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), talosclient.WithEndpoints(endpoint))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Cluster is what a Scenario leaves running.
type Cluster struct {
	// Talos is an admin client of the first (bootstrapped) control-plane node.
	Talos *talosclient.Client
	// Kube is an admin client of the workload cluster, from the Kubeconfig call.
	Kube *kubernetes.Clientset
	// Members are the etcd members once all control-plane nodes joined.
	Members []*machine.EtcdMember
	// Ready is how long it took from the first apply to every Node Ready.
	Ready time.Duration
}

// Scenario applies configs to control-plane nodes at controlPlanes (cp-0, cp-1, ...) and
// workers at workers (worker-0, ...), all waiting in maintenance mode, bootstraps the first,
// and asserts that within a bounded time every control-plane node is a voting etcd member,
// kube-apiserver answers at each control-plane address with the kubeconfig the Talos API
// returns, every node's Node is Ready with the configured kubelet version, and every
// control-plane node has its mirror Pods. The first control-plane address is the cluster
// endpoint (there is no load balancer); patches apply to the control-plane configs.
func Scenario(tb testing.TB, controlPlanes, workers []string, patches ...bootstrapv1.ConfigPatch) Cluster {
	tb.Helper()
	g := NewWithT(tb)
	ctx := tb.Context()
	endpoint := controlPlanes[0]
	start := time.Now()
	apply := func(address string, data []byte) {
		g.Eventually(func() error {
			_, err := MaintenanceClient(tb, address).ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: data})
			return err
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "apply the config to %s", address)
	}
	for i, address := range controlPlanes {
		apply(address, Render(tb, bootstrapv1.GenerateTypeControlPlane, fmt.Sprintf("cp-%d", i), endpoint, patches...))
	}
	for i, address := range workers {
		apply(address, Render(tb, bootstrapv1.GenerateTypeWorker, fmt.Sprintf("worker-%d", i), endpoint))
	}
	admin := Client(tb, Bundle(), endpoint)
	g.Expect(admin.Bootstrap(ctx, &machine.BootstrapRequest{})).To(Succeed())

	tb.Log("Every control-plane node is a voting etcd member")
	var members []*machine.EtcdMember
	g.Eventually(func(g Gomega) {
		resp, err := admin.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		g.Expect(err).NotTo(HaveOccurred())
		members = resp.Messages[0].Members
		g.Expect(members).To(HaveLen(len(controlPlanes)))
		for _, m := range members {
			g.Expect(m.IsLearner).To(BeFalse(), "member %s is still a learner", m.Hostname)
		}
	}, 3*time.Minute, time.Second).Should(Succeed())

	tb.Log("The kubeconfig from the Talos API reaches every control-plane node's kube-apiserver")
	kubeconfig, err := admin.Kubeconfig(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	restConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(restConfig.Host).To(Equal("https://" + endpoint + ":6443"))
	for _, address := range controlPlanes {
		perNode := *restConfig
		perNode.Host = "https://" + address + ":6443"
		c, err := kubernetes.NewForConfig(&perNode)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() error {
			_, err := c.Discovery().ServerVersion()
			return err
		}, 2*time.Minute, time.Second).Should(Succeed(), "kube-apiserver at %s", address)
	}

	tb.Log("Every Node Ready with the configured kubelet version; workers joined by TLS bootstrapping")
	kube, err := kubernetes.NewForConfig(restConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes.Items).To(HaveLen(len(controlPlanes) + len(workers)))
		for _, node := range nodes.Items {
			g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal(KubernetesVersion), "node %s", node.Name)
			g.Expect(node.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))), "node %s", node.Name)
		}
	}, 3*time.Minute, time.Second).Should(Succeed())
	ready := time.Since(start)
	tb.Logf("%d control-plane and %d worker Nodes Ready %s after the first apply", len(controlPlanes), len(workers), ready.Round(time.Second))

	tb.Log("Mirror Pods of the static control-plane pods, Ready, with the configured images")
	g.Eventually(func(g Gomega) {
		pods, err := kube.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "tier=control-plane"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(HaveLen(3 * len(controlPlanes)))
		for _, pod := range pods.Items {
			g.Expect(pod.Annotations).To(HaveKey("kubernetes.io/config.mirror"))
			g.Expect(pod.Spec.Containers[0].Image).To(HaveSuffix(":"+KubernetesVersion), "pod %s", pod.Name)
			g.Expect(pod.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), "pod %s", pod.Name)
		}
	}, time.Minute, time.Second).Should(Succeed())
	return Cluster{Talos: admin, Kube: kube, Members: members, Ready: ready}
}

// ServedNames are the DNS names of the certificate the Talos API at address serves: a
// configured node's certificate names its hostname. (Talos stamps a reply's metadata with
// the node as the caller routed it, not with its hostname.)
func ServedNames(ctx context.Context, address string) ([]string, error) {
	cert, err := ServedCertificate(ctx, net.JoinHostPort(address, "50000"))
	if err != nil {
		return nil, err
	}
	return cert.DNSNames, nil
}

// ServedCertificate is the certificate a TLS server at hostport serves, read without
// verifying it or presenting one.
func ServedCertificate(ctx context.Context, hostport string) (*x509.Certificate, error) {
	var cert *x509.Certificate
	//nolint:gosec // only the served certificate is read; the handshake may then fail for want of a client certificate.
	config := &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) > 0 {
			cert = cs.PeerCertificates[0]
		}
		return nil
	}}
	conn, err := (&tls.Dialer{Config: config}).DialContext(ctx, "tcp", hostport)
	if conn != nil {
		_ = conn.Close()
	}
	if cert == nil {
		if err == nil {
			err = fmt.Errorf("%s served no certificate", hostport)
		}
		return nil, err
	}
	return cert, nil
}
