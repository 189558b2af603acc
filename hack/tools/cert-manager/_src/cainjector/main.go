// Command cainjector is cert-manager's CA injector: it copies the CA of a
// Certificate's Secret (or a Secret) into the caBundle of annotated webhook
// configurations, APIServices and CRD conversion webhooks.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/cert-manager/cert-manager/internal/apis/config/cainjector"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/cainjector/scheme"
	"github.com/cert-manager/cert-manager/internal/apis/config/cainjector/validation"
	"github.com/cert-manager/cert-manager/internal/apis/config/shared"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/cainjector/v1alpha1"
	cainjectorconfigfile "github.com/cert-manager/cert-manager/pkg/cainjector/configfile"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	cmservertls "github.com/cert-manager/cert-manager/pkg/server/tls"
	"github.com/cert-manager/cert-manager/pkg/server/tls/authority"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
	"github.com/cert-manager/cert-manager/talon/cli"
)

func main() {
	cfg, err := defaultConfig()
	if err != nil {
		panic(fmt.Sprintf("default cainjector configuration: %v", err))
	}
	cli.Main(cli.Component{
		Name:          "cainjector",
		AddFlags:      func(fs *pflag.FlagSet) { addFlags(fs, cfg) },
		NewConfigFile: func() configfile.ConfigFile { return cainjectorconfigfile.New() },
		CopyFromFile: func(f configfile.ConfigFile) {
			f.(*cainjectorconfigfile.CAInjectorConfigFile).Config.DeepCopyInto(cfg)
		},
		FeatureGates: func() map[string]bool { return cfg.FeatureGates },
		Validate: func() error {
			if errs := validation.ValidateCAInjectorConfiguration(cfg, nil); len(errs) > 0 {
				return fmt.Errorf("error validating flags: %w", errs.ToAggregate())
			}
			return logf.ValidateAndApply(&cfg.Logging)
		},
		Run: func(ctx context.Context) error { return run(ctx, cfg) },
	})
}

