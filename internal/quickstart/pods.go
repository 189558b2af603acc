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

package quickstart

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/talon-capi/talon/internal/plane"
)

// CertManagerVersion is the cert-manager release 'make cert-manager' builds, which
// clusterctl installs before the providers when their managers run as Pods.
const CertManagerVersion = "v1.19.1"

// CertManagerManifest is where 'make cert-manager' writes cert-manager's install manifest,
// beside the clusterctl.yaml of Talon's local repository (clusterctl reads a file:// URL as
// a repository: <name>/<version>/<file>).
func CertManagerManifest(clusterctlConfig string) string {
	return filepath.Join(filepath.Dir(clusterctlConfig), "cert-manager", "cert-manager", CertManagerVersion, "cert-manager.yaml")
}

// InstallProvidersAsPods installs cert-manager (this build's), Cluster API and Talon on the
// kubelet-run management cluster p with clusterctl init from clusterctlConfig, as users
// install them: every manager a Deployment, its Pods running the images clusterctl names,
// which must be in the Docker Engine (nothing is pulled). env holds clusterctl variables
// (TALON_DOCKER_UNPRIVILEGED_NODES, CLUSTER_TOPOLOGY, ...). Once the providers are
// available, the in-place update hooks beside clusterctlConfig are registered.
func InstallProvidersAsPods(ctx context.Context, p *plane.Plane, clusterctlConfig string, env []string) error {
	return installAsPods(ctx, p, clusterctlConfig, env, "talon", true)
}

// InstallSideroProvidersAsPods is InstallProvidersAsPods with Sidero Labs' bootstrap and
// control-plane providers in place of Talon's, from clusterctlConfig
// (out/clusterctl-sidero.yaml), their images those of make sidero-images.
func InstallSideroProvidersAsPods(ctx context.Context, p *plane.Plane, clusterctlConfig string, env []string) error {
	return installAsPods(ctx, p, clusterctlConfig, env, SideroProvider, true)
}

