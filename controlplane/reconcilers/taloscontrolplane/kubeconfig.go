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

package taloscontrolplane

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
)

// kubeconfigRenewal is how long before its client certificate expires (a year after it is
// issued) the kubeconfig Secret is issued again.
const kubeconfigRenewal = 120 * 24 * time.Hour

// reconcileKubeconfig keeps the <cluster>-kubeconfig Secret of the contract: an admin
// kubeconfig for the control-plane endpoint, signed by the <cluster>-ca Secret, issued
// again well before its client certificate expires.
func (r *Reconciler) reconcileKubeconfig(ctx context.Context, s *scope) error {
	key := client.ObjectKey{Namespace: s.cluster.Namespace, Name: secret.Name(s.cluster.Name, secret.Kubeconfig)}
	existing := &corev1.Secret{}
	err := r.Client.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		if s.bundle == nil {
			// The <cluster>-ca Secret comes with the bundle.
			return nil
		}
		owner := *metav1.NewControllerRef(s.tcp, controlplanev1.GroupVersion.WithKind("TalosControlPlane"))
		if err := kubeconfig.CreateSecretWithOwner(ctx, r.Client, client.ObjectKeyFromObject(s.cluster), s.cluster.Spec.ControlPlaneEndpoint.String(), owner); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return fmt.Errorf("failed to create the kubeconfig Secret: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Wrote the kubeconfig Secret", "Secret", key.Name)
		return nil
	case err != nil:
		return err
	}
	rotate, err := kubeconfig.NeedsClientCertRotation(existing, kubeconfigRenewal)
	if err != nil || !rotate {
		return err
	}
	if err := kubeconfig.RegenerateSecret(ctx, r.Client, existing); err != nil {
		return fmt.Errorf("failed to renew the kubeconfig Secret: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Renewed the kubeconfig Secret's client certificate", "Secret", key.Name)
	return nil
}
