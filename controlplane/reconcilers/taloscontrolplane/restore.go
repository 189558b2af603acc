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
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/etcdbackup"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
)

// refusedRetry is how long a restore that the backup refused (missing, wrong key, a
// checksum that does not match) waits before it tries again: long enough that a broken
// object is not downloaded over and over, short enough to pick up a fixed Secret.
const refusedRetry = time.Minute

// restoreRetry is how long a restore that failed for a passing reason (the node not ready
// for the upload, the store unreachable) waits before it downloads the snapshot again.
const restoreRetry = 15 * time.Second

// restoreRefusal is a restore that cannot succeed until someone changes something.
type restoreRefusal struct{ message string }

func (e *restoreRefusal) Error() string { return e.message }

// bootstrapFromBackup bootstraps etcd on node from the backup spec.restoreFrom names: the
// snapshot is streamed from the store to the node's EtcdRecover, checked on the way against
// the SHA-256 the backup recorded, and only a snapshot that matched is bootstrapped from.
func (r *Reconciler) bootstrapFromBackup(ctx context.Context, s *scope, node talosclient.Client) error {
	name := s.tcp.Spec.RestoreFrom.BackupName
	backup := &controlplanev1.TalosEtcdBackup{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.tcp.Namespace, Name: name}, backup); err != nil {
		if apierrors.IsNotFound(err) {
			return &restoreRefusal{fmt.Sprintf("TalosEtcdBackup %s (spec.restoreFrom) does not exist in namespace %s", name, s.tcp.Namespace)}
		}
		return err
	}
	if backup.Status.Phase != controlplanev1.EtcdBackupSucceeded || backup.Status.SHA256 == "" {
		return &restoreRefusal{fmt.Sprintf("TalosEtcdBackup %s (spec.restoreFrom) has not succeeded (phase %q): only a complete backup is restored", name, backup.Status.Phase)}
	}
	store, key, err := etcdbackup.OpenStorage(ctx, r.Client, s.tcp.Namespace, backup.Spec.Storage)
	if err != nil {
		return refusal(name, err)
	}
	if backup.Status.Encrypted && key.IsZero() {
		return &restoreRefusal{fmt.Sprintf("TalosEtcdBackup %s is encrypted but its storage names no key: set storage.encryption.keySecretName", name)}
	}
	snapshot, err := store.Get(ctx, backup.Status.Key, key, backup.Status.SHA256)
	if err != nil {
		return refusal(name, err)
	}
	defer func() { _ = snapshot.Close() }()
	if err := node.EtcdRecover(ctx, snapshot); err != nil {
		return refusal(name, err)
	}
	if err := node.BootstrapRecover(ctx, false); err != nil {
		if errors.Is(err, talosclient.ErrRecoveryFailed) {
			return &restoreRefusal{fmt.Sprintf("etcd could not start from the snapshot of TalosEtcdBackup %s: %v", name, err)}
		}
		return err
	}
	return nil
}

// refusal is err of reading backup name's snapshot, a *restoreRefusal when retrying now
// cannot help.
func refusal(name string, err error) error {
	var storeErr *etcdbackup.Error
	switch {
	case errors.Is(err, etcdbackup.ErrChecksum):
		return &restoreRefusal{fmt.Sprintf("the snapshot of TalosEtcdBackup %s is not the one that was backed up (%v): it was not restored; "+
			"restore another backup", name, err)}
	case errors.Is(err, etcdbackup.ErrDecrypt):
		return &restoreRefusal{fmt.Sprintf("the snapshot of TalosEtcdBackup %s cannot be decrypted with the key in its storage's key Secret: "+
			"put the identity or passphrase it was encrypted with there", name)}
	case errors.As(err, &storeErr) && storeErr.Permanent:
		return &restoreRefusal{fmt.Sprintf("TalosEtcdBackup %s cannot be read: %s", name, storeErr.Message)}
	case errors.As(err, &storeErr):
		return fmt.Errorf("TalosEtcdBackup %s cannot be read: %s", name, storeErr.Message)
	}
	return fmt.Errorf("restoring TalosEtcdBackup %s: %w", name, err)
}
