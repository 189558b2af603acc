// Command controller is cert-manager's controller manager: issuers, certificate
// issuance, certificate requests and ACME, wired from the cert-manager module's
// own packages. Every controller the module registers is linked in.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/controller/scheme"
	defaults "github.com/cert-manager/cert-manager/internal/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/internal/apis/config/controller/validation"
	"github.com/cert-manager/cert-manager/internal/controller/feature"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/controller"
	controllerconfigfile "github.com/cert-manager/cert-manager/pkg/controller/configfile"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	dnsutil "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/server"
	servertls "github.com/cert-manager/cert-manager/pkg/server/tls"
	"github.com/cert-manager/cert-manager/pkg/server/tls/authority"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"github.com/cert-manager/cert-manager/talon/cli"

	// Controllers and issuers register themselves in init(); the defaults
	// package above already imports the certificate and certificaterequest ones.
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmechallenges"
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmeorders"
	shimgateways "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/gateways"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/ingresses"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/vault"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/venafi"
)

func main() {
	cfg, err := defaultConfig()
	if err != nil {
		panic(fmt.Sprintf("default controller configuration: %v", err))
	}
	cli.Main(cli.Component{
		Name:          "controller",
		GoFlags:       true,
		AddFlags:      func(fs *pflag.FlagSet) { addFlags(fs, cfg) },
		NewConfigFile: func() configfile.ConfigFile { return controllerconfigfile.New() },
		CopyFromFile: func(f configfile.ConfigFile) {
			f.(*controllerconfigfile.ControllerConfigFile).Config.DeepCopyInto(cfg)
		},
		FeatureGates: func() map[string]bool { return cfg.FeatureGates },
		Validate: func() error {
			if errs := validation.ValidateControllerConfiguration(cfg, nil); len(errs) > 0 {
				return fmt.Errorf("error validating flags: %w", errs.ToAggregate())
			}
			return logf.ValidateAndApply(&cfg.Logging)
		},
		Run: func(ctx context.Context) error { return run(ctx, cfg) },
	})
}

