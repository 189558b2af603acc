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

package etcdbackup

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
)

// The reasons of the errors OpenStorage returns.
const (
	// SecretNotFoundReason: the credentials or encryption key Secret is missing or lacks a key.
	SecretNotFoundReason = "SecretNotFound"
	// InvalidStorageReason: the storage spec cannot be used as it is.
	InvalidStorageReason = "InvalidStorage"
)

// OpenStorage opens the bucket of a backup's storage, in namespace, with the credentials of
// its Secret, and reads its encryption key (zero without encryption): the key Secret's
// "identity" (an age X25519 identity) or else its "passphrase". A missing Secret or key is
// an *Error with SecretNotFoundReason (not permanent: someone may create it).
func OpenStorage(ctx context.Context, c client.Reader, namespace string, storage controlplanev1.EtcdBackupStorage) (*Store, Key, error) {
	creds, err := secretKeys(ctx, c, namespace, storage.S3.CredentialsSecretName, "accessKeyID", "secretAccessKey")
	if err != nil {
		return nil, Key{}, err
	}
	var enc Key
	if storage.Encryption != nil {
		values, err := secretKeys(ctx, c, namespace, storage.Encryption.KeySecretName)
		if err != nil {
			return nil, Key{}, err
		}
		enc = Key{Identity: values["identity"], Passphrase: values["passphrase"]}
		if enc.IsZero() {
			return nil, Key{}, &Error{Reason: SecretNotFoundReason, Message: fmt.Sprintf(
				"Secret %s/%s has neither an \"identity\" (an age X25519 identity, from age-keygen) nor a \"passphrase\"", namespace, storage.Encryption.KeySecretName)}
		}
	}
	store, err := Open(Location{
		Endpoint: storage.S3.Endpoint, Bucket: storage.S3.Bucket, Region: storage.S3.Region,
		AccessKeyID: creds["accessKeyID"], SecretAccessKey: creds["secretAccessKey"], SessionToken: creds["sessionToken"],
		CABundle: storage.S3.CABundle, InsecureSkipTLSVerify: storage.S3.InsecureSkipTLSVerify,
	})
	if err != nil {
		return nil, Key{}, &Error{Reason: InvalidStorageReason, Permanent: true, Err: err, Message: err.Error()}
	}
	return store, enc, nil
}

// secretKeys reads a Secret's keys; each of required must be there.
func secretKeys(ctx context.Context, c client.Reader, namespace, name string, required ...string) (map[string]string, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &Error{Reason: SecretNotFoundReason, Err: err, Message: fmt.Sprintf(
				"Secret %s/%s does not exist: create it with the keys %s", namespace, name, strings.Join(required, ", "))}
		}
		return nil, err
	}
	values := map[string]string{}
	for k, v := range secret.Data {
		values[k] = string(v)
	}
	for _, k := range required {
		if values[k] == "" {
			return nil, &Error{Reason: SecretNotFoundReason, Message: fmt.Sprintf("Secret %s/%s has no key %q", namespace, name, k)}
		}
	}
	return values, nil
}
