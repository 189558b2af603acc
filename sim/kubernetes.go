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
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/siderolabs/crypto/x509"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/secrets"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Ports of a control-plane node's Kubernetes components, on the node's address.
const (
	APIServerPort         = 6443
	ControllerManagerPort = 10257
)

// kubeClientCert issues a client certificate from the cluster's Kubernetes CA.
func kubeClientCert(cfg talosconfig.Provider, user string, groups ...string) (*x509.PEMEncodedCertificateAndKey, error) {
	ca := kubernetesCA(cfg)
	if ca == nil || len(ca.Key) == 0 {
		return nil, errors.New("the machine config has no Kubernetes CA key: only control-plane nodes issue Kubernetes credentials")
	}
	return issue(ca, user, nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}, groups...)
}

// kubeconfigFor is a kubeconfig for server with the given client certificate.
func kubeconfigFor(cfg talosconfig.Provider, server, user string, cert *x509.PEMEncodedCertificateAndKey) ([]byte, error) {
	name := clusterName(cfg)
	kubeconfig := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{name: {Server: server, CertificateAuthorityData: kubernetesCA(cfg).Crt}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {ClientCertificateData: cert.Crt, ClientKeyData: cert.Key}},
		Contexts:       map[string]*clientcmdapi.Context{user: {Cluster: name, AuthInfo: user}},
		CurrentContext: user,
	}
	return clientcmd.Write(kubeconfig)
}

// adminKubeconfig is a cluster-admin kubeconfig for server, as Talos' Kubeconfig returns.
func adminKubeconfig(cfg talosconfig.Provider, server string) ([]byte, error) {
	cert, err := kubeClientCert(cfg, "admin", "system:masters")
	if err != nil {
		return nil, err
	}
	return kubeconfigFor(cfg, server, "admin@"+clusterName(cfg), cert)
}

// kubeClient is a client of the cluster for user, at server.
func kubeClient(cfg talosconfig.Provider, server, user string, groups ...string) (*kubernetes.Clientset, error) {
	cert, err := kubeClientCert(cfg, user, groups...)
	if err != nil {
		return nil, err
	}
	return kubeClientWith(cfg, server, rest.TLSClientConfig{CertData: cert.Crt, KeyData: cert.Key}, "")
}

// kubeClientWith is a client of the cluster at server that trusts the config's Kubernetes
// CA and authenticates with tlsConfig's client certificate or a bearer token.
func kubeClientWith(cfg talosconfig.Provider, server string, tlsConfig rest.TLSClientConfig, token string) (*kubernetes.Clientset, error) {
	tlsConfig.CAData = kubernetesCA(cfg).Crt
	return kubernetes.NewForConfig(&rest.Config{Host: server, TLSClientConfig: tlsConfig, BearerToken: token, Timeout: 10 * time.Second})
}

// apiServerCertificate is kube-apiserver's serving certificate, issued by the Kubernetes CA
// with the names Talos' KubernetesCertSANsController gives it, each once.
func (n *Node) apiServerCertificate(cfg talosconfig.Provider) (*x509.PEMEncodedCertificateAndKey, error) {
	var sans secrets.CertSANSpec
	if endpoint := clusterEndpoint(cfg); endpoint != nil {
		sans.Append(endpoint.Hostname())
	}
	sans.Append(cfg.K8sAPIServerConfig().CertSANs()...)
	sans.AppendDNSNames("kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc."+k8sNetwork(cfg).DNSDomain(), "localhost")
	n.mu.Lock()
	host, domain := n.fqdnLocked()
	n.mu.Unlock()
	sans.Append(host)
	if domain != "" {
		sans.Append(host + "." + domain)
	}
	if serviceIPs, err := apiServerServiceIPs(k8sNetwork(cfg).ServiceCIDRs()); err == nil {
		sans.AppendIPs(serviceIPs...)
	}
	if addr, err := netip.ParseAddr(n.ip.String()); err == nil {
		sans.AppendIPs(addr)
	}
	sans.AppendIPs(netip.MustParseAddr("127.0.0.1"))
	sans.Sort()
	return issue(kubernetesCA(cfg), "kube-apiserver", sans.StdIPs(), sans.DNSNames, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth})
}

