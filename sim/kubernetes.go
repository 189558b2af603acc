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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/siderolabs/crypto/x509"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIServerPort is where a control-plane node's kube-apiserver listens.
const APIServerPort = 6443

// apiServer is a kube-apiserver process of a control-plane node.
type apiServer struct {
	cmd *exec.Cmd
	// done is closed when the process has exited.
	done chan struct{}
}

// kubeClientCert issues a client certificate from the cluster's Kubernetes CA.
func kubeClientCert(cfg talosconfig.Provider, user string, groups ...string) (*x509.PEMEncodedCertificateAndKey, error) {
	ca := cfg.Cluster().IssuingCA()
	if ca == nil || len(ca.Key) == 0 {
		return nil, errors.New("the machine config has no Kubernetes CA key: only control-plane nodes issue Kubernetes credentials")
	}
	return issue(ca, user, nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}, groups...)
}

// adminKubeconfig is a cluster-admin kubeconfig for server, as Talos' Kubeconfig returns.
func adminKubeconfig(cfg talosconfig.Provider, clusterName, server string) ([]byte, error) {
	cert, err := kubeClientCert(cfg, "admin", "system:masters")
	if err != nil {
		return nil, err
	}
	user := "admin@" + clusterName
	kubeconfig := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{clusterName: {Server: server, CertificateAuthorityData: cfg.Cluster().IssuingCA().Crt}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {ClientCertificateData: cert.Crt, ClientKeyData: cert.Key}},
		Contexts:       map[string]*clientcmdapi.Context{user: {Cluster: clusterName, AuthInfo: user}},
		CurrentContext: user,
	}
	return clientcmd.Write(kubeconfig)
}

// kubeClient is a client of the cluster for user, at server.
func kubeClient(cfg talosconfig.Provider, server, user string, groups ...string) (*kubernetes.Clientset, error) {
	cert, err := kubeClientCert(cfg, user, groups...)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(&rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAData: cfg.Cluster().IssuingCA().Crt, CertData: cert.Crt, KeyData: cert.Key},
		Timeout:         10 * time.Second,
	})
}

// startAPIServer runs kube-apiserver on the node's address against its own etcd member,
// configured from the machine config: the Kubernetes CA, the service-account key, the
// service CIDR and the certificate SANs.
func (n *Node) startAPIServer(ctx context.Context, cfg talosconfig.Provider, etcdTLS transport.TLSInfo) (*apiServer, error) {
	binary := filepath.Join(n.opts.BinDir, "kube-apiserver")
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("kube-apiserver not found in %s (run 'make tools'): %w", n.opts.BinDir, err)
	}
	dir := n.stateDir("kube-pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	sans, ips := cfg.Cluster().CertSANs(), []net.IP{n.ip}
	if endpoint := cfg.Cluster().Endpoint(); endpoint != nil {
		sans = append(sans, endpoint.Hostname())
	}
	if serviceIPs, err := cfg.Cluster().Network().APIServerIPs(); err == nil {
		for _, ip := range serviceIPs {
			ips = append(ips, net.IP(ip.AsSlice()))
		}
	}
	for _, san := range sans {
		if addr, err := netip.ParseAddr(san); err == nil {
			ips = append(ips, net.IP(addr.AsSlice()))
		}
	}
	dnsNames := append([]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost"}, sans...)
	serving, err := issue(cfg.Cluster().IssuingCA(), "kube-apiserver", ips, dnsNames, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth})
	if err != nil {
		return nil, err
	}
	sa := cfg.Cluster().ServiceAccount()
	if sa == nil {
		return nil, errors.New("the machine config has no service-account key")
	}
	files := map[string][]byte{
		"ca.crt": cfg.Cluster().IssuingCA().Crt, "apiserver.crt": serving.Crt, "apiserver.key": serving.Key, "sa.key": sa.Key,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	issuer := "https://kubernetes.default.svc"
	if endpoint := cfg.Cluster().Endpoint(); endpoint != nil {
		issuer = endpoint.String()
	}
	args := []string{
		"--bind-address=" + n.ip.String(),
		"--advertise-address=" + n.ip.String(),
		"--secure-port=" + strconv.Itoa(APIServerPort),
		"--etcd-servers=" + etcdEndpoint(n.ip),
		"--etcd-cafile=" + etcdTLS.TrustedCAFile, "--etcd-certfile=" + etcdTLS.CertFile, "--etcd-keyfile=" + etcdTLS.KeyFile,
		"--tls-cert-file=" + filepath.Join(dir, "apiserver.crt"), "--tls-private-key-file=" + filepath.Join(dir, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(dir, "ca.crt"),
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-issuer=" + issuer,
		"--service-cluster-ip-range=" + strings.Join(cfg.Cluster().Network().ServiceCIDRs(), ","),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v=0",
	}
	logFile, err := os.Create(n.stateDir("kube-apiserver.log"))
	if err != nil {
		return nil, err
	}
	//nolint:gosec // the binary is the pinned kube-apiserver in the node's BinDir.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// kube-apiserver goes down with the node's process, as it would with a node's power.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("failed to start kube-apiserver: %w", err)
	}
	s := &apiServer{cmd: cmd, done: make(chan struct{})}
	go func() {
		// The exit status says nothing new: the node is stopping it, or it failed and its
		// log in the state directory says why.
		_ = cmd.Wait()
		_ = logFile.Close()
		close(s.done)
	}()
	return s, nil
}

// stop terminates kube-apiserver and waits for it.
func (s *apiServer) stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
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
