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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	stdx509 "crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// runWorker brings a configured worker into the cluster, the way a Talos worker does. Its
// kubelet joins Kubernetes by TLS bootstrapping with the cluster's bootstrap token (it needs
// nothing from the Talos API), and, at the same time, its Talos API certificate comes from
// trustd on the control plane (a worker's config has no OS CA key), asked at every address
// Talos knows trustd by: the cluster endpoint's, and, once the kubelet has joined, those of
// the kube-apiservers the "kubernetes" EndpointSlice lists.
func (n *Node) runWorker(ctx context.Context, cfg talosconfig.Provider) {
	var kubelet atomic.Pointer[kubernetes.Clientset]
	go func() {
		_ = n.retry(ctx, "Waiting for a certificate from trustd", func() error {
			cert, err := n.requestServerCert(ctx, cfg, trustdEndpoints(ctx, cfg, kubelet.Load()))
			if err != nil {
				return err
			}
			n.mu.Lock()
			n.serverCert = cert
			n.mu.Unlock()
			n.opts.Log.Info("Talos API certificate issued by trustd")
			return nil
		})
	}()
	var c *kubernetes.Clientset
	if err := n.retry(ctx, "Waiting to join Kubernetes", func() error {
		var err error
		c, err = n.kubeletClient(ctx, cfg)
		return err
	}); err != nil {
		return
	}
	n.opts.Log.Info("Kubelet client certificate issued")
	kubelet.Store(c)
	n.startKubelet(c)
}

// trustdEndpoints are the hosts a worker asks trustd at, as Talos' k8s.Endpoint resources
// merge them: the cluster endpoint's host, then the addresses of the "kubernetes"
// EndpointSlices in the default namespace, read with the kubelet's credentials c (none
// before the kubelet has joined).
func trustdEndpoints(ctx context.Context, cfg talosconfig.Provider, c *kubernetes.Clientset) []string {
	var hosts []string
	if endpoint := clusterEndpoint(cfg); endpoint != nil {
		hosts = append(hosts, endpoint.Hostname())
	}
	if c == nil {
		return hosts
	}
	list, err := c.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return hosts
	}
	for _, slice := range list.Items {
		for _, ep := range slice.Endpoints {
			for _, addr := range ep.Addresses {
				if !slices.Contains(hosts, addr) {
					hosts = append(hosts, addr)
				}
			}
		}
	}
	return hosts
}

// kubeletClient is the kubelet's client of the cluster endpoint, with the client
// certificate from an earlier boot or one obtained by TLS bootstrapping: a certificate
// signing request made with the bootstrap token, approved and signed by
// kube-controller-manager.
func (n *Node) kubeletClient(ctx context.Context, cfg talosconfig.Provider) (*kubernetes.Clientset, error) {
	endpoint := clusterEndpoint(cfg)
	if endpoint == nil {
		return nil, errors.New("the config has no cluster endpoint")
	}
	crtFile, keyFile := n.stateDir("kubelet", "kubelet.crt"), n.stateDir("kubelet", "kubelet.key")
	if crt, key, err := readKeyPair(crtFile, keyFile); err == nil {
		return kubeClientWith(cfg, endpoint.String(), rest.TLSClientConfig{CertData: crt, KeyData: key}, "")
	}
	token := cfg.Cluster().Token()
	bootstrap, err := kubeClientWith(cfg, endpoint.String(), rest.TLSClientConfig{}, token.ID()+"."+token.Secret())
	if err != nil || n.opts.Light != nil {
		// A light node's cluster has no kube-controller-manager to sign CSRs, and its
		// in-memory API server authenticates nobody: the bootstrap credentials do.
		return bootstrap, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	request, err := stdx509.CreateCertificateRequest(rand.Reader, &stdx509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + n.nodename(), Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return nil, err
	}
	csr, err := bootstrap.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: request}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to request a kubelet certificate: %w", err)
	}
	crt, err := waitForCertificate(ctx, bootstrap, csr.Name)
	if err != nil {
		return nil, err
	}
	keyDER, err := stdx509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if _, err := n.writeFiles("kubelet", map[string][]byte{filepath.Base(crtFile): crt, filepath.Base(keyFile): keyPEM}); err != nil {
		return nil, err
	}
	return kubeClientWith(cfg, endpoint.String(), rest.TLSClientConfig{CertData: crt, KeyData: keyPEM}, "")
}

// waitForCertificate waits until the CSR is signed, or refused.
func waitForCertificate(ctx context.Context, c *kubernetes.Clientset, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		csr, err := c.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if len(csr.Status.Certificate) > 0 {
				return csr.Status.Certificate, nil
			}
			for _, cond := range csr.Status.Conditions {
				if (cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed) && cond.Status == corev1.ConditionTrue {
					return nil, fmt.Errorf("kubelet certificate request %s %s: %s", name, cond.Type, cond.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kubelet certificate request %s was not signed: is kube-controller-manager running? %w", name, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// readKeyPair reads a certificate and key that are still valid for a day.
func readKeyPair(crtFile, keyFile string) ([]byte, []byte, error) {
	crt, err := os.ReadFile(crtFile) //nolint:gosec // a file of the node's own state directory.
	if err != nil {
		return nil, nil, err
	}
	key, err := os.ReadFile(keyFile) //nolint:gosec // a file of the node's own state directory.
	if err != nil {
		return nil, nil, err
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, nil, err
	}
	if time.Until(pair.Leaf.NotAfter) < 24*time.Hour {
		return nil, nil, errors.New("the certificate expires within a day")
	}
	return crt, key, nil
}
