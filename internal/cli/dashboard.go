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

package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talon-capi/talon/internal/dashboard"
	"github.com/talon-capi/talon/internal/quickstart"
)

type dashboardOptions struct {
	kubeconfig, context, address, namespace string
	allowedHosts                            []string
	readOnly                                bool
	verbose                                 int
}

func newDashboardCommand() *cobra.Command {
	o := &dashboardOptions{}
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a web page of the management cluster's Talos clusters, updated live",
		Long: `dashboard serves a web page of the Clusters in the management cluster of your kubeconfig:
the fleet with each cluster's state, versions, rollout and last etcd backup, and each
cluster's objects, conditions, Machines and events, updated as they change.

It reads and acts with your kubeconfig's credentials and nothing else: what your user may
not read is left out, and actions your user may not take are not offered. The actions
(scaling, a Kubernetes version change, an etcd backup, downloading the kubeconfig and
talosconfig) go to the API server, whose webhooks answer as they would to kubectl.
--read-only offers none and refuses them.

It listens on loopback by default and answers only loopback names; to serve it under
another name (an ingress of your own in front of it), list that name with --allowed-host.`,
		Example: `  talon dashboard                       # http://127.0.0.1:8080
  talon dashboard --read-only --namespace team-a --address 127.0.0.1:9000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDashboard(cmd.Context(), cmd, o) },
	}
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&o.context, "context", "", "kubeconfig context to use (default: the current one)")
	cmd.Flags().StringVar(&o.address, "address", "127.0.0.1:8080", "address to serve the dashboard at")
	cmd.Flags().StringVar(&o.namespace, "namespace", "", "show only this namespace (default: all the user may list)")
	cmd.Flags().StringSliceVar(&o.allowedHosts, "allowed-host", nil, "host name the dashboard is served under besides loopback (repeatable)")
	cmd.Flags().BoolVar(&o.readOnly, "read-only", false, "offer no actions and refuse them")
	cmd.Flags().IntVarP(&o.verbose, "v", "v", 0, "log verbosity")
	return cmd
}

func runDashboard(ctx context.Context, cmd *cobra.Command, o *dashboardOptions) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return fmt.Errorf("failed to load the kubeconfig: %w", err)
	}
	config.UserAgent = "talon-dashboard"
	errOut := cmd.ErrOrStderr()
	log := funcr.New(func(prefix, args string) { _, _ = fmt.Fprintln(errOut, prefix, args) }, funcr.Options{Verbosity: o.verbose})
	listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.address)
	if err != nil {
		return fmt.Errorf("failed to listen at %s: %w", o.address, err)
	}
	server, err := dashboard.New(ctx, dashboard.Options{
		Config: config, Scheme: quickstart.Scheme, Namespace: o.namespace, ReadOnly: o.readOnly,
		AllowedHosts: o.allowedHosts, Log: log,
	})
	if err != nil {
		_ = listener.Close()
		return err
	}
	srv := &http.Server{Handler: server.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	_, _ = fmt.Fprintf(cmd.OutOrStdout(), "Talon dashboard at http://%s/\n", listener.Addr())
	if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