func defaultConfig() (*config.ControllerConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.ControllerConfiguration{}
	scheme.Default(versioned)
	out := &config.ControllerConfiguration{}
	if err := scheme.Convert(versioned, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

func addFlags(fs *pflag.FlagSet, c *config.ControllerConfiguration) {
	fs.StringVar(&c.APIServerHost, "master", c.APIServerHost, "address of the Kubernetes API server (overrides the kubeconfig)")
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "path to a kubeconfig; only required out of cluster")
	fs.Float32Var(&c.KubernetesAPIQPS, "kube-api-qps", c.KubernetesAPIQPS, "maximum QPS to the Kubernetes API server")
	fs.IntVar(&c.KubernetesAPIBurst, "kube-api-burst", c.KubernetesAPIBurst, "maximum burst to the Kubernetes API server")
	fs.StringVar(&c.ClusterResourceNamespace, "cluster-resource-namespace", c.ClusterResourceNamespace, "namespace holding ClusterIssuer secrets")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "limit the controller to one namespace")
	fs.BoolVar(&c.LeaderElectionConfig.Enabled, "leader-elect", c.LeaderElectionConfig.Enabled, "perform leader election")
	fs.StringVar(&c.LeaderElectionConfig.Namespace, "leader-election-namespace", c.LeaderElectionConfig.Namespace, "namespace of the leader election lease")
	fs.DurationVar(&c.LeaderElectionConfig.LeaseDuration, "leader-election-lease-duration", c.LeaderElectionConfig.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&c.LeaderElectionConfig.RenewDeadline, "leader-election-renew-deadline", c.LeaderElectionConfig.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&c.LeaderElectionConfig.RetryPeriod, "leader-election-retry-period", c.LeaderElectionConfig.RetryPeriod, "leader election retry period")
	fs.StringSliceVar(&c.Controllers, "controllers", c.Controllers, "controllers to enable: '*' for the defaults, '-name' to disable one; known: "+strings.Join(defaults.AllControllers, ", "))
	fs.StringVar(&c.ACMEHTTP01Config.SolverImage, "acme-http01-solver-image", c.ACMEHTTP01Config.SolverImage, "image of the ACME HTTP-01 solver pods")
	fs.StringVar(&c.ACMEHTTP01Config.SolverResourceRequestCPU, "acme-http01-solver-resource-request-cpu", c.ACMEHTTP01Config.SolverResourceRequestCPU, "HTTP-01 solver CPU request")
	fs.StringVar(&c.ACMEHTTP01Config.SolverResourceRequestMemory, "acme-http01-solver-resource-request-memory", c.ACMEHTTP01Config.SolverResourceRequestMemory, "HTTP-01 solver memory request")
	fs.StringVar(&c.ACMEHTTP01Config.SolverResourceLimitsCPU, "acme-http01-solver-resource-limits-cpu", c.ACMEHTTP01Config.SolverResourceLimitsCPU, "HTTP-01 solver CPU limit")
	fs.StringVar(&c.ACMEHTTP01Config.SolverResourceLimitsMemory, "acme-http01-solver-resource-limits-memory", c.ACMEHTTP01Config.SolverResourceLimitsMemory, "HTTP-01 solver memory limit")
	fs.BoolVar(&c.ACMEHTTP01Config.SolverRunAsNonRoot, "acme-http01-solver-run-as-non-root", c.ACMEHTTP01Config.SolverRunAsNonRoot, "run HTTP-01 solver pods as non-root")
	fs.StringSliceVar(&c.ACMEHTTP01Config.SolverNameservers, "acme-http01-solver-nameservers", c.ACMEHTTP01Config.SolverNameservers, "nameservers for HTTP-01 self checks")
	fs.BoolVar(&c.ClusterIssuerAmbientCredentials, "cluster-issuer-ambient-credentials", c.ClusterIssuerAmbientCredentials, "allow ClusterIssuers ambient credentials")
	fs.BoolVar(&c.IssuerAmbientCredentials, "issuer-ambient-credentials", c.IssuerAmbientCredentials, "allow Issuers ambient credentials")
	fs.StringSliceVar(&c.IngressShimConfig.DefaultAutoCertificateAnnotations, "auto-certificate-annotations", c.IngressShimConfig.DefaultAutoCertificateAnnotations, "ingress-shim trigger annotations")
	fs.StringSliceVar(&c.IngressShimConfig.ExtraCertificateAnnotations, "extra-certificate-annotations", c.IngressShimConfig.ExtraCertificateAnnotations, "annotations copied from ingress to Certificate")
	fs.StringVar(&c.IngressShimConfig.DefaultIssuerName, "default-issuer-name", c.IngressShimConfig.DefaultIssuerName, "ingress-shim default issuer name")
	fs.StringVar(&c.IngressShimConfig.DefaultIssuerKind, "default-issuer-kind", c.IngressShimConfig.DefaultIssuerKind, "ingress-shim default issuer kind")
	fs.StringVar(&c.IngressShimConfig.DefaultIssuerGroup, "default-issuer-group", c.IngressShimConfig.DefaultIssuerGroup, "ingress-shim default issuer group")
	fs.StringSliceVar(&c.ACMEDNS01Config.RecursiveNameservers, "dns01-recursive-nameservers", c.ACMEDNS01Config.RecursiveNameservers, "DNS-01 check nameservers")
	fs.BoolVar(&c.ACMEDNS01Config.RecursiveNameserversOnly, "dns01-recursive-nameservers-only", c.ACMEDNS01Config.RecursiveNameserversOnly, "only use the recursive nameservers for DNS-01 checks")
	fs.DurationVar(&c.ACMEDNS01Config.CheckRetryPeriod, "dns01-check-retry-period", c.ACMEDNS01Config.CheckRetryPeriod, "DNS-01 check retry period")
	fs.BoolVar(&c.EnableCertificateOwnerRef, "enable-certificate-owner-ref", c.EnableCertificateOwnerRef, "make Certificates own their Secrets")
	fs.BoolVar(&c.EnableGatewayAPI, "enable-gateway-api", c.EnableGatewayAPI, "enable Gateway API support")
	fs.StringSliceVar(&c.CopiedAnnotationPrefixes, "copied-annotation-prefixes", c.CopiedAnnotationPrefixes, "annotation prefixes copied from Certificate to CertificateRequest")
	fs.Var(cliflag.NewMapStringBool(&c.FeatureGates), "feature-gates", "key=value pairs of feature gates")
	fs.IntVar(&c.NumberOfConcurrentWorkers, "concurrent-workers", c.NumberOfConcurrentWorkers, "workers per controller")
	fs.IntVar(&c.MaxConcurrentChallenges, "max-concurrent-challenges", c.MaxConcurrentChallenges, "maximum concurrently processed ACME challenges")
	fs.StringVar(&c.MetricsListenAddress, "metrics-listen-address", c.MetricsListenAddress, "metrics address")
	fs.BoolVar(&c.EnablePprof, "enable-profiling", c.EnablePprof, "accepted for compatibility; profiling is not served by this build")
	fs.StringVar(&c.PprofAddress, "profiler-address", c.PprofAddress, "accepted for compatibility")
	fs.StringVar(&c.MetricsTLSConfig.Filesystem.CertFile, "metrics-tls-cert-file", c.MetricsTLSConfig.Filesystem.CertFile, "metrics TLS certificate file")
	fs.StringVar(&c.MetricsTLSConfig.Filesystem.KeyFile, "metrics-tls-private-key-file", c.MetricsTLSConfig.Filesystem.KeyFile, "metrics TLS key file")
	fs.DurationVar(&c.MetricsTLSConfig.Dynamic.LeafDuration, "metrics-dynamic-serving-leaf-duration", c.MetricsTLSConfig.Dynamic.LeafDuration, "metrics dynamic leaf duration")
	fs.StringVar(&c.MetricsTLSConfig.Dynamic.SecretNamespace, "metrics-dynamic-serving-ca-secret-namespace", c.MetricsTLSConfig.Dynamic.SecretNamespace, "metrics dynamic CA secret namespace")
	fs.StringVar(&c.MetricsTLSConfig.Dynamic.SecretName, "metrics-dynamic-serving-ca-secret-name", c.MetricsTLSConfig.Dynamic.SecretName, "metrics dynamic CA secret name")
	fs.StringSliceVar(&c.MetricsTLSConfig.Dynamic.DNSNames, "metrics-dynamic-serving-dns-names", c.MetricsTLSConfig.Dynamic.DNSNames, "metrics dynamic serving DNS names")
	fs.StringSliceVar(&c.MetricsTLSConfig.CipherSuites, "metrics-tls-cipher-suites", c.MetricsTLSConfig.CipherSuites, "metrics TLS cipher suites")
	fs.StringVar(&c.MetricsTLSConfig.MinTLSVersion, "metrics-tls-min-version", c.MetricsTLSConfig.MinTLSVersion, "metrics minimum TLS version")
	fs.StringVar(&c.HealthzListenAddress, "internal-healthz-listen-address", c.HealthzListenAddress, "liveness probe address")
	fs.DurationVar(&c.LeaderElectionConfig.HealthzTimeout, "internal-healthz-leader-election-timeout", c.LeaderElectionConfig.HealthzTimeout, "leader election healthz grace period")
	logf.AddFlags(&c.Logging, fs)
}

