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

package envtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	bootstrapv1alpha3 "github.com/talon-capi/talon/api/bootstrap/v1alpha3"
	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1alpha3 "github.com/talon-capi/talon/api/controlplane/v1alpha3"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
)

// Environment is a running management plane: etcd and kube-apiserver with Cluster API's and
// Talon's CRDs, and clusterctl's provider inventory, installed.
type Environment struct {
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// Client is an uncached client with Scheme.
	Client client.Client
	// Scheme knows Kubernetes', Cluster API's and Talon's types.
	Scheme *runtime.Scheme

	env *envtest.Environment
}

// NewScheme returns a scheme with every type Talon's tests use.
func NewScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(clusterv1.AddToScheme(scheme))
	utilruntime.Must(addonsv1.AddToScheme(scheme))
	utilruntime.Must(runtimev1.AddToScheme(scheme))
	utilruntime.Must(bootstrapv1.AddToScheme(scheme))
	utilruntime.Must(controlplanev1.AddToScheme(scheme))
	// Sidero's versions of the same kinds, which Talon's webhooks convert.
	utilruntime.Must(bootstrapv1alpha3.AddToScheme(scheme))
	utilruntime.Must(controlplanev1alpha3.AddToScheme(scheme))
	utilruntime.Must(infrav1.AddToScheme(scheme))
	utilruntime.Must(vitiv1.AddToScheme(scheme))
	return scheme
}

// Start starts etcd and kube-apiserver from BinDir and installs the CRDs. An error wrapping
// errMissingBinaries means this machine cannot run the plane.
func Start() (*Environment, error) {
	for _, name := range []string{"etcd", "kube-apiserver", "kustomize"} {
		if _, err := Binary(name); err != nil {
			return nil, err
		}
	}
	capiCRDs, err := CAPICRDDir()
	if err != nil {
		return nil, err
	}
	clusterctlCRDs, err := ClusterctlCRDDir()
	if err != nil {
		return nil, err
	}
	talonCRDs, err := TalonCRDs()
	if err != nil {
		return nil, err
	}
	validating, mutating, err := webhookConfigurations()
	if err != nil {
		return nil, err
	}
	scheme := NewScheme()
	env := &envtest.Environment{
		Scheme:                scheme,
		BinaryAssetsDirectory: BinDir(),
		ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths:     []string{capiCRDs, clusterctlCRDs},
		CRDs:                  talonCRDs,
		CRDInstallOptions:     envtest.CRDInstallOptions{Scheme: scheme},
		WebhookInstallOptions: envtest.WebhookInstallOptions{ValidatingWebhooks: validating, MutatingWebhooks: mutating},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("failed to start kube-apiserver and etcd from %s: %w", BinDir(), err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("failed to create client: %w", err), env.Stop())
	}
	return &Environment{Config: cfg, Client: c, Scheme: scheme, env: env}, nil
}

// Stop stops kube-apiserver and etcd and removes their data.
func (e *Environment) Stop() error {
	return e.env.Stop()
}

// LabelCRDsAsClusterctl labels every CRD as clusterctl init labels the CRDs it installs
// (clusterctl.cluster.x-k8s.io), for clusterctl commands that find the kinds they act on by
// that label, such as clusterctl move.
func (e *Environment) LabelCRDsAsClusterctl(ctx context.Context) error {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := e.Client.List(ctx, crds); err != nil {
		return fmt.Errorf("failed to list the CRDs: %w", err)
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		patch := client.MergeFrom(crd.DeepCopy())
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
		if err := e.Client.Patch(ctx, crd, patch); err != nil {
			return fmt.Errorf("failed to label CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}

// AdminKubeconfig returns a kubeconfig for a new cluster administrator, for programs that
// the tests run as separate processes.
func (e *Environment) AdminKubeconfig(name string) ([]byte, error) {
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to add user %s: %w", name, err)
	}
	return user.KubeConfig()
}

// WebhookServing returns where a manager in the test process must serve webhooks so that
// the API server calls it: host, port and certificate directory.
func (e *Environment) WebhookServing() (host string, port int, certDir string) {
	o := e.env.WebhookInstallOptions
	return o.LocalServingHost, o.LocalServingPort, o.LocalServingCertDir
}

// WebhookCA is the PEM CA that signed the certificate in WebhookServing's directory, for
// clients of servers that serve with it (an ExtensionConfig's caBundle).
func (e *Environment) WebhookCA() []byte {
	return e.env.WebhookInstallOptions.LocalServingCAData
}

// NewNamespace creates a namespace for one test and deletes it when the test ends.
func (e *Environment) NewNamespace(tb testing.TB, prefix string) string {
	tb.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		tb.Fatalf("Failed to create namespace: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Client.Delete(ctx, ns); err != nil {
			tb.Logf("Failed to delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}