// TakeOverFromSidero hands the clusters Sidero Labs' providers made on the kubelet-run
// management cluster p to Talon's, as docs/migrate-from-sidero.md tells a person to:
// clusterctl deletes their providers (keeping the CustomResourceDefinitions and every
// object), their managers' Pods are gone, and clusterctl installs Talon's bootstrap and
// control-plane providers from clusterctlConfig (out/clusterctl.yaml) over the same
// CustomResourceDefinitions.
func TakeOverFromSidero(ctx context.Context, p *plane.Plane, clusterctlConfig string) error {
	if _, err := p.Clusterctl(ctx, nil, "delete", "--bootstrap", SideroProvider, "--control-plane", SideroProvider); err != nil {
		return err
	}
	c, err := p.Client(client.Options{})
	if err != nil {
		return err
	}
	// No two providers reconcile the same objects at once.
	var pods corev1.PodList
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, provider := range []string{"bootstrap-" + SideroProvider, "control-plane-" + SideroProvider} {
			if err := c.List(ctx, &pods, client.MatchingLabels{clusterv1.ProviderNameLabel: provider}); err != nil || len(pods.Items) > 0 {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the Pods of Sidero's managers are still there after clusterctl delete: %w", err)
	}
	return installAsPods(ctx, p, clusterctlConfig, nil, "talon", false)
}

// installAsPods runs clusterctl init for the bootstrap and control-plane providers called
// provider, with Cluster API's core and Talon's infrastructure provider when all is set and
// cert-manager first, and waits until every provider's Deployment is available and every
// admission webhook answers. Talon's control plane installed with the core gets its
// in-place update hooks registered.
func installAsPods(ctx context.Context, p *plane.Plane, clusterctlConfig string, env []string, provider string, all bool) error {
	base, err := os.ReadFile(clusterctlConfig)
	if err != nil {
		return fmt.Errorf("clusterctl configuration %s not found: run 'make release-manifests' first: %w", clusterctlConfig, err)
	}
	certManager := CertManagerManifest(clusterctlConfig)
	if _, err := os.Stat(certManager); err != nil {
		return fmt.Errorf("cert-manager's install manifest %s not found: run 'make cert-manager' first", certManager)
	}
	config := filepath.Join(p.Dir(), "clusterctl.yaml")
	if err := os.WriteFile(config, fmt.Appendf(base, "cert-manager:\n  url: file://%s\n  version: %s\n", certManager, CertManagerVersion), 0o600); err != nil {
		return err
	}
	providers := []string{"--config", config, "--bootstrap", provider, "--control-plane", provider}
	if all {
		providers = append(providers, "--core", "cluster-api", "--infrastructure", "talon")
	}
	listed, err := p.Clusterctl(ctx, env, append([]string{"init", "list-images"}, providers...)...)
	if err != nil {
		return err
	}
	images := strings.Fields(string(listed))
	has, err := dockerImages(ctx, images...)
	if err != nil {
		return fmt.Errorf("the managers' images cannot be checked: %w", err)
	}
	missing := slices.DeleteFunc(images, func(image string) bool { return has[image] })
	if len(missing) > 0 {
		return fmt.Errorf("the Docker Engine lacks the images of %s, and nothing is pulled: run 'make docker-build cert-manager' first (Sidero's: 'make sidero-images')", strings.Join(missing, ", "))
	}
	if _, err := p.Clusterctl(ctx, env, append(append([]string{"init"}, providers...), "--wait-providers", "--wait-provider-timeout", "300")...); err != nil {
		return err
	}
	// The hooks need the core manager's RuntimeSDK gate, which clusterctlConfig's variables
	// turn on when the core is installed from it. A core installed before (a takeover)
	// keeps its gates: the hooks are for its owner to register (docs/clusterctl.md).
	if err := waitForWebhooks(ctx, p, 2*time.Minute); err != nil || provider != "talon" || !all {
		return err
	}
	if err := installInPlaceHooks(ctx, p, clusterctlConfig); err != nil {
		return err
	}
	// Registering the hooks rolled the core manager out again: its webhooks are unreachable
	// until the Service routes to the new Pod.
	return waitForWebhooks(ctx, p, 2*time.Minute)
}

// installInPlaceHooks registers Talon's in-place update hooks with Cluster API's core manager
// when the release has them (InPlaceUpdatesFile beside clusterctlConfig).
func installInPlaceHooks(ctx context.Context, p *plane.Plane, clusterctlConfig string) error {
	path := filepath.Join(filepath.Dir(clusterctlConfig), InPlaceUpdatesFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		p.Logf("Workers are replaced, not updated in place: no %s beside %s\n", InPlaceUpdatesFile, clusterctlConfig)
		return nil
	} else if err != nil {
		return err
	}
	objs, err := applyFile(ctx, p, path)
	if err != nil {
		return fmt.Errorf("failed to register the in-place update hooks: %w", err)
	}
	if err := resolveExtensions(ctx, p, objs); err != nil {
		return fmt.Errorf("failed to let Cluster API's core manager reach the in-place update hooks: %w", err)
	}
	return nil
}

// waitForWebhooks waits until every admission webhook of p's providers answers as the API
// server calls it: a TLS handshake with the Service's cluster IP, the certificate verified
// against the webhook's CA bundle for the Service's DNS name. kube-proxy routes the cluster
// IP to a ready Pod only once the Service's endpoints list it (a Deployment available, with
// its Pod ready, is not yet that), and the CA bundle is cert-manager's to inject. The API
// server runs on this host, so a connection from here goes the same way.
func waitForWebhooks(ctx context.Context, p *plane.Plane, timeout time.Duration) error {
	c, err := p.Client(client.Options{})
	if err != nil {
		return err
	}
	var configs []admissionregistrationv1.WebhookClientConfig
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &validating); err != nil {
		return err
	}
	for _, config := range validating.Items {
		for _, w := range config.Webhooks {
			configs = append(configs, w.ClientConfig)
		}
	}
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &mutating); err != nil {
		return err
	}
	for _, config := range mutating.Items {
		for _, w := range config.Webhooks {
			configs = append(configs, w.ClientConfig)
		}
	}
	seen := map[string]bool{}
	for _, config := range configs {
		ref := config.Service
		if ref == nil || seen[ref.Namespace+"/"+ref.Name] {
			continue
		}
		seen[ref.Namespace+"/"+ref.Name] = true
		var lastErr error
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			lastErr = handshake(ctx, c, config)
			return lastErr == nil, nil
		})
		if err != nil {
			return fmt.Errorf("the webhook Service %s/%s does not answer: %w (last: %v)", ref.Namespace, ref.Name, err, lastErr)
		}
	}
	return nil
}

