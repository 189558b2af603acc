// Package cli holds the command-line plumbing shared by Talon's cert-manager
// mains: a cobra command that tolerates unknown flags, optional --config file
// loading (flags given on the command line win over the file), and signal
// handling. It is compiled inside a copy of the cert-manager module so that it
// can use that module's internal packages.
package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	cmdutil "github.com/cert-manager/cert-manager/internal/cmd/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
)

// Component describes one binary.
type Component struct {
	Name string
	// AddFlags registers the component's configuration flags.
	AddFlags func(fs *pflag.FlagSet)
	// NewConfigFile returns an empty config file object for --config; it is
	// decoded and then CopyFromFile copies its content over the configuration.
	NewConfigFile func() configfile.ConfigFile
	CopyFromFile  func(configfile.ConfigFile)
	// FeatureGates returns the feature-gate map of the current configuration.
	FeatureGates func() map[string]bool
	// Validate validates the final configuration and applies logging options.
	Validate func() error
	// Run runs the component until ctx is cancelled.
	Run func(ctx context.Context) error
	// GoFlags adds the Go flag.CommandLine flags (controller-runtime's).
	GoFlags bool
}

// Main runs the component and exits the process with its status.
func Main(c Component) {
	ctx, exit := cmdutil.SetupExitHandler(context.Background(), cmdutil.GracefulShutdown)
	defer exit() // may call os.Exit, so it must run last

	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)
	ctx = logf.NewContext(ctx, logf.Log, c.Name)

	if err := newCommand(c, os.Args[1:]).ExecuteContext(ctx); err != nil {
		logf.Log.Error(err, "error executing command")
		cmdutil.SetExitCode(err)
	}
}

func newCommand(c Component, args []string) *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:           c.Name,
		Short:         "cert-manager " + c.Name + " (built by Talon from the cert-manager Go module)",
		SilenceErrors: true,
		SilenceUsage:  true,
		// Flags this minimal build does not know are ignored rather than fatal, so
		// manifests written for the upstream binaries keep working.
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			applyGates := func() error {
				if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(c.FeatureGates()); err != nil {
					return fmt.Errorf("failed to set feature gates: %w", err)
				}
				return nil
			}
			if err := applyGates(); err != nil {
				return err
			}
			if configPath != "" {
				abs, err := filepath.Abs(configPath)
				if err != nil {
					return fmt.Errorf("failed to load config file %s: %w", configPath, err)
				}
				loader, err := configfile.NewConfigurationFSLoader(nil, abs)
				if err != nil {
					return fmt.Errorf("failed to load config file %s: %w", configPath, err)
				}
				file := c.NewConfigFile()
				if err := loader.Load(file); err != nil {
					return fmt.Errorf("failed to load config file %s: %w", configPath, err)
				}
				c.CopyFromFile(file)
				// Command-line flags take precedence over the file: parse them again.
				if err := cmd.ParseFlags(args); err != nil {
					return fmt.Errorf("failed to re-parse flags: %w", err)
				}
				if err := applyGates(); err != nil {
					return err
				}
			}
			return c.Validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.Run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&configPath, "config", "", "Path to a file containing the component's configuration object")
	c.AddFlags(fs)
	if c.GoFlags {
		fs.AddGoFlagSet(flag.CommandLine)
	}
	cmd.SetArgs(args)
	return cmd
}
