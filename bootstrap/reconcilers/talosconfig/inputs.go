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

package talosconfig

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// machineInput is what is particular to the owner's config.
func machineInput(config *bootstrapv1.TalosConfig, owner *configOwner) configgen.Machine {
	m := configgen.Machine{Spec: config.Spec, Mode: configgen.ModeFor(owner.infrastructureRef.Kind)}
	// A MachinePool's config is shared by all its nodes: they cannot share a hostname.
	if owner.perMachine {
		m.Hostname = configgen.Hostname(config.Spec.Hostname.Source, owner.name, owner.infrastructureRef.Name)
	}
	return m
}

// errKeyUnavailable says why the static disk encryption key cannot be read; its message
// names the Secret and key, never their value.
type errKeyUnavailable struct{ message string }

func (e errKeyUnavailable) Error() string { return e.message }

// staticKey reads the passphrase config.spec.diskEncryption.staticKeySecretRef names, or ""
// when it names none. A missing Secret or key is an errKeyUnavailable: the Secret's creation
// or update reconciles the config again (secretToKeyWaitingTalosConfigs).
func (r *Reconciler) staticKey(ctx context.Context, config *bootstrapv1.TalosConfig) (string, error) {
	ref := config.Spec.DiskEncryption.StaticKeySecretRef
	if ref.Name == "" {
		return "", nil
	}
	key := ref.DataKey()
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: config.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", errKeyUnavailable{fmt.Sprintf("Waiting for Secret %s, whose data key %q holds the disk encryption passphrase "+
				"(spec.diskEncryption.staticKeySecretRef): create it in namespace %s", ref.Name, key, config.Namespace)}
		}
		return "", fmt.Errorf("failed to read the disk encryption key's Secret %s: %w", ref.Name, err)
	}
	if len(secret.Data[key]) == 0 {
		return "", errKeyUnavailable{fmt.Sprintf("Secret %s has no data key %q with the disk encryption passphrase "+
			"(spec.diskEncryption.staticKeySecretRef): add it", ref.Name, key)}
	}
	return string(secret.Data[key]), nil
}
