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
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	logsv1 "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capisetup "sigs.k8s.io/cluster-api/core/setup"
	capiflags "sigs.k8s.io/cluster-api/util/flags"

	"github.com/talon-capi/talon/internal/version"
)

// Provider is what one Talon manager contributes on top of the shared machinery.
type Provider struct {
	// Name identifies the manager, e.g. "talon-bootstrap-manager": the controller name in
	// logs and metrics, the user agent, and the base of the leader election Lease name.
	Name string

	// AddToScheme registers the API types the provider reads and writes. Kubernetes' own
	// types and Cluster API's core types are always registered.
	AddToScheme []func(*runtime.Scheme) error

	// SetupReconcilers registers the provider's reconcilers with the manager.
	SetupReconcilers func(ctx context.Context, mgr ctrl.Manager, opts *Options) error

	// SetupWebhooks registers the provider's webhooks; nil when it serves none.
	SetupWebhooks func(mgr ctrl.Manager) error

	// AddFlags registers the provider's own flags; nil when it has none.
	AddFlags func(fs *pflag.FlagSet)

	// Validate checks the provider's own flags after parsing; nil when it has none.
	Validate func() error
}

// Main parses the command line, runs the provider's manager until SIGTERM or SIGINT, and
// exits: 0 after a clean stop, 1 on any error.
func Main(p Provider) {
	opts := NewOptions()
	fs := pflag.CommandLine
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	opts.AddFlags(fs)
	if p.AddFlags != nil {
		p.AddFlags(fs)
	}
	// controller-runtime registers --kubeconfig on the standard flag set.
	fs.AddGoFlagSet(flag.CommandLine)
	fs.Bool("version", false, "Print the version and exit.")
	pflag.Parse()

	if printVersion, _ := fs.GetBool("version"); printVersion {
		fmt.Println(p.Name, version.Get())
		return
	}
	if err := logsv1.ValidateAndApply(opts.Logs, nil); err != nil {
		fmt.Fprintf(os.Stderr, "Invalid logging flags: %v\n", err)
		os.Exit(1)
	}
	ctrl.SetLogger(klog.Background())
	log := ctrl.Log.WithName("setup")
	if err := errors.Join(opts.Validate(), validate(p)); err != nil {
		log.Error(err, "Invalid flags")
		os.Exit(1)
	}
	log.Info("Starting "+p.Name, "version", version.Get().String())

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Unable to load a kubeconfig")
		os.Exit(1)
	}
	if err := Run(ctrl.SetupSignalHandler(), p, opts, restConfig); err != nil {
		log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
	log.Info("Manager stopped")
}

// Run builds the provider's manager from opts, which Validate accepted, and runs it until
// ctx is done. It returns nil after a clean stop.
func Run(ctx context.Context, p Provider, opts *Options, restConfig *rest.Config) error {
	scheme, err := newScheme(p.AddToScheme)
	if err != nil {
		return err
	}
	tlsOptions, metricsOptions, err := capiflags.GetManagerOptions(opts.Diagnostics)
	if err != nil {
		return fmt.Errorf("invalid diagnostics flags: %w", err)
	}

	restConfig = rest.CopyConfig(restConfig)
	restConfig.QPS = opts.KubeAPIQPS
	restConfig.Burst = opts.KubeAPIBurst
	restConfig.UserAgent = p.Name

	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        scheme,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              p.Name + "-leader-election",
		LeaderElectionNamespace:       opts.LeaderElectNamespace,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(shutdownGrace),
		LeaseDuration:                 &opts.LeaderElectLeaseDuration,
		RenewDeadline:                 &opts.LeaderElectRenewDeadline,
		RetryPeriod:                   &opts.LeaderElectRetryPeriod,
		HealthProbeBindAddress:        opts.HealthAddr,
		PprofBindAddress:              opts.ProfilerAddr,
		Metrics:                       *metricsOptions,
		Cache:                         capisetup.ManagerCacheOptions(scheme, p.Name, opts.Namespace, opts.SyncPeriod),
		Client:                        capisetup.ManagerClientOptions(),
		WebhookServer: webhook.NewServer(webhook.Options{
			Port:    opts.WebhookPort,
			CertDir: opts.WebhookCertDir,
			TLSOpts: tlsOptions,
		}),
	})
	if err != nil {
		return fmt.Errorf("failed to create manager: %w", err)
	}

	if err := setupChecks(mgr, p.SetupWebhooks != nil); err != nil {
		return err
	}
	if p.SetupReconcilers != nil {
		if err := p.SetupReconcilers(ctx, mgr, opts); err != nil {
			return fmt.Errorf("failed to set up reconcilers: %w", err)
		}
	}
	if p.SetupWebhooks != nil {
		if err := p.SetupWebhooks(mgr); err != nil {
			return fmt.Errorf("failed to set up webhooks: %w", err)
		}
	}
	return startUntilStopped(ctx, mgr.Start, shutdownGrace+stopSlack)
}

const (
	// shutdownGrace is how long a stopping manager waits for its reconcilers to return, as
	// long as the kubelet waits by default before it kills a Pod's containers.
	shutdownGrace = 30 * time.Second
	// stopSlack is how much longer Run waits for the manager to return after that.
	stopSlack = 5 * time.Second
)

// startUntilStopped runs start until it returns, or until wait after ctx is done. A
// controller-runtime manager (v0.24) stopped before one of its caches has synced, say on a
// SIGTERM while the API server is unreachable or a CRD is missing, never returns: it waits
// for that cache in a loop that ignores the cancelled context, spinning a CPU. Run returns
// an error then, so that the process exits.
func startUntilStopped(ctx context.Context, start func(context.Context) error, wait time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		return fmt.Errorf("the manager did not stop within %s of being told to: it was still starting (a cache had not synced)", wait)
	}
}

func validate(p Provider) error {
	if p.Validate == nil {
		return nil
	}
	return p.Validate()
}

func newScheme(addToScheme []func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	builders := append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme}, addToScheme...)
	errs := make([]error, 0, len(builders))
	for _, add := range builders {
		errs = append(errs, add(scheme))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("failed to build scheme: %w", err)
	}
	return scheme, nil
}

// setupChecks serves /healthz and /readyz; with webhooks, readiness also waits for the
// webhook server, so that no request reaches a manager that cannot answer it.
func setupChecks(mgr ctrl.Manager, withWebhooks bool) error {
	checks := map[string]healthz.Checker{"ping": healthz.Ping}
	if withWebhooks {
		checks["webhook"] = mgr.GetWebhookServer().StartedChecker()
	}
	for name, check := range checks {
		if err := mgr.AddHealthzCheck(name, check); err != nil {
			return fmt.Errorf("failed to add health check %q: %w", name, err)
		}
		if err := mgr.AddReadyzCheck(name, check); err != nil {
			return fmt.Errorf("failed to add readiness check %q: %w", name, err)
		}
	}
	return nil
}
