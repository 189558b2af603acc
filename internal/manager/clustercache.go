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

package manager

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
	capisetup "sigs.k8s.io/cluster-api/core/setup"
)

// NewClusterCache sets up Cluster API's ClusterCache in mgr, as Cluster API's own managers
// do: one connection per workload cluster, from its kubeconfig Secret, with Nodes cached
// and Pods, Secrets and ConfigMaps read directly. name is the user agent's controller name.
func NewClusterCache(ctx context.Context, mgr ctrl.Manager, name string, opts *Options) (clustercache.ClusterCache, error) {
	cache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient:     mgr.GetClient(),
		Cache:            capisetup.ClusterCacheCacheOptions(),
		Client:           capisetup.ClusterCacheClientOptions(name, opts.KubeAPIQPS, opts.KubeAPIBurst),
		WatchFilterValue: opts.WatchFilter,
	}, controller.Options{MaxConcurrentReconciles: opts.Concurrency})
	if err != nil {
		return nil, fmt.Errorf("failed to set up the ClusterCache: %w", err)
	}
	return cache, nil
}