// defaultConfig returns the v1alpha1-defaulted configuration in internal form.
func defaultConfig() (*config.CAInjectorConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.CAInjectorConfiguration{}
	scheme.Default(versioned)
	out := &config.CAInjectorConfiguration{}
	if err := scheme.Convert(versioned, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

func addFlags(fs *pflag.FlagSet, c *config.CAInjectorConfiguration) {
	// --kubeconfig comes from controller-runtime (registered below); it reads it
	// through ctrl.GetConfigOrDie, so the configuration field is only a mirror.
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "limit the cainjector to one namespace")
	fs.BoolVar(&c.LeaderElectionConfig.Enabled, "leader-elect", c.LeaderElectionConfig.Enabled, "perform leader election")
	fs.StringVar(&c.LeaderElectionConfig.Namespace, "leader-election-namespace", c.LeaderElectionConfig.Namespace, "namespace of the leader election lease")
	fs.DurationVar(&c.LeaderElectionConfig.LeaseDuration, "leader-election-lease-duration", c.LeaderElectionConfig.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&c.LeaderElectionConfig.RenewDeadline, "leader-election-renew-deadline", c.LeaderElectionConfig.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&c.LeaderElectionConfig.RetryPeriod, "leader-election-retry-period", c.LeaderElectionConfig.RetryPeriod, "leader election retry period")
	fs.BoolVar(&c.EnableDataSourceConfig.Certificates, "enable-certificates-data-source", c.EnableDataSourceConfig.Certificates, "use cert-manager Certificates as CA sources")
	fs.BoolVar(&c.EnableInjectableConfig.ValidatingWebhookConfigurations, "enable-validatingwebhookconfigurations-injectable", c.EnableInjectableConfig.ValidatingWebhookConfigurations, "inject into ValidatingWebhookConfigurations")
	fs.BoolVar(&c.EnableInjectableConfig.MutatingWebhookConfigurations, "enable-mutatingwebhookconfigurations-injectable", c.EnableInjectableConfig.MutatingWebhookConfigurations, "inject into MutatingWebhookConfigurations")
	fs.BoolVar(&c.EnableInjectableConfig.CustomResourceDefinitions, "enable-customresourcedefinitions-injectable", c.EnableInjectableConfig.CustomResourceDefinitions, "inject into CRD conversion webhooks")
	fs.BoolVar(&c.EnableInjectableConfig.APIServices, "enable-apiservices-injectable", c.EnableInjectableConfig.APIServices, "inject into APIServices")
	fs.BoolVar(&c.EnablePprof, "enable-profiling", c.EnablePprof, "accepted for compatibility; profiling is not served by this build")
	fs.StringVar(&c.PprofAddress, "profiler-address", c.PprofAddress, "accepted for compatibility")
	fs.Var(cliflag.NewMapStringBool(&c.FeatureGates), "feature-gates", "key=value pairs of feature gates")
	logf.AddFlags(&c.Logging, fs)
	fs.StringVar(&c.MetricsListenAddress, "metrics-listen-address", c.MetricsListenAddress, "metrics address; 0 disables metrics")
	fs.StringVar(&c.MetricsTLSConfig.Filesystem.CertFile, "metrics-tls-cert-file", c.MetricsTLSConfig.Filesystem.CertFile, "metrics TLS certificate file")
	fs.StringVar(&c.MetricsTLSConfig.Filesystem.KeyFile, "metrics-tls-private-key-file", c.MetricsTLSConfig.Filesystem.KeyFile, "metrics TLS key file")
	fs.DurationVar(&c.MetricsTLSConfig.Dynamic.LeafDuration, "metrics-dynamic-serving-leaf-duration", c.MetricsTLSConfig.Dynamic.LeafDuration, "metrics dynamic leaf duration")
	fs.StringVar(&c.MetricsTLSConfig.Dynamic.SecretNamespace, "metrics-dynamic-serving-ca-secret-namespace", c.MetricsTLSConfig.Dynamic.SecretNamespace, "metrics dynamic CA secret namespace")
	fs.StringVar(&c.MetricsTLSConfig.Dynamic.SecretName, "metrics-dynamic-serving-ca-secret-name", c.MetricsTLSConfig.Dynamic.SecretName, "metrics dynamic CA secret name")
	fs.StringSliceVar(&c.MetricsTLSConfig.Dynamic.DNSNames, "metrics-dynamic-serving-dns-names", c.MetricsTLSConfig.Dynamic.DNSNames, "metrics dynamic serving DNS names")
	fs.StringSliceVar(&c.MetricsTLSConfig.CipherSuites, "metrics-tls-cipher-suites", c.MetricsTLSConfig.CipherSuites, "metrics TLS cipher suites")
	fs.StringVar(&c.MetricsTLSConfig.MinTLSVersion, "metrics-tls-min-version", c.MetricsTLSConfig.MinTLSVersion, "metrics minimum TLS version")

	// controller-runtime's --kubeconfig.
	var gofs flag.FlagSet
	ctrlconfig.RegisterFlags(&gofs)
	gofs.VisitAll(func(f *flag.Flag) { fs.AddGoFlag(f) })
}

func run(ctx context.Context, opts *config.CAInjectorConfiguration) error {
	log := logf.FromContext(ctx)
	v := util.VersionInfo()
	log.Info("starting cert-manager ca-injector", "version", v.GitVersion, "git_commit", v.GitCommit, "go_version", v.GoVersion)

	restConfig := util.RestConfigWithUserAgent(ctrl.GetConfigOrDie(), "cainjector")

	var namespaces map[string]cache.Config
	if opts.Namespace != "" {
		namespaces = map[string]cache.Config{opts.Namespace: {}}
	}

	certSource := certificateSource(opts.MetricsTLSConfig, restConfig)
	metrics := metricsserver.Options{BindAddress: opts.MetricsListenAddress}
	if certSource != nil {
		suites, err := cliflag.TLSCipherSuites(opts.MetricsTLSConfig.CipherSuites)
		if err != nil {
			return err
		}
		minVersion, err := cliflag.TLSVersion(opts.MetricsTLSConfig.MinTLSVersion)
		if err != nil {
			return err
		}
		metrics.SecureServing = true
		metrics.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
			c.CipherSuites = suites
			c.MinVersion = minVersion
			c.GetCertificate = certSource.GetCertificate
		}}
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			ReaderFailOnMissingInformer: true,
			DefaultNamespaces:           namespaces,
		},
		// Secrets are read directly rather than cached cluster-wide.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                opts.LeaderElectionConfig.Enabled,
		LeaderElectionNamespace:       opts.LeaderElectionConfig.Namespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &opts.LeaderElectionConfig.LeaseDuration,
		RenewDeadline:                 &opts.LeaderElectionConfig.RenewDeadline,
		RetryPeriod:                   &opts.LeaderElectionConfig.RetryPeriod,
		Metrics:                       metrics,
	})
	if err != nil {
		return fmt.Errorf("error creating manager: %w", err)
	}
	if certSource != nil {
		if err := mgr.Add(certSource); err != nil {
			return err
		}
	}

	if opts.EnableDataSourceConfig.Certificates {
		// The Certificate data source needs the Certificate CRD; wait for it.
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("failed to create client: %w", err)
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := direct.Get(ctx, types.NamespacedName{Name: "certificates.cert-manager.io"}, &apiext.CustomResourceDefinition{})
			switch {
			case apierrors.IsNotFound(err):
				log.Info("certificates.cert-manager.io CRD not found yet, retrying")
				return false, nil
			case err != nil:
				return false, err
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for the certificates.cert-manager.io CRD: %w", err)
		}
	}

	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    opts.Namespace,
		EnableCertificatesDataSource: opts.EnableDataSourceConfig.Certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   opts.EnableInjectableConfig.MutatingWebhookConfigurations,
			cainjector.ValidatingWebhookConfigurationName: opts.EnableInjectableConfig.ValidatingWebhookConfigurations,
			cainjector.APIServiceName:                     opts.EnableInjectableConfig.APIServices,
			cainjector.CustomResourceDefinitionName:       opts.EnableInjectableConfig.CustomResourceDefinitions,
		},
	}); err != nil {
		return fmt.Errorf("failed to register injectors: %w", err)
	}

	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("error running manager: %w", err)
	}
	return nil
}

func certificateSource(c shared.TLSConfig, restCfg *rest.Config) cmservertls.CertificateSource {
	switch {
	case c.FilesystemConfigProvided():
		return &cmservertls.FileCertificateSource{CertPath: c.Filesystem.CertFile, KeyPath: c.Filesystem.KeyFile}
	case c.DynamicConfigProvided():
		return &cmservertls.DynamicSource{
			DNSNames: c.Dynamic.DNSNames,
			Authority: &authority.DynamicAuthority{
				SecretNamespace: c.Dynamic.SecretNamespace,
				SecretName:      c.Dynamic.SecretName,
				SecretLabels:    map[string]string{"app.kubernetes.io/managed-by": "cert-manager-cainjector"},
				LeafDuration:    c.Dynamic.LeafDuration,
				RESTConfig:      restCfg,
			},
		}
	}
	return nil
}
