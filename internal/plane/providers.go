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
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
)

// ClusterctlBinary is clusterctl in the plane's bin directory.
const ClusterctlBinary = "clusterctl"

// certManagerAPILabel marks the CustomResourceDefinitions of cert-manager's API the plane
// installs (see certmanager-api.yaml).
const certManagerAPILabel, certManagerAPIValue = "talon.dev/local-plane", "cert-manager-api"

// RunsLocallyAnnotation marks a provider Deployment the plane scaled to zero because its
// manager runs as a local process; the value names the process.
const RunsLocallyAnnotation = "talon.dev/runs-locally"

//go:embed certmanager-api.yaml
var certManagerAPITemplate string

// certManagerKinds are the kinds of cert-manager's API the plane installs.
var certManagerKinds = []struct{ Kind, Plural, Singular, Scope string }{
	{"Certificate", "certificates", "certificate", "Namespaced"},
	{"CertificateRequest", "certificaterequests", "certificaterequest", "Namespaced"},
	{"Issuer", "issuers", "issuer", "Namespaced"},
	{"ClusterIssuer", "clusterissuers", "clusterissuer", "Cluster"},
}

// Manager is a provider's manager that the plane runs as a local process.
type Manager struct {
	// Name identifies the process, e.g. "cluster-api" or "talon-bootstrap".
	Name string `json:"name"`
	// Provider is the cluster.x-k8s.io/provider label of the provider's objects, as
	// clusterctl installed them (e.g. "cluster-api", "bootstrap-talon").
	Provider string `json:"provider"`
	// Path is the manager binary.
	Path string `json:"path"`
	// Args are the manager's own arguments; the plane adds the webhook, health and
	// diagnostics addresses.
	Args []string `json:"args,omitempty"`
	// Extension says the manager serves a Cluster API runtime extension
	// (--runtime-extension-port), which its provider's ExtensionConfigs register.
	Extension bool `json:"extension,omitempty"`
	// WebhookPort, HealthPort and DiagnosticsPort are the loopback ports the plane chose,
	// and ExtensionPort that of the runtime extension.
	WebhookPort     int `json:"webhookPort,omitempty"`
	HealthPort      int `json:"healthPort,omitempty"`
	DiagnosticsPort int `json:"diagnosticsPort,omitempty"`
	ExtensionPort   int `json:"extensionPort,omitempty"`
}

// Managers are the managers the plane runs.
func (p *Plane) Managers() []Manager { return append([]Manager(nil), p.state.Managers...) }

// planeScheme holds the types the plane reads and writes.
var planeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, admissionregistrationv1.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// typedClient is a client of the plane with the plane's scheme.
func (p *Plane) typedClient() (client.Client, error) {
	return p.Client(client.Options{Scheme: planeScheme})
}

// InstallCertManagerAPI installs cert-manager's CustomResourceDefinitions (see the package
// documentation) and waits until they are served.
func (p *Plane) InstallCertManagerAPI(ctx context.Context) error {
	p.logf("Installing cert-manager's API (the plane issues the webhook certificates itself)\n")
	var manifest bytes.Buffer
	if err := template.Must(template.New("cert-manager").Parse(certManagerAPITemplate)).Execute(&manifest, certManagerKinds); err != nil {
		return err
	}
	objs, err := utilyaml.ToUnstructured(manifest.Bytes())
	if err != nil {
		return err
	}
	c, err := p.typedClient()
	if err != nil {
		return err
	}
	for i := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&objs[i]), client.FieldOwner("talon-plane"), client.ForceOwnership); err != nil {
			return fmt.Errorf("failed to install %s: %w", objs[i].GetName(), err)
		}
	}
	return waitUntil(ctx, 30*time.Second, "cert-manager's API to be served", func(ctx context.Context) error {
		for _, kind := range certManagerKinds {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: kind.Plural + ".cert-manager.io"}, crd); err != nil {
				return err
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				established = established || cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
			}
			if !established {
				return fmt.Errorf("%s is not established", crd.Name)
			}
		}
		return nil
	})
}

// UninstallCertManagerAPI removes the CustomResourceDefinitions InstallCertManagerAPI
// installed, with every object of their kinds.
func (p *Plane) UninstallCertManagerAPI(ctx context.Context) error {
	c, err := p.typedClient()
	if err != nil {
		return err
	}
	return c.DeleteAllOf(ctx, &apiextensionsv1.CustomResourceDefinition{}, client.MatchingLabels{certManagerAPILabel: certManagerAPIValue})
}

// RemoveClusterctlInventory removes the CustomResourceDefinition of clusterctl's provider
// inventory (providers.clusterctl.cluster.x-k8s.io), which clusterctl init creates and
// clusterctl delete leaves; call it once every provider is deleted.
func (p *Plane) RemoveClusterctlInventory(ctx context.Context) error {
	c, err := p.typedClient()
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "providers.clusterctl.cluster.x-k8s.io"
	return client.IgnoreNotFound(c.Delete(ctx, crd))
}