// enabledControllers resolves --controllers the way upstream documents it.
func enabledControllers(o *config.ControllerConfiguration) sets.Set[string] {
	enabled := sets.New[string]()
	var disabled []string
	for _, name := range o.Controllers {
		switch {
		case name == "*":
			enabled.Insert(defaults.DefaultEnabledControllers...)
		case strings.HasPrefix(name, "-"):
			disabled = append(disabled, strings.TrimPrefix(name, "-"))
		default:
			enabled.Insert(name)
		}
	}
	if len(disabled) > 0 && enabled.Len() == 0 {
		enabled.Insert(defaults.DefaultEnabledControllers...)
	}
	if utilfeature.DefaultFeatureGate.Enabled(feature.ExperimentalCertificateSigningRequestControllers) {
		enabled.Insert(defaults.ExperimentalCertificateSigningRequestControllers...)
	}
	if utilfeature.DefaultFeatureGate.Enabled(feature.ExperimentalGatewayAPISupport) && o.EnableGatewayAPI {
		enabled.Insert(shimgateways.ControllerName)
	}
	if o.Namespace != "" {
		enabled.Delete(defaults.ClusterScopedControllers...)
	}
	return enabled.Delete(disabled...)
}

func quantity(name, v string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return q, fmt.Errorf("invalid %s %q: %w", name, v, err)
	}
	return q, nil
}

