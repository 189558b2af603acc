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
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
	clusterreconciler "sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	clusterclassreconciler "sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	clusterresourcesetreconciler "sigs.k8s.io/cluster-api/core/reconcilers/clusterresourceset"
	clusterresourcesetbindingreconciler "sigs.k8s.io/cluster-api/core/reconcilers/clusterresourcesetbinding"
	machinereconciler "sigs.k8s.io/cluster-api/core/reconcilers/machine"
	machinedeploymentreconciler "sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	machinehealthcheckreconciler "sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	machinesetreconciler "sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	topologyclusterreconciler "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	topologymachinedeploymentreconciler "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	topologymachinesetreconciler "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	capisetup "sigs.k8s.io/cluster-api/core/setup"
	capiadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	capifeature "sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/index"

	bootstrapsetup "github.com/talon-capi/talon/bootstrap/setup"
	controlplanesetup "github.com/talon-capi/talon/controlplane/setup"
	infrastructuresetup "github.com/talon-capi/talon/infrastructure/setup"
)

// ManagerOptions say what a test manager runs.
type ManagerOptions struct {
	// CoreReconcilers runs Cluster API's own Cluster, Machine, MachineSet, MachineDeployment,
	// MachineHealthCheck and ClusterResourceSet reconcilers, with a ClusterCache, in the
	// manager.
	CoreReconcilers bool

	// Topology also runs Cluster API's ClusterClass and managed-topology reconcilers (with
	// the ClusterTopology feature gate on), for clusters built from a ClusterClass.
	Topology bool

	// Setup registers the reconcilers under test. Every manager serves the webhooks of
	// all of Talon's kinds: the plane's API server calls them for every write.
	Setup func(ctx context.Context, mgr ctrl.Manager) error

	// NoWebhooks leaves the webhooks to another manager running beside this one: all
	// managers of a test process share the webhook port.
	NoWebhooks bool

	// ClusterWebhooksIn serves Cluster API's own Cluster webhooks for the Clusters of this
	// namespace: defaulting (a topology's variables get their ClusterClass defaults) and
	// validation (the variables checked against the class's schemas), as Cluster API's
	// manager serves them. Clusters of other namespaces do not pass through them.
	ClusterWebhooksIn string
}

// managerCount numbers the managers a test process starts.
var managerCount atomic.Int64

// Manager is a controller-runtime manager running in the test process.
type Manager struct {
	ctrl.Manager
	// ClusterCache is Cluster API's ClusterCache when CoreReconcilers is set.
	ClusterCache clustercache.ClusterCache

	stop func()
}

// Stop stops the manager, as a killed manager process stops, and waits for it; the test's
// end stops it otherwise. Stopping a stopped manager does nothing.
func (m *Manager) Stop() { m.stop() }