// Clusterctl runs the plane's clusterctl against the plane with extra environment
// variables env and returns its standard output (see RunClusterctl).
func (p *Plane) Clusterctl(ctx context.Context, env []string, args ...string) ([]byte, error) {
	return RunClusterctl(ctx, p.state.BinDir, p.Kubeconfig(), env, p.log, args...)
}

// RunClusterctl runs binDir/clusterctl with args against the cluster of kubeconfig (none if
// empty, for commands that take no cluster) and the extra environment variables env, and returns its standard output; its standard error (the
// progress it reports) goes to log.
func RunClusterctl(ctx context.Context, binDir, kubeconfig string, env []string, log io.Writer, args ...string) ([]byte, error) {
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, ClusterctlBinary), args...)
	cmd.Env = append(append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("clusterctl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if log != nil {
		_, _ = log.Write(stderr.Bytes())
	}
	return out, nil
}

// StartManager runs m as a local process and points the webhooks of its provider at it
// (again, after its earlier process exited or was killed):
// the provider's webhook configurations and conversion webhooks call
// https://127.0.0.1:<port> with the plane's CA, and its Deployments are scaled to zero.
// It returns once the manager reports ready.
func (p *Plane) StartManager(ctx context.Context, m Manager) error {
	var err error
	ports := []*int{&m.WebhookPort, &m.HealthPort, &m.DiagnosticsPort}
	if m.Extension {
		ports = append(ports, &m.ExtensionPort)
	}
	for _, port := range ports {
		if *port, err = freePort(ctx); err != nil {
			return err
		}
	}
	c, err := p.typedClient()
	if err != nil {
		return err
	}
	if err := p.routeWebhooks(ctx, c, m); err != nil {
		return fmt.Errorf("failed to point %s's webhooks at its local manager: %w", m.Provider, err)
	}
	p.logf("Starting %s (webhooks on 127.0.0.1:%d)\n", m.Name, m.WebhookPort)
	args := append(append([]string(nil), m.Args...),
		"--webhook-port="+strconv.Itoa(m.WebhookPort), "--webhook-cert-dir="+p.WebhookCertDir(),
		"--health-addr=127.0.0.1:"+strconv.Itoa(m.HealthPort),
		"--diagnostics-address=127.0.0.1:"+strconv.Itoa(m.DiagnosticsPort), "--insecure-diagnostics")
	if m.Extension {
		args = append(args, "--runtime-extension-port="+strconv.Itoa(m.ExtensionPort))
	}
	proc, err := p.run(m.Name, m.Path, args, []string{"KUBECONFIG=" + p.Kubeconfig()})
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(p.state.Managers, func(o Manager) bool { return o.Name == m.Name }); i >= 0 {
		p.state.Managers[i] = m
	} else {
		p.state.Managers = append(p.state.Managers, m)
	}
	if err := p.save(); err != nil {
		return err
	}
	readyz := "http://127.0.0.1:" + strconv.Itoa(m.HealthPort) + "/readyz"
	return waitFor(ctx, proc, 2*time.Minute, "ready", func(ctx context.Context) error {
		return answersOK(ctx, readyz)
	})
}