// startAPIServer runs kube-apiserver on the node's address against its own etcd member,
// configured from the machine config: the Kubernetes and aggregator CAs, the
// service-account key, the service CIDR, the certificate SANs and the extra arguments. A
// light node serves its cluster's objects from memory instead (apiserver_memory.go).
func (n *Node) startAPIServer(ctx context.Context, cfg talosconfig.Provider, etcdTLS transport.TLSInfo) (*component, error) {
	if n.opts.Light != nil {
		return n.startMemoryAPIServer(ctx, cfg)
	}
	serving, err := n.apiServerCertificate(cfg)
	if err != nil {
		return nil, err
	}
	sa := serviceAccountKey(cfg)
	if sa == nil {
		return nil, errors.New("the machine config has no service-account key")
	}
	files := map[string][]byte{
		"ca.crt": kubernetesCA(cfg).Crt, "apiserver.crt": serving.Crt, "apiserver.key": serving.Key, "sa.key": sa.Key,
	}
	if aggregator := aggregatorCA(cfg); aggregator != nil && len(aggregator.Key) > 0 {
		proxy, err := issue(aggregator, "front-proxy-client", nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth})
		if err != nil {
			return nil, err
		}
		files["aggregator-ca.crt"], files["front-proxy-client.crt"], files["front-proxy-client.key"] = aggregator.Crt, proxy.Crt, proxy.Key
	}
	dir, err := n.writeFiles("kube-pki", files)
	if err != nil {
		return nil, err
	}
	issuer := "https://kubernetes.default.svc"
	if endpoint := clusterEndpoint(cfg); endpoint != nil {
		issuer = endpoint.String()
	}
	flags := map[string]string{
		"bind-address":                     n.ip.String(),
		"advertise-address":                n.ip.String(),
		"secure-port":                      strconv.Itoa(APIServerPort),
		"etcd-servers":                     etcdEndpoint(n.ip),
		"etcd-cafile":                      etcdTLS.TrustedCAFile,
		"etcd-certfile":                    etcdTLS.CertFile,
		"etcd-keyfile":                     etcdTLS.KeyFile,
		"tls-cert-file":                    filepath.Join(dir, "apiserver.crt"),
		"tls-private-key-file":             filepath.Join(dir, "apiserver.key"),
		"client-ca-file":                   filepath.Join(dir, "ca.crt"),
		"service-account-key-file":         filepath.Join(dir, "sa.key"),
		"service-account-signing-key-file": filepath.Join(dir, "sa.key"),
		"service-account-issuer":           issuer,
		"service-cluster-ip-range":         strings.Join(prefixStrings(k8sNetwork(cfg).ServiceCIDRs()), ","),
		"authorization-mode":               "Node,RBAC",
		"enable-admission-plugins":         "NodeRestriction",
		"enable-bootstrap-token-auth":      "true",
		"allow-privileged":                 "true",
		"enable-priority-and-fairness":     "false",
		// Polling the database size calls etcd's Status, which panics in a member that has just
		// applied its own removal: in one process that would take every node down.
		"etcd-db-metric-poll-interval": "0",
		"profiling":                    "false",
		"v":                            "0",
	}
	if n.ip.IsLoopback() {
		// Kubernetes cannot publish a loopback address as the kubernetes Service's endpoint
		// (v1.37 refuses to start with it): a node on loopback publishes none.
		flags["endpoint-reconciler-type"] = "none"
	}
	if _, ok := files["aggregator-ca.crt"]; ok {
		flags["requestheader-client-ca-file"] = filepath.Join(dir, "aggregator-ca.crt")
		flags["requestheader-allowed-names"] = "front-proxy-client"
		flags["requestheader-username-headers"] = "X-Remote-User"
		flags["requestheader-group-headers"] = "X-Remote-Group"
		flags["requestheader-extra-headers-prefix"] = "X-Remote-Extra-"
		flags["proxy-client-cert-file"] = filepath.Join(dir, "front-proxy-client.crt")
		flags["proxy-client-key-file"] = filepath.Join(dir, "front-proxy-client.key")
	}
	return n.startComponent(ctx, "kube-apiserver", cfg.K8sAPIServerConfig().Image(), withExtraArgs(flags, cfg.K8sAPIServerConfig().ExtraArgs()))
}

// startControllerManager runs kube-controller-manager against the node's own
// kube-apiserver, as Talos runs it on every control-plane node: it signs and approves the
// kubelet certificates of joining nodes (with the cluster's Kubernetes CA), marks Nodes whose
// kubelet stopped reporting NotReady, and runs the rest of the built-in controllers under
// one elected leader.
func (n *Node) startControllerManager(ctx context.Context, cfg talosconfig.Provider) (*component, error) {
	if n.opts.Light != nil {
		return startMemoryControllerManager(), nil
	}
	cert, err := kubeClientCert(cfg, "system:kube-controller-manager")
	if err != nil {
		return nil, err
	}
	kubeconfig, err := kubeconfigFor(cfg, n.apiServerURL(), "system:kube-controller-manager", cert)
	if err != nil {
		return nil, err
	}
	ca := kubernetesCA(cfg)
	dir, err := n.writeFiles("kube-controller-manager", map[string][]byte{
		"kubeconfig": kubeconfig, "ca.crt": ca.Crt, "ca.key": ca.Key, "sa.key": serviceAccountKey(cfg).Key,
	})
	if err != nil {
		return nil, err
	}
	flags := map[string]string{
		"kubeconfig":                       filepath.Join(dir, "kubeconfig"),
		"authentication-kubeconfig":        filepath.Join(dir, "kubeconfig"),
		"authorization-kubeconfig":         filepath.Join(dir, "kubeconfig"),
		"bind-address":                     n.ip.String(),
		"secure-port":                      strconv.Itoa(ControllerManagerPort),
		"cert-dir":                         filepath.Join(dir, "serving"),
		"controllers":                      "*,bootstrapsigner,tokencleaner",
		"use-service-account-credentials":  "true",
		"service-account-private-key-file": filepath.Join(dir, "sa.key"),
		"root-ca-file":                     filepath.Join(dir, "ca.crt"),
		"cluster-signing-cert-file":        filepath.Join(dir, "ca.crt"),
		"cluster-signing-key-file":         filepath.Join(dir, "ca.key"),
		"leader-elect":                     "true",
		"profiling":                        "false",
		"v":                                "0",
	}
	return n.startComponent(ctx, "kube-controller-manager", cfg.K8sControllerManagerConfig().Image(), withExtraArgs(flags, cfg.K8sControllerManagerConfig().ExtraArgs()))
}

// writeFiles writes files into the state subdirectory sub and returns its path.
func (n *Node) writeFiles(sub string, files map[string][]byte) (string, error) {
	dir := n.stateDir(sub)
	return dir, writeFilesIn(dir, files)
}

// writeFilesIn writes files (name → content) into dir, readable by the owner only.
func writeFilesIn(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// waitForAPIServer waits until the API server at server answers /readyz.
func waitForAPIServer(ctx context.Context, c *kubernetes.Clientset, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// apiServerURL is the URL of the node's own kube-apiserver.
func (n *Node) apiServerURL() string {
	return (&url.URL{Scheme: "https", Host: net.JoinHostPort(n.ip.String(), strconv.Itoa(APIServerPort))}).String()
}
