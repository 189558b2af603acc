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
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/spf13/cobra"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

type renderOptions struct {
	file     string
	outDir   string
	secrets  string
	endpoint string
	// talosVersion is the contract of specs that name none, as Talon's webhooks record it.
	talosVersion string
}

func newRenderCommand() *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render -f CLUSTER.yaml -o DIR",
		Short: "Render the Talos config of every machine of a cluster, offline",
		Long: `render reads the YAML of a cluster, as "clusterctl generate cluster" writes it (Cluster,
TalosControlPlane, MachineDeployments, TalosConfigTemplates), and writes into DIR/<cluster>/
the machine config each node would receive, a talosconfig, and the secrets bundle used.
Each config is rendered and validated by the same code as the bootstrap provider, so what
you review is what nodes get. No management cluster is needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "cluster manifests to render ('-' for standard input)")
	cmd.Flags().StringVarP(&o.outDir, "output", "o", "_out", "directory to write into")
	cmd.Flags().StringVar(&o.secrets, "secrets", "", "secrets bundle to reuse (a secrets.yaml from an earlier render or 'talosctl gen secrets'); default: a new one")
	cmd.Flags().StringVar(&o.endpoint, "endpoint", "", "control-plane endpoint host:port, for Clusters whose spec has none yet")
	cmd.Flags().StringVar(&o.talosVersion, "talos-version", configgen.DefaultTalosVersion(),
		"Talos version contract for configs whose spec names none (Talon records the same when such a control plane or template is created)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func (o *renderOptions) run(out io.Writer) error {
	in, err := openInput(o.file)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	manifests, err := readManifests(in)
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	var errs []error
	for _, cluster := range manifests.clusters {
		if err := o.renderCluster(out, manifests, cluster); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", cluster.Name, err))
		}
	}
	return errors.Join(errs...)
}

// openInput opens file, or standard input for "-".
func openInput(file string) (io.ReadCloser, error) {
	if file == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(filepath.Clean(file))
}

// machineToRender is one node of the cluster.
type machineToRender struct {
	name               string
	version            string
	spec               bootstrapv1.TalosConfigSpec
	infrastructureKind string
}

func (o *renderOptions) renderCluster(out io.Writer, m *clusterManifests, cluster *clusterv1.Cluster) error {
	if o.endpoint != "" {
		host, port, err := net.SplitHostPort(o.endpoint)
		p, perr := strconv.ParseInt(port, 10, 32)
		if err != nil || perr != nil {
			return fmt.Errorf("--endpoint %q is not host:port", o.endpoint)
		}
		cluster.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: host, Port: int32(p)}
	}
	if !cluster.Spec.ControlPlaneEndpoint.IsValid() {
		return errors.New("it has no spec.controlPlaneEndpoint (the infrastructure provider sets it): pass --endpoint host:port")
	}
	machines, err := machinesOf(m, cluster)
	if err != nil {
		return err
	}
	bundle, err := o.bundle()
	if err != nil {
		return err
	}
	dir := filepath.Join(o.outDir, cluster.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}

	if _, err := configgen.ParseContract(o.talosVersion); err != nil {
		return fmt.Errorf("--talos-version: %w", err)
	}
	var errs []error
	for _, machine := range machines {
		if machine.spec.TalosVersion == "" && machine.spec.GenerateType != bootstrapv1.GenerateTypeNone {
			machine.spec.TalosVersion = o.talosVersion
		}
		staticKey, err := m.staticKey(machine.spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("machine %s: %w", machine.name, err))
			continue
		}
		data, err := configgen.Render(bundle, configgen.ClusterFrom(cluster, machine.version), configgen.Machine{
			Spec:      machine.spec,
			Hostname:  configgen.Hostname(machine.spec.Hostname.Source, machine.name, machine.name),
			Mode:      configgen.ModeFor(machine.infrastructureKind),
			StaticKey: staticKey,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("machine %s: %w", machine.name, err))
			continue
		}
		path := filepath.Join(dir, machine.name+".yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
		printf(out, "%s: valid %s config for a %s node\n", path, machine.spec.GenerateType, configgen.ModeFor(machine.infrastructureKind))
	}

	bundleData, err := configgen.MarshalBundle(bundle)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets.yaml"), bundleData, 0o600); err != nil {
		return err
	}
	talosconfig, err := configgen.NewTalosconfig(bundle, cluster.Name, []string{cluster.Spec.ControlPlaneEndpoint.Host}, time.Now(), 24*time.Hour)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "talosconfig"), talosconfig.Data, 0o600); err != nil {
		return err
	}
	printf(out, "%s: secrets bundle (pass it with --secrets to render again with the same identity)\n", filepath.Join(dir, "secrets.yaml"))
	printf(out, "%s: talosconfig, valid for 24h\n", filepath.Join(dir, "talosconfig"))
	return errors.Join(errs...)
}

// machinesOf lists the nodes the cluster's control plane and MachineDeployments would create,
// named like their Machines (<owner>-<index>).
func machinesOf(m *clusterManifests, cluster *clusterv1.Cluster) ([]machineToRender, error) {
	var machines []machineToRender
	if ref := cluster.Spec.ControlPlaneRef; ref.IsDefined() && ref.Kind == "TalosControlPlane" {
		tcp, ok := m.controlPlanes[ref.Name]
		if !ok {
			return nil, fmt.Errorf("its TalosControlPlane %s is not in the manifests", ref.Name)
		}
		for i := range ptr.Deref(tcp.Spec.Replicas, 1) {
			machines = append(machines, machineToRender{
				name:               fmt.Sprintf("%s-%d", tcp.Name, i),
				version:            tcp.Spec.Version,
				spec:               tcp.Spec.ControlPlaneConfig,
				infrastructureKind: tcp.Spec.MachineTemplate.Spec.InfrastructureRef.Kind,
			})
		}
	}
	for _, md := range m.machineDeployments {
		if md.Spec.ClusterName != cluster.Name {
			continue
		}
		ref := md.Spec.Template.Spec.Bootstrap.ConfigRef
		if ref.Kind != "TalosConfigTemplate" {
			continue
		}
		template, ok := m.configTemplates[ref.Name]
		if !ok {
			return nil, fmt.Errorf("TalosConfigTemplate %s of MachineDeployment %s is not in the manifests", ref.Name, md.Name)
		}
		for i := range ptr.Deref(md.Spec.Replicas, 1) {
			machines = append(machines, machineToRender{
				name:               fmt.Sprintf("%s-%d", md.Name, i),
				version:            md.Spec.Template.Spec.Version,
				spec:               template.Spec.Template.Spec,
				infrastructureKind: md.Spec.Template.Spec.InfrastructureRef.Kind,
			})
		}
	}
	if len(machines) == 0 {
		return nil, errors.New("no TalosControlPlane or MachineDeployment with a TalosConfigTemplate belongs to it")
	}
	return machines, nil
}

func (o *renderOptions) bundle() (*secrets.Bundle, error) {
	if o.secrets == "" {
		return configgen.NewBundle("", time.Now())
	}
	data, err := os.ReadFile(o.secrets)
	if err != nil {
		return nil, err
	}
	return configgen.UnmarshalBundle(data)
}

// printf writes a progress line; a closed stdout is no reason to fail a render.
func printf(out io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(out, format, args...)
}