func contextFactory(ctx context.Context, opts *config.ControllerConfiguration) (*controller.ContextFactory, error) {
	h := opts.ACMEHTTP01Config
	reqCPU, err := quantity("acme-http01-solver-resource-request-cpu", h.SolverResourceRequestCPU)
	if err != nil {
		return nil, err
	}
	reqMem, err := quantity("acme-http01-solver-resource-request-memory", h.SolverResourceRequestMemory)
	if err != nil {
		return nil, err
	}
	limCPU, err := quantity("acme-http01-solver-resource-limits-cpu", h.SolverResourceLimitsCPU)
	if err != nil {
		return nil, err
	}
	limMem, err := quantity("acme-http01-solver-resource-limits-memory", h.SolverResourceLimitsMemory)
	if err != nil {
		return nil, err
	}
	nameservers := opts.ACMEDNS01Config.RecursiveNameservers
	if len(nameservers) == 0 {
		nameservers = dnsutil.RecursiveNameservers
	}
	return controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         opts.KubeConfig,
		KubernetesAPIQPS:   opts.KubernetesAPIQPS,
		KubernetesAPIBurst: opts.KubernetesAPIBurst,
		APIServerHost:      opts.APIServerHost,
		Namespace:          opts.Namespace,
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverResourceRequestCPU:    reqCPU,
			HTTP01SolverResourceRequestMemory: reqMem,
			HTTP01SolverResourceLimitsCPU:     limCPU,
			HTTP01SolverResourceLimitsMemory:  limMem,
			ACMEHTTP01SolverRunAsNonRoot:      h.SolverRunAsNonRoot,
			HTTP01SolverImage:                 h.SolverImage,
			HTTP01SolverNameservers:           h.SolverNameservers,
			DNS01Nameservers:                  nameservers,
			DNS01CheckRetryPeriod:             opts.ACMEDNS01Config.CheckRetryPeriod,
			DNS01CheckAuthoritative:           !opts.ACMEDNS01Config.RecursiveNameserversOnly,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: opts.MaxConcurrentChallenges},
		IssuerOptions: controller.IssuerOptions{
			ClusterIssuerAmbientCredentials: opts.ClusterIssuerAmbientCredentials,
			IssuerAmbientCredentials:        opts.IssuerAmbientCredentials,
			ClusterResourceNamespace:        opts.ClusterResourceNamespace,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerName:                 opts.IngressShimConfig.DefaultIssuerName,
			DefaultIssuerKind:                 opts.IngressShimConfig.DefaultIssuerKind,
			DefaultIssuerGroup:                opts.IngressShimConfig.DefaultIssuerGroup,
			DefaultAutoCertificateAnnotations: opts.IngressShimConfig.DefaultAutoCertificateAnnotations,
			ExtraCertificateAnnotations:       opts.IngressShimConfig.ExtraCertificateAnnotations,
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:           opts.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes: opts.CopiedAnnotationPrefixes,
		},
		ConfigOptions: controller.ConfigOptions{EnableGatewayAPI: opts.EnableGatewayAPI},
	})
}

