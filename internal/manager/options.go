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
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"

	capiflags "sigs.k8s.io/cluster-api/util/flags"

	"github.com/talon-capi/talon/internal/feature"
	"github.com/talon-capi/talon/internal/imagefactory"
)

// Options are the settings every Talon manager takes from its command line.
type Options struct {
	// LeaderElect makes the manager wait for a Lease before reconciling, so that several
	// replicas can run with one of them active.
	LeaderElect bool
	// LeaderElectLeaseDuration is how long a non-leader waits before taking over a Lease.
	LeaderElectLeaseDuration time.Duration
	// LeaderElectRenewDeadline is how long the leader retries renewing its Lease before giving up.
	LeaderElectRenewDeadline time.Duration
	// LeaderElectRetryPeriod is how often Lease actions are retried.
	LeaderElectRetryPeriod time.Duration
	// LeaderElectNamespace is where the Lease lives; empty means the manager's own namespace
	// when it runs in a cluster. A manager run outside a cluster must set it.
	LeaderElectNamespace string

	// Namespace limits the manager to one namespace; empty watches all namespaces.
	Namespace string
	// WatchFilter limits reconciliation to objects labelled cluster.x-k8s.io/watch-filter with this value.
	WatchFilter string
	// Concurrency is how many objects of each kind are reconciled at once.
	Concurrency int
	// SyncPeriod is how often every watched object is reconciled even without events.
	SyncPeriod time.Duration

	// KubeAPIQPS and KubeAPIBurst limit the manager's requests to the management cluster.
	KubeAPIQPS float32
	// KubeAPIBurst is the request burst allowed above KubeAPIQPS.
	KubeAPIBurst int

	// WebhookPort is the port the webhook server listens on.
	WebhookPort int
	// WebhookCertDir holds the webhook server's tls.crt and tls.key.
	WebhookCertDir string

	// HealthAddr is where /healthz and /readyz are served.
	HealthAddr string
	// ProfilerAddr, when set, serves pprof.
	ProfilerAddr string

	// ImageFactoryURL is the Talos Image Factory the bootstrap provider resolves schematics
	// and installers at.
	ImageFactoryURL string

	// Diagnostics holds Cluster API's shared flags for the metrics endpoint and TLS settings
	// (--diagnostics-address, --insecure-diagnostics, --tls-min-version, ...).
	Diagnostics capiflags.ManagerOptions

	// Logs holds the logging flags (-v, --logging-format, ...).
	Logs *logsv1.LoggingConfiguration
}

// NewOptions returns Options holding the defaults.
func NewOptions() *Options {
	return &Options{
		LeaderElectLeaseDuration: 15 * time.Second,
		LeaderElectRenewDeadline: 10 * time.Second,
		LeaderElectRetryPeriod:   2 * time.Second,
		Concurrency:              10,
		SyncPeriod:               10 * time.Minute,
		KubeAPIQPS:               20,
		KubeAPIBurst:             30,
		WebhookPort:              9443,
		WebhookCertDir:           "/tmp/k8s-webhook-server/serving-certs/",
		HealthAddr:               ":9440",
		ImageFactoryURL:          imagefactory.DefaultURL,
		Logs:                     logs.NewOptions(),
	}
}

// AddFlags registers the options, the logging flags and --feature-gates on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Enable leader election, so that only one replica of the manager reconciles at a time.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", o.LeaderElectLeaseDuration,
		"How long non-leaders wait before they try to take over the leader Lease.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectRenewDeadline,
		"How long the leader retries renewing its Lease before it gives up leadership.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", o.LeaderElectRetryPeriod,
		"How long to wait between two leader election actions.")
	fs.StringVar(&o.LeaderElectNamespace, "leader-elect-namespace", o.LeaderElectNamespace,
		"Namespace of the leader election Lease; defaults to the manager's namespace when it runs in a cluster.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace,
		"Namespace to watch; empty watches every namespace.")
	fs.StringVar(&o.WatchFilter, "watch-filter", o.WatchFilter,
		"Only reconcile objects whose label cluster.x-k8s.io/watch-filter has this value; empty reconciles all.")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency,
		"Number of objects of each kind reconciled at the same time.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod,
		"How often every watched object is reconciled again without an event.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Maximum queries per second from the manager to the management cluster's API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Maximum burst of queries from the manager to the management cluster's API server.")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort,
		"Port the webhook server listens on.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir,
		"Directory holding the webhook server's tls.crt and tls.key.")
	fs.StringVar(&o.HealthAddr, "health-addr", o.HealthAddr,
		"Address that serves /healthz and /readyz.")
	fs.StringVar(&o.ProfilerAddr, "profiler-address", o.ProfilerAddr,
		"Address that serves pprof (e.g. localhost:6060); empty disables it.")
	fs.StringVar(&o.ImageFactoryURL, "image-factory-url", o.ImageFactoryURL,
		"Talos Image Factory that schematics are created at and installer images come from (e.g. a factory of your own).")
	capiflags.AddManagerOptions(fs, &o.Diagnostics)
	logsv1.AddFlags(o.Logs, fs)
	feature.MutableGates.AddFlag(fs)
}

// Validate reports every option that cannot work, all at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("--concurrency must be at least 1, got %d", o.Concurrency))
	}
	if o.SyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--sync-period must be positive, got %s", o.SyncPeriod))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if _, err := imagefactory.InstallerImage(o.ImageFactoryURL, "", "", false); err != nil {
		errs = append(errs, fmt.Errorf("--image-factory-url: %w", err))
	}
	if o.WebhookPort < 1 || o.WebhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port must be a port number, got %d", o.WebhookPort))
	}
	if o.LeaderElect && o.LeaderElectRenewDeadline >= o.LeaderElectLeaseDuration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be shorter than --leader-elect-lease-duration (%s)",
			o.LeaderElectRenewDeadline, o.LeaderElectLeaseDuration))
	}
	return errors.Join(errs...)
}
