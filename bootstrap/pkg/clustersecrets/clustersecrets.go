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

package clustersecrets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

const (
	// BundleKey is the key of the secrets bundle in the <cluster>-talos Secret.
	BundleKey = "bundle"
	// TalosconfigKey is the key of the talosconfig in the <cluster>-talosconfig Secret.
	TalosconfigKey = "talosconfig"
	// moveLabel marks Secrets that "clusterctl move" carries with their Cluster.
	moveLabel = "clusterctl.cluster.x-k8s.io/move"
)

// BundleSecretName is the Secret holding the secrets bundle of a cluster.
func BundleSecretName(cluster string) string { return cluster + "-talos" }

// CASecretName is the Secret holding the Kubernetes CA of a cluster, as Cluster API names it.
func CASecretName(cluster string) string { return cluster + "-ca" }

// TalosconfigSecretName is the Secret holding the talosconfig of a cluster.
func TalosconfigSecretName(cluster string) string { return cluster + "-talosconfig" }

// ErrBundleMissing means the bundle Secret is gone while the cluster's CA Secret remains.
var ErrBundleMissing = errors.New("secrets bundle missing")

// Get returns the cluster's bundle; a NotFound API error when it does not exist.
func Get(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster) (*secrets.Bundle, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: BundleSecretName(cluster.Name)}, s); err != nil {
		return nil, err
	}
	bundle, err := configgen.UnmarshalBundle(s.Data[BundleKey])
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return bundle, nil
}

// Ensure returns the cluster's bundle, creating it for talosVersion if the cluster has
// none yet, and makes sure the <cluster>-ca Secret exists. c must read Secrets from the API
// server, not from a cache, so that every caller sees a bundle the moment it exists.
func Ensure(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, talosVersion string) (*secrets.Bundle, error) {
	bundle, err := Get(ctx, c, cluster)
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		if bundle, err = create(ctx, c, cluster, talosVersion); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("failed to read the secrets bundle of Cluster %s: %w", cluster.Name, err)
	}
	if err := ensureCA(ctx, c, cluster, bundle); err != nil {
		return nil, err
	}
	return bundle, nil
}

// create makes the bundle, unless the cluster's CA shows that one existed before.
func create(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, talosVersion string) (*secrets.Bundle, error) {
	ca := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: CASecretName(cluster.Name)}, ca)
	if err == nil {
		// Another caller may have created both since this one looked for the bundle.
		if bundle, err := Get(ctx, c, cluster); err == nil {
			return bundle, nil
		}
		return nil, fmt.Errorf("%w: Secret %s is gone but %s still holds the cluster's CA; restore %s from a backup "+
			"(a new bundle would give the cluster a second identity)", ErrBundleMissing,
			BundleSecretName(cluster.Name), CASecretName(cluster.Name), BundleSecretName(cluster.Name))
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("failed to read Secret %s: %w", CASecretName(cluster.Name), err)
	}

	bundle, err := configgen.NewBundle(talosVersion, time.Now())
	if err != nil {
		return nil, err
	}
	data, err := configgen.MarshalBundle(bundle)
	if err != nil {
		return nil, err
	}
	s := newSecret(cluster, BundleSecretName(cluster.Name), corev1.SecretTypeOpaque, map[string][]byte{BundleKey: data})
	if err := c.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Another reconcile created it first: that one is the cluster's bundle.
			return Get(ctx, c, cluster)
		}
		return nil, fmt.Errorf("failed to create the secrets bundle of Cluster %s: %w", cluster.Name, err)
	}
	return bundle, nil
}

// ensureCA writes the bundle's Kubernetes CA where Cluster API's kubeconfig tooling reads it.
func ensureCA(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, bundle *secrets.Bundle) error {
	s := newSecret(cluster, CASecretName(cluster.Name), clusterv1.ClusterSecretType, map[string][]byte{
		corev1.TLSCertKey:       bundle.Certs.K8s.Crt,
		corev1.TLSPrivateKeyKey: bundle.Certs.K8s.Key,
	})
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create Secret %s: %w", s.Name, err)
	}
	return nil
}

// NewSecret returns a Secret of cluster: owned by the Cluster, labelled with its name and
// for "clusterctl move".
func newSecret(cluster *clusterv1.Cluster, name string, secretType corev1.SecretType, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: cluster.Namespace,
			Labels: map[string]string{
				clusterv1.ClusterNameLabel: cluster.Name,
				moveLabel:                  "",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(),
				Kind:       "Cluster",
				Name:       cluster.Name,
				UID:        cluster.UID,
			}},
		},
		Type: secretType,
		Data: data,
	}
}