func run(rootCtx context.Context, opts *config.ControllerConfiguration) error {
	rootCtx, cancel := context.WithCancel(rootCtx)
	defer cancel()
	log := logf.FromContext(rootCtx)
	g, rootCtx := errgroup.WithContext(rootCtx)

	v := util.VersionInfo()
	log.Info("starting cert-manager controller", "version", v.GitVersion, "git_commit", v.GitCommit, "go_version", v.GoVersion)

	factory, err := contextFactory(rootCtx, opts)
	if err != nil {
		return err
	}
	cmctx, err := factory.Build()
	if err != nil {
		return err
	}
	enabled := enabledControllers(opts)
	log.Info("enabled controllers", "controllers", sets.List(enabled))

	// Metrics.
	var certSource servertls.CertificateSource
	switch t := opts.MetricsTLSConfig; {
	case t.FilesystemConfigProvided():
		certSource = &servertls.FileCertificateSource{CertPath: t.Filesystem.CertFile, KeyPath: t.Filesystem.KeyFile}
	case t.DynamicConfigProvided():
		certSource = &servertls.DynamicSource{
			DNSNames: t.Dynamic.DNSNames,
			Authority: &authority.DynamicAuthority{
				SecretNamespace: t.Dynamic.SecretNamespace,
				SecretName:      t.Dynamic.SecretName,
				SecretLabels:    map[string]string{"app.kubernetes.io/managed-by": "cert-manager"},
				LeafDuration:    t.Dynamic.LeafDuration,
				RESTConfig:      cmctx.RESTConfig,
			},
		}
	}
	if certSource != nil {
		g.Go(func() error {
			if err := certSource.Start(rootCtx); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		})
	}
	if opts.MetricsListenAddress != "0" && opts.MetricsListenAddress != "" {
		ln, err := server.Listen(rootCtx, "tcp", opts.MetricsListenAddress,
			server.WithCertificateSource(certSource),
			server.WithTLSCipherSuites(opts.MetricsTLSConfig.CipherSuites),
			server.WithTLSMinVersion(opts.MetricsTLSConfig.MinTLSVersion),
		)
		if err != nil {
			return fmt.Errorf("failed to listen on metrics address %s: %w", opts.MetricsListenAddress, err)
		}
		cmctx.Metrics.SetupACMECollector(cmctx.SharedInformerFactory.Acme().V1().Challenges().Lister())
		cmctx.Metrics.SetupCertificateCollector(cmctx.SharedInformerFactory.Certmanager().V1().Certificates().Lister())
		srv := cmctx.Metrics.NewServer(ln)
		g.Go(func() error {
			<-rootCtx.Done()
			sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
			defer c()
			return srv.Shutdown(sctx)
		})
		g.Go(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}

	// Liveness (also reports a stuck leader election).
	hln, err := (&net.ListenConfig{}).Listen(rootCtx, "tcp", opts.HealthzListenAddress)
	if err != nil {
		return fmt.Errorf("failed to listen on healthz address %s: %w", opts.HealthzListenAddress, err)
	}
	hsrv := healthz.NewServer(opts.LeaderElectionConfig.HealthzTimeout)
	g.Go(func() error { return hsrv.Start(rootCtx, hln) })

	elected := make(chan struct{})
	if opts.LeaderElectionConfig.Enabled {
		g.Go(func() error {
			lectx, err := factory.Build("leader-election")
			if err != nil {
				return err
			}
			host, err := os.Hostname()
			if err != nil {
				return err
			}
			lock, err := resourcelock.New(resourcelock.LeasesResourceLock,
				opts.LeaderElectionConfig.Namespace, "cert-manager-controller",
				lectx.Client.CoreV1(), lectx.Client.CoordinationV1(),
				resourcelock.ResourceLockConfig{Identity: host + "-external-cert-manager-controller", EventRecorder: lectx.Recorder})
			if err != nil {
				return fmt.Errorf("error creating leader election lock: %w", err)
			}
			lost := make(chan error, 1)
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock:            lock,
				LeaseDuration:   opts.LeaderElectionConfig.LeaseDuration,
				RenewDeadline:   opts.LeaderElectionConfig.RenewDeadline,
				RetryPeriod:     opts.LeaderElectionConfig.RetryPeriod,
				ReleaseOnCancel: true,
				WatchDog:        hsrv.LeaderHealthzAdaptor,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(context.Context) { close(elected) },
					OnStoppedLeading: func() {
						if rootCtx.Err() == nil {
							lost <- errors.New("leader election lost")
						}
					},
				},
			})
			if err != nil {
				return err
			}
			le.Run(rootCtx)
			select {
			case err := <-lost:
				return err
			default:
				return nil
			}
		})
	} else {
		close(elected)
	}

	select {
	case <-rootCtx.Done():
		return g.Wait()
	case <-elected:
	}

	for name, construct := range controller.Known() {
		if !enabled.Has(name) {
			continue
		}
		iface, err := construct(factory)
		if err != nil {
			cancel()
			_ = g.Wait()
			return fmt.Errorf("error starting controller %s: %w", name, err)
		}
		log.V(logf.InfoLevel).Info("starting controller", "controller", name)
		g.Go(func() error { return iface.Run(opts.NumberOfConcurrentWorkers, rootCtx) })
	}

	cmctx.SharedInformerFactory.Start(rootCtx.Done())
	cmctx.KubeSharedInformerFactory.Start(rootCtx.Done())
	cmctx.HTTP01ResourceMetadataInformersFactory.Start(rootCtx.Done())
	gateway := utilfeature.DefaultFeatureGate.Enabled(feature.ExperimentalGatewayAPISupport) && opts.EnableGatewayAPI
	if gateway {
		cmctx.GWShared.Start(rootCtx.Done())
	}

	if err := g.Wait(); err != nil {
		return fmt.Errorf("error running controllers: %w", err)
	}
	if gateway {
		cmctx.GWShared.Shutdown()
	}
	cmctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	cmctx.KubeSharedInformerFactory.Shutdown()
	cmctx.SharedInformerFactory.Shutdown()
	return nil
}