// StartManager starts a manager against the plane, serving webhooks where the API server
// calls them, and stops it when the test ends. Run one at a time per test process: all
// managers share the webhook port (see NoWebhooks).
func (e *Environment) StartManager(tb testing.TB, opts ManagerOptions) *Manager {
	tb.Helper()
	host, port, certDir := e.WebhookServing()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:  e.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Tests start several managers in one process, each with the same controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// Informer names must be unique in a process, and tests restart managers.
		Cache:  capisetup.ManagerCacheOptions(e.Scheme, fmt.Sprintf("talon-test-%d", managerCount.Add(1)), "", 10*time.Minute),
		Client: capisetup.ManagerClientOptions(),
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    host,
			Port:    port,
			CertDir: certDir,
		}),
	})
	if err != nil {
		tb.Fatalf("Failed to create manager: %v", err)
	}

	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), ctrl.Log.WithName("test-manager")))
	m := &Manager{Manager: mgr}
	if opts.CoreReconcilers || opts.Topology {
		if m.ClusterCache, err = setupCoreReconcilers(ctx, mgr); err != nil {
			cancel()
			tb.Fatalf("Failed to set up Cluster API's core reconcilers: %v", err)
		}
	}
	if opts.Topology {
		if err := setupTopologyReconcilers(ctx, mgr, m.ClusterCache); err != nil {
			cancel()
			tb.Fatalf("Failed to set up Cluster API's topology reconcilers: %v", err)
		}
	}
	if opts.Setup != nil {
		if err := opts.Setup(ctx, mgr); err != nil {
			cancel()
			tb.Fatalf("Failed to set up the reconcilers under test: %v", err)
		}
	}
	if !opts.NoWebhooks {
		if err := errors.Join(bootstrapsetup.Webhooks(mgr), controlplanesetup.Webhooks(mgr), infrastructuresetup.Webhooks(mgr)); err != nil {
			cancel()
			tb.Fatalf("Failed to set up Talon's webhooks: %v", err)
		}
	}

	if opts.ClusterWebhooksIn != "" {
		if err := (&capiadmission.Cluster{Client: mgr.GetClient()}).SetupWebhookWithManager(clusterWebhookManager(mgr)); err != nil {
			cancel()
			tb.Fatalf("Failed to set up Cluster API's Cluster webhooks: %v", err)
		}
	}

	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	m.stop = sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				tb.Errorf("Manager stopped with an error: %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Errorf("Manager did not stop within 30s; its goroutines:\n%s", managerGoroutines())
		}
	})
	tb.Cleanup(m.stop)
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		tb.Fatalf("Manager caches did not sync within 30s")
	}
	if !opts.NoWebhooks {
		// The API server calls the webhooks on the first write: wait until they answer.
		for mgr.GetWebhookServer().StartedChecker()(nil) != nil {
			select {
			case <-syncCtx.Done():
				tb.Fatalf("The webhook server did not start within 30s")
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// A manager stopped while it still starts its runnables never returns: controller-runtime
	// (v0.24) waits for each group's readiness in a loop that ignores the cancelled context, and
	// a cache whose start was cancelled never gets ready. The manager closes Elected once every
	// group has started (without leader election it counts as elected).
	select {
	case <-mgr.Elected():
	case <-syncCtx.Done():
		tb.Fatalf("The manager did not start its runnables within 30s")
	}
	if opts.ClusterWebhooksIn != "" {
		e.installClusterWebhooks(tb, opts.ClusterWebhooksIn)
	}
	return m
}

// managerGoroutines is the stacks of the goroutines in controller-runtime's manager, its
// controllers and the reconcilers (Cluster API's and Talon's), for a manager that does not stop.
func managerGoroutines() string {
	var dump bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&dump, 2); err != nil {
		return err.Error()
	}
	var kept []string
	for _, g := range strings.Split(dump.String(), "\n\n") {
		if strings.Contains(g, "controller-runtime/pkg/manager") || strings.Contains(g, "controller-runtime/pkg/internal/controller") ||
			strings.Contains(g, "sigs.k8s.io/cluster-api/") || strings.Contains(g, "github.com/talon-capi/talon/") {
			kept = append(kept, g)
		}
	}
	return strings.Join(kept, "\n\n")
}

// setupTopologyReconcilers wires Cluster API's ClusterClass and topology reconcilers as its
// own manager does with the ClusterTopology feature gate on.
func setupTopologyReconcilers(ctx context.Context, mgr ctrl.Manager, cache clustercache.ClusterCache) error {
	if err := capifeature.MutableGates.Set(string(capifeature.ClusterTopology) + "=true"); err != nil {
		return err
	}
	// The topology reconciler finds a ClusterClass's Clusters through this index.
	if err := index.ByClusterClassRef(ctx, mgr); err != nil {
		return err
	}
	c, reader := mgr.GetClient(), mgr.GetAPIReader()
	return errors.Join(
		(&clusterclassreconciler.Reconciler{Client: c}).SetupWithManager(ctx, mgr, coreOptions()),
		(&topologyclusterreconciler.Reconciler{Client: c, APIReader: reader, ClusterCache: cache}).SetupWithManager(ctx, mgr, coreOptions()),
		(&topologymachinedeploymentreconciler.Reconciler{Client: c, APIReader: reader}).SetupWithManager(ctx, mgr, coreOptions()),
		(&topologymachinesetreconciler.Reconciler{Client: c, APIReader: reader}).SetupWithManager(ctx, mgr, coreOptions()),
	)
}

// coreOptions are the controller options of each of Cluster API's core reconcilers: its own
// manager's, except that a failing reconcile is retried after 10 s at most (Cluster API's
// default backs off to 16 min, which would turn a passing fault of a simulated workload
// cluster into a test timeout).
func coreOptions() controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: 5,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 10*time.Second),
	}
}

