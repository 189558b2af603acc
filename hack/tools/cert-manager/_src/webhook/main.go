// Command webhook is cert-manager's admission webhook (validation, mutation and
// CRD conversion), wired from the cert-manager module's own packages.
package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	config "github.com/cert-manager/cert-manager/internal/apis/config/webhook"
	"github.com/cert-manager/cert-manager/internal/apis/config/webhook/validation"
	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
	webhookconfigfile "github.com/cert-manager/cert-manager/pkg/webhook/configfile"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
	"github.com/cert-manager/cert-manager/talon/cli"
)

func main() {
	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		panic(fmt.Sprintf("default webhook configuration: %v", err))
	}
	cli.Main(cli.Component{
		Name:          "webhook",
		AddFlags:      func(fs *pflag.FlagSet) { options.AddConfigFlags(fs, cfg) },
		NewConfigFile: func() configfile.ConfigFile { return webhookconfigfile.New() },
		CopyFromFile: func(f configfile.ConfigFile) {
			f.(*webhookconfigfile.WebhookConfigFile).Config.DeepCopyInto(cfg)
		},
		FeatureGates: func() map[string]bool { return cfg.FeatureGates },
		Validate: func() error {
			if errs := validation.ValidateWebhookConfiguration(cfg, nil); len(errs) > 0 {
				return fmt.Errorf("error validating flags: %w", errs.ToAggregate())
			}
			return logf.ValidateAndApply(&cfg.Logging)
		},
		Run: func(ctx context.Context) error { return run(ctx, cfg) },
	})
}

func run(ctx context.Context, cfg *config.WebhookConfiguration) error {
	log := logf.FromContext(ctx)
	v := util.VersionInfo()
	log.Info("starting cert-manager webhook", "version", v.GitVersion, "git_commit", v.GitCommit, "go_version", v.GoVersion)
	srv, err := cmwebhook.NewCertManagerWebhookServer(log, *cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