// routeWebhooks does for m's provider what cert-manager and the cluster's Service network
// would: its webhooks reach the local manager at 127.0.0.1 and trust the plane's CA.
func (p *Plane) routeWebhooks(ctx context.Context, c client.Client, m Manager) error {
	ca, err := p.CA()
	if err != nil {
		return err
	}
	selector := client.MatchingLabels{clusterv1.ProviderNameLabel: m.Provider}
	// localURL is the manager's address for the webhook's path: the Service reference's, or
	// that of a URL an earlier start of the manager set.
	localURL := func(servicePath, url *string) *string {
		path := ptr.Deref(servicePath, "")
		if u, err := neturl.Parse(ptr.Deref(url, "")); servicePath == nil && err == nil {
			path = u.Path
		}
		return ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", m.WebhookPort, path))
	}
	local := func(cc *admissionregistrationv1.WebhookClientConfig) {
		var servicePath *string
		if cc.Service != nil {
			servicePath = cc.Service.Path
		}
		cc.Service, cc.URL, cc.CABundle = nil, localURL(servicePath, cc.URL), ca
	}

	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.List(ctx, validating, selector); err != nil {
		return err
	}
	// Each change is a merge patch, not an update: other actors write these objects meanwhile
	// (the API server a CRD's status, kube-controller-manager a Deployment's, Cluster API's
	// core manager an ExtensionConfig's CA), and an update would fail on their new version.
	for i := range validating.Items {
		before := validating.Items[i].DeepCopy()
		for j := range validating.Items[i].Webhooks {
			local(&validating.Items[i].Webhooks[j].ClientConfig)
		}
		if err := c.Patch(ctx, &validating.Items[i], client.MergeFrom(before)); err != nil {
			return err
		}
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := c.List(ctx, mutating, selector); err != nil {
		return err
	}
	for i := range mutating.Items {
		before := mutating.Items[i].DeepCopy()
		for j := range mutating.Items[i].Webhooks {
			local(&mutating.Items[i].Webhooks[j].ClientConfig)
		}
		if err := c.Patch(ctx, &mutating.Items[i], client.MergeFrom(before)); err != nil {
			return err
		}
	}

	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, selector); err != nil {
		return err
	}
	for i := range crds.Items {
		conversion := crds.Items[i].Spec.Conversion
		if conversion == nil || conversion.Strategy != apiextensionsv1.WebhookConverter || conversion.Webhook == nil || conversion.Webhook.ClientConfig == nil {
			continue
		}
		before := crds.Items[i].DeepCopy()
		cc := conversion.Webhook.ClientConfig
		var servicePath *string
		if cc.Service != nil {
			servicePath = cc.Service.Path
		}
		cc.Service, cc.URL, cc.CABundle = nil, localURL(servicePath, cc.URL), ca
		if err := c.Patch(ctx, &crds.Items[i], client.MergeFrom(before)); err != nil {
			return err
		}
	}

	if m.Extension {
		if err := p.routeExtensions(ctx, c, m, selector); err != nil {
			return err
		}
	}

	deployments := &appsv1.DeploymentList{}
	if err := c.List(ctx, deployments, selector); err != nil {
		return err
	}
	for i := range deployments.Items {
		d := &deployments.Items[i]
		before := d.DeepCopy()
		d.Spec.Replicas = ptr.To[int32](0)
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[RunsLocallyAnnotation] = fmt.Sprintf("%s, webhooks on 127.0.0.1:%d", m.Name, m.WebhookPort)
		if err := c.Patch(ctx, d, client.MergeFrom(before)); err != nil {
			return err
		}
	}
	return nil
}

// routeExtensions points the ExtensionConfigs of m's provider at the manager's runtime
// extension, and writes the serving certificate's Secret their CA is injected from, as
// cert-manager would: Cluster API's core manager copies its ca.crt into the ExtensionConfig.
func (p *Plane) routeExtensions(ctx context.Context, c client.Client, m Manager, selector client.MatchingLabels) error {
	configs := &unstructured.UnstructuredList{}
	configs.SetGroupVersionKind(schema.GroupVersionKind{Group: "runtime.cluster.x-k8s.io", Version: "v1beta2", Kind: "ExtensionConfigList"})
	if err := c.List(ctx, configs, selector); err != nil {
		return err
	}
	for i := range configs.Items {
		config := &configs.Items[i]
		if from := config.GetAnnotations()[injectCAFromSecret]; from != "" {
			if err := p.writeServingSecret(ctx, c, from); err != nil {
				return err
			}
		}
		url := fmt.Sprintf("https://127.0.0.1:%d", m.ExtensionPort)
		if current, _, _ := unstructured.NestedString(config.Object, "spec", "clientConfig", "url"); current == url {
			continue
		}
		before := config.DeepCopy()
		unstructured.RemoveNestedField(config.Object, "spec", "clientConfig", "service")
		if err := unstructured.SetNestedField(config.Object, url, "spec", "clientConfig", "url"); err != nil {
			return err
		}
		if err := c.Patch(ctx, config, client.MergeFrom(before)); apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			// Cluster API's webhook refuses ExtensionConfigs while its RuntimeSDK gate is off:
			// the manager runs, and Cluster API calls no hooks.
			p.logf("ExtensionConfig %s not pointed at %s: %v\n", config.GetName(), m.Name, err)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// injectCAFromSecret is Cluster API's annotation naming the Secret (namespace/name) whose
// ca.crt an ExtensionConfig trusts.
const injectCAFromSecret = "runtime.cluster.x-k8s.io/inject-ca-from-secret"

// writeServingSecret writes the Secret at key (namespace/name) with the plane's webhook
// serving certificate and CA, as cert-manager writes a Certificate's Secret.
func (p *Plane) writeServingSecret(ctx context.Context, c client.Client, key string) error {
	namespace, name, ok := strings.Cut(key, "/")
	if !ok {
		return fmt.Errorf("%s %q is not namespace/name", injectCAFromSecret, key)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{}}
	for file, key := range map[string]string{p.pki("ca.crt"): "ca.crt", filepath.Join(p.WebhookCertDir(), "tls.crt"): corev1.TLSCertKey,
		filepath.Join(p.WebhookCertDir(), "tls.key"): corev1.TLSPrivateKeyKey} {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		secret.Data[key] = data
	}
	if err := c.Create(ctx, secret); apierrors.IsAlreadyExists(err) {
		return c.Update(ctx, secret)
	} else if err != nil {
		return err
	}
	return nil
}

// waitUntil polls check every 200ms until it returns nil or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
