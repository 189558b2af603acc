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
	"fmt"
	"slices"
	"time"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// TalosconfigExpiresAnnotation records on the talosconfig Secret when its client
// certificate expires, in RFC 3339.
const TalosconfigExpiresAnnotation = "talon.dev/talosconfig-expires"

// EnsureTalosconfig keeps the <cluster>-talosconfig Secret current: it issues a talosconfig
// with an os:admin certificate valid for ttl when there is none or when less than a third of
// the certificate's lifetime remains, and rewrites only the endpoints when they change. It
// returns how long until the certificate is due for renewal.
func EnsureTalosconfig(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, bundle *secrets.Bundle,
	endpoints []string, now time.Time, ttl time.Duration) (time.Duration, error) {
	renewBefore := ttl / 3
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: TalosconfigSecretName(cluster.Name)}, s)
	if apierrors.IsNotFound(err) {
		tc, err := configgen.NewTalosconfig(bundle, cluster.Name, endpoints, now, ttl)
		if err != nil {
			return 0, err
		}
		s = newSecret(cluster, TalosconfigSecretName(cluster.Name), clusterv1.ClusterSecretType, map[string][]byte{TalosconfigKey: tc.Data})
		s.Annotations = map[string]string{TalosconfigExpiresAnnotation: tc.Expires.UTC().Format(time.RFC3339)}
		if err := c.Create(ctx, s); err != nil {
			return 0, fmt.Errorf("failed to create Secret %s: %w", s.Name, err)
		}
		return tc.Expires.Sub(now) - renewBefore, nil
	}
	if err != nil {
		return 0, fmt.Errorf("failed to get Secret %s: %w", TalosconfigSecretName(cluster.Name), err)
	}

	expires, err := time.Parse(time.RFC3339, s.Annotations[TalosconfigExpiresAnnotation])
	if err != nil || expires.Sub(now) < renewBefore {
		tc, err := configgen.NewTalosconfig(bundle, cluster.Name, endpoints, now, ttl)
		if err != nil {
			return 0, err
		}
		return tc.Expires.Sub(now) - renewBefore, updateTalosconfig(ctx, c, s, tc.Data, tc.Expires)
	}

	cfg, err := clientconfig.FromBytes(s.Data[TalosconfigKey])
	if err != nil || cfg.Contexts[cluster.Name] == nil {
		// Unreadable: issue a fresh one rather than keep a broken file.
		tc, err := configgen.NewTalosconfig(bundle, cluster.Name, endpoints, now, ttl)
		if err != nil {
			return 0, err
		}
		return tc.Expires.Sub(now) - renewBefore, updateTalosconfig(ctx, c, s, tc.Data, tc.Expires)
	}
	if talosContext := cfg.Contexts[cluster.Name]; !slices.Equal(talosContext.Endpoints, endpoints) {
		talosContext.Endpoints = endpoints
		data, err := cfg.Bytes()
		if err != nil {
			return 0, fmt.Errorf("failed to encode talosconfig: %w", err)
		}
		if err := updateTalosconfig(ctx, c, s, data, expires); err != nil {
			return 0, err
		}
	}
	return expires.Sub(now) - renewBefore, nil
}

func updateTalosconfig(ctx context.Context, c client.Client, s *corev1.Secret, data []byte, expires time.Time) error {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[TalosconfigKey] = data
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[TalosconfigExpiresAnnotation] = expires.UTC().Format(time.RFC3339)
	if err := c.Update(ctx, s); err != nil {
		return fmt.Errorf("failed to update Secret %s: %w", s.Name, err)
	}
	return nil
}