// setupCoreReconcilers wires Cluster API's core reconcilers as its own manager does.
func setupCoreReconcilers(ctx context.Context, mgr ctrl.Manager) (clustercache.ClusterCache, error) {
	// The Machine reconciler maps a workload Node's events to its Machine through these
	// indexes (by node name, then by providerID); without them every Node event is dropped,
	// and a Machine whose Node registers after its last reconcile waits for a resync.
	if err := errors.Join(index.ByMachineNode(ctx, mgr), index.ByMachineProviderID(ctx, mgr)); err != nil {
		return nil, fmt.Errorf("failed to index Machines: %w", err)
	}
	cache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetClient(),
		Cache:        capisetup.ClusterCacheCacheOptions(),
		Client:       capisetup.ClusterCacheClientOptions("talon-test", 20, 30),
	}, coreOptions())
	if err != nil {
		return nil, fmt.Errorf("failed to set up ClusterCache: %w", err)
	}
	secrets, err := partialSecretCache(mgr)
	if err != nil {
		return nil, err
	}
	c, reader := mgr.GetClient(), mgr.GetAPIReader()
	errs := []error{
		(&clusterreconciler.Reconciler{
			Client: c, APIReader: reader, ClusterCache: cache, RemoteConnectionGracePeriod: 50 * time.Second,
		}).SetupWithManager(ctx, mgr, coreOptions()),
		(&machinereconciler.Reconciler{
			Client: c, APIReader: reader, ClusterCache: cache, RemoteConditionsGracePeriod: 5 * time.Minute,
		}).SetupWithManager(ctx, mgr, coreOptions()),
		(&machinesetreconciler.Reconciler{
			Client: c, APIReader: reader, ClusterCache: cache,
		}).SetupWithManager(ctx, mgr, coreOptions()),
		(&machinedeploymentreconciler.Reconciler{
			Client: c, APIReader: reader,
		}).SetupWithManager(ctx, mgr, coreOptions()),
		(&machinehealthcheckreconciler.Reconciler{
			Client: c, ClusterCache: cache,
		}).SetupWithManager(ctx, mgr, coreOptions()),
		(&clusterresourcesetreconciler.Reconciler{Client: c, ClusterCache: cache}).SetupWithManager(ctx, mgr, coreOptions(), secrets),
		(&clusterresourcesetbindingreconciler.Reconciler{Client: c}).SetupWithManager(ctx, mgr, coreOptions()),
	}
	return cache, errors.Join(errs...)
}

// partialSecretCache is the cache of Secrets' metadata Cluster API's manager gives its
// ClusterResourceSet reconciler: the manager's own cache holds only Secrets labelled with a
// cluster, and a ClusterResourceSet's Secrets need not be.
func partialSecretCache(mgr ctrl.Manager) (ctrlcache.Cache, error) {
	secrets, err := ctrlcache.New(mgr.GetConfig(), ctrlcache.Options{
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		HTTPClient:       mgr.GetHTTPClient(),
		DefaultTransform: ctrlcache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the Secret metadata cache: %w", err)
	}
	if err := mgr.Add(secrets); err != nil {
		return nil, fmt.Errorf("failed to start the Secret metadata cache: %w", err)
	}
	return secrets, nil
}
