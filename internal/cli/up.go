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
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
)

// defaultKubernetesVersion is the Kubernetes version talon up installs by default.
const defaultKubernetesVersion = "v1.37.2"

// outFlags are the flags up, status and down share.
type outFlags struct {
	outDir string
	name   string
}

func (f *outFlags) add(cmd *cobra.Command, nameHelp string) {
	cmd.Flags().StringVar(&f.outDir, "out", "_out", "directory of the clusters' files and of the local management plane")
	cmd.Flags().StringVar(&f.name, "name", f.name, nameHelp)
}

func newUpCommand() *cobra.Command {
	o := quickstart.Options{Name: "demo", Namespace: "default", ControlPlanes: 1, Workers: 2, KubernetesVersion: defaultKubernetesVersion}
	f := &outFlags{name: "demo"}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local management plane with Cluster API and Talon, and a Talos cluster on it",
		Long: `up starts a local management plane from the binaries in --bin-dir (etcd, kube-apiserver,
kube-controller-manager), installs Cluster API and Talon with clusterctl from Talon's
local repository (--config) and runs their four managers as local processes. It then creates
a cluster from Talon's cluster template and shows its progress until it is ready.

Nodes run in Docker with the Talos image if the engine holds it, else in Docker with the
node simulator image (make sim-image), else as simulated nodes inside the infrastructure
manager; --runtime chooses. With --kubeconfig, up uses that management cluster (Cluster API
and Talon installed and running there) instead of a local plane. With --managers pods, the
local plane is a real single-node Kubernetes (kubelet, kube-proxy, kube-scheduler,
cri-dockerd; Pods are containers of this Docker Engine) where clusterctl init installs
cert-manager, Cluster API and Talon as Deployments, as on any management cluster.

The cluster's kubeconfig, talosconfig and rendered machine configs go to <out>/<name>/.
Run it again with another --name for a second cluster on the same plane; 'talon down'
removes everything up made.`,
		Example: `  make quickstart          # builds what up needs, then runs it
  bin/talon up --workers 3 --kubernetes-version v1.35.4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Name, o.OutDir, o.Out = f.name, f.outDir, cmd.OutOrStdout()
			o.Interactive = isTerminal(cmd.OutOrStdout())
			_, err := quickstart.Up(cmd.Context(), o)
			return err
		},
	}
	f.add(cmd, "name of the cluster")
	bin := defaultBinDir()
	cmd.Flags().StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the cluster")
	cmd.Flags().IntVar(&o.ControlPlanes, "control-planes", o.ControlPlanes, "number of control-plane nodes (odd)")
	cmd.Flags().IntVar(&o.Workers, "workers", o.Workers, "number of worker nodes")
	cmd.Flags().StringVar(&o.KubernetesVersion, "kubernetes-version", o.KubernetesVersion, "Kubernetes version of the cluster")
	cmd.Flags().StringVar(&o.Runtime, "runtime", "", "where nodes run: docker, sim or sim-light (the simulator's scale mode) (default: docker if it holds a Talos or simulator image, else sim)")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "use this management cluster instead of starting a local plane")
	cmd.Flags().StringVar(&o.BinDir, "bin-dir", bin, "directory of the tools and managers (make tools build)")
	cmd.Flags().StringVar(&o.ClusterctlConfig, "config", filepath.Join(bin, "..", "out", "clusterctl.yaml"), "clusterctl.yaml of Talon's local repository (make release-manifests)")
	cmd.Flags().IntVar(&o.APIPort, "api-port", 0, "host port that publishes the cluster's Kubernetes API (Docker nodes; default: a free port Docker picks)")
	cmd.Flags().StringVar(&o.Subnet, "subnet", "", "subnet of the cluster's Docker network, e.g. 172.30.0.0/24 (Docker nodes; default: Docker's choice)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 10*time.Minute, "how long to wait for the cluster to be ready")
	cmd.Flags().StringVar(&o.PauseImage, "pause-image", plane.DefaultPauseImage, "Pod sandbox image of --managers pods, in this Docker Engine (make pause-image; nothing is pulled)")
	var managers string
	cmd.Flags().StringVar(&managers, "managers", "processes", "how the managers run: processes (local processes on a plane of etcd, kube-apiserver and "+
		"kube-controller-manager) or pods (Deployments installed by clusterctl init on a single-node Kubernetes whose kubelet runs Pods "+
		"as containers of this Docker Engine; needs root and make docker-build cert-manager pause-image)")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		switch managers {
		case "processes":
		case "pods":
			o.ManagersAsPods = true
		default:
			return fmt.Errorf("--managers must be processes or pods, got %q", managers)
		}
		return nil
	}
	return cmd
}

func newDownCommand() *cobra.Command {
	o := quickstart.DownOptions{}
	f := &outFlags{}
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Delete the clusters talon up made and stop its management plane",
		Long: `down deletes the clusters talon up made (through Cluster API, so that their nodes, load
balancers and networks go), removes whatever a failed deletion left in Docker, stops the
local management plane and removes the files. With --name only that cluster goes, and the
plane stays while another cluster uses it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Name, o.OutDir, o.Out = f.name, f.outDir, cmd.OutOrStdout()
			return quickstart.Down(cmd.Context(), o)
		},
	}
	f.add(cmd, "delete only this cluster")
	cmd.Flags().BoolVar(&o.KeepConfig, "keep-config", false, "keep each cluster's kubeconfig, talosconfig and configs")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 5*time.Minute, "how long to wait for each cluster's deletion")
	return cmd
}

// isTerminal says whether w is a terminal, where progress is redrawn in place.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

func newStatusCommand() *cobra.Command {
	f := &outFlags{name: "demo"}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the health of a cluster talon up made: Machines, Nodes, etcd members, endpoint, versions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			health, err := quickstart.StatusOf(cmd.Context(), f.outDir, f.name)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write([]byte(health.String()))
			return err
		},
	}
	f.add(cmd, "name of the cluster")
	return cmd
}
