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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// machineToTalosConfig maps a Machine to the TalosConfig it boots from.
func machineToTalosConfig(_ context.Context, o client.Object) []ctrl.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok {
		return nil
	}
	return configRefRequest(m.Namespace, m.Spec.Bootstrap.ConfigRef)
}

// machinePoolToTalosConfig maps a MachinePool to the TalosConfig its nodes boot from.
func machinePoolToTalosConfig(_ context.Context, o client.Object) []ctrl.Request {
	mp, ok := o.(*clusterv1.MachinePool)
	if !ok {
		return nil
	}
	return configRefRequest(mp.Namespace, mp.Spec.Template.Spec.Bootstrap.ConfigRef)
}

func configRefRequest(namespace string, ref clusterv1.ContractVersionedObjectReference) []ctrl.Request {
	if ref.APIGroup != bootstrapv1.GroupVersion.Group || ref.Kind != "TalosConfig" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: namespace, Name: ref.Name}}}
}

// clusterToPendingTalosConfigs maps a Cluster to its TalosConfigs that have no data Secret
// yet: a Cluster change (infrastructure provisioned, an endpoint, a fixed network, unpausing)
// may be what they wait for.
func (r *Reconciler) clusterToPendingTalosConfigs(ctx context.Context, o client.Object) []ctrl.Request {
	configs := &bootstrapv1.TalosConfigList{}
	if err := r.Client.List(ctx, configs, client.InNamespace(o.GetNamespace()),
		client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list TalosConfigs of Cluster", "Cluster", o.GetName())
		return nil
	}
	var requests []ctrl.Request
	for i := range configs.Items {
		if !ptr.Deref(configs.Items[i].Status.Initialization.DataSecretCreated, false) {
			requests = append(requests, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&configs.Items[i])})
		}
	}
	return requests
}

// staticKeySecretIndex indexes TalosConfigs by the Secret their disk encryption's static key
// is read from.
const staticKeySecretIndex = "spec.diskEncryption.staticKeySecretRef.name" //nolint:gosec // a field index's name

func indexStaticKeySecret(o client.Object) []string {
	config, ok := o.(*bootstrapv1.TalosConfig)
	if !ok || config.Spec.DiskEncryption.StaticKeySecretRef.Name == "" {
		return nil
	}
	return []string{config.Spec.DiskEncryption.StaticKeySecretRef.Name}
}

// secretToKeyWaitingTalosConfigs maps a Secret to the TalosConfigs that read their disk
// encryption key from it: its creation may be what they wait for, to render a first config
// or, for a node updated in place, the next one.
func (r *Reconciler) secretToKeyWaitingTalosConfigs(ctx context.Context, o client.Object) []ctrl.Request {
	configs := &bootstrapv1.TalosConfigList{}
	if err := r.Client.List(ctx, configs, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{staticKeySecretIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the TalosConfigs reading a disk encryption key from Secret", "Secret", o.GetName())
		return nil
	}
	requests := make([]ctrl.Request, 0, len(configs.Items))
	for i := range configs.Items {
		requests = append(requests, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&configs.Items[i])})
	}
	return requests
}

// secretMetadata is the object the key Secrets' watch caches: a Secret's metadata.
func secretMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
}

// secretMetadataCache caches the metadata of every Secret the manager may see (in namespace,
// or all), as Cluster API's manager does for its ClusterResourceSets: the manager's own cache
// holds only Secrets labelled with a cluster (Cluster API's cache options), and a disk
// encryption key's Secret need not be.
func secretMetadataCache(mgr ctrl.Manager, namespace string) (ctrlcache.Cache, error) {
	opts := ctrlcache.Options{
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		HTTPClient:       mgr.GetHTTPClient(),
		DefaultTransform: ctrlcache.TransformStripManagedFields(),
	}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]ctrlcache.Config{namespace: {}}
	}
	secrets, err := ctrlcache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("failed to create the Secret metadata cache: %w", err)
	}
	if err := mgr.Add(secrets); err != nil {
		return nil, fmt.Errorf("failed to start the Secret metadata cache: %w", err)
	}
	return secrets, nil
}