// handshake makes a TLS handshake with the webhook of config as the API server would, and
// says why it failed: the Service not found, refused or unanswered connections while
// kube-proxy does not route it yet, or a certificate that its CA bundle does not verify yet.
func handshake(ctx context.Context, c client.Client, config admissionregistrationv1.WebhookClientConfig) error {
	ref := config.Service
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, svc); err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(config.CABundle) {
		return fmt.Errorf("its CA bundle is not injected yet")
	}
	dialer := &tls.Dialer{
		NetDialer: &net.Dialer{Timeout: 2 * time.Second},
		Config:    &tls.Config{RootCAs: roots, ServerName: ref.Name + "." + ref.Namespace + ".svc", MinVersion: tls.VersionTLS12},
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(ptr.Deref(ref.Port, 443)))))
	if err != nil {
		return err
	}
	return conn.Close()
}

// coreProviderLabel marks the objects of Cluster API's core provider that clusterctl installs.
var coreProviderLabel = client.MatchingLabels{clusterv1.ProviderNameLabel: "cluster-api"}

// resolveExtensions gives Cluster API's core manager a hosts entry for the Service of each
// runtime extension among objs (ExtensionConfigs applied to p). The core manager calls an
// extension at https://<service>.<namespace>.svc:<port>, and the kubelet-run management
// cluster has no cluster DNS: its Pods resolve names with the host's resolver, which knows
// no Service. The entry is the Service's cluster IP, which kube-proxy routes to the
// extension's Pod as cluster DNS would have it; the core manager's Deployment rolls out
// once with it.
func resolveExtensions(ctx context.Context, p *plane.Plane, objs []unstructured.Unstructured) error {
	c, err := p.Client(client.Options{})
	if err != nil {
		return err
	}
	var aliases []corev1.HostAlias
	for _, obj := range objs {
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "clientConfig", "service", "name")
		namespace, _, _ := unstructured.NestedString(obj.Object, "spec", "clientConfig", "service", "namespace")
		if obj.GetKind() != "ExtensionConfig" || name == "" {
			continue
		}
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, svc); err != nil {
			return fmt.Errorf("the Service of ExtensionConfig %s: %w", obj.GetName(), err)
		}
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return fmt.Errorf("service %s/%s of ExtensionConfig %s has no cluster IP", namespace, name, obj.GetName())
		}
		aliases = append(aliases, corev1.HostAlias{IP: svc.Spec.ClusterIP, Hostnames: []string{name + "." + namespace + ".svc"}})
	}
	if len(aliases) == 0 {
		return nil
	}
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments, coreProviderLabel); err != nil {
		return err
	}
	if len(deployments.Items) != 1 {
		return fmt.Errorf("found %d Deployments of Cluster API's core provider (label %s=cluster-api), want 1", len(deployments.Items), clusterv1.ProviderNameLabel)
	}
	d := &deployments.Items[0]
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Spec.HostAliases = aliases
	if err := c.Patch(ctx, d, patch); err != nil {
		return err
	}
	p.Logf("Cluster API's core manager reaches the in-place update hooks at %s (a hosts entry: this cluster has no cluster DNS)\n", aliases[0].Hostnames[0])
	return waitForRollout(ctx, c, client.ObjectKeyFromObject(d), 3*time.Minute)
}

// waitForRollout waits until the Deployment key runs only Pods of its current template,
// every one available.
func waitForRollout(ctx context.Context, c client.Client, key client.ObjectKey, timeout time.Duration) error {
	d := &appsv1.Deployment{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, d); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.AvailableReplicas == want && d.Status.Replicas == want, nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s did not roll out within %s (%d of %d Pods updated, %d available): %w",
			key, timeout, d.Status.UpdatedReplicas, ptr.Deref(d.Spec.Replicas, 1), d.Status.AvailableReplicas, err)
	}
	return nil
}
