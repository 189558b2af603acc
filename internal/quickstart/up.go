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

package quickstart

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/internal/plane"
)

// Images the quickstart looks for, in order of preference.
const (
	// TalosImage is the Talos container image; it needs privileged containers.
	TalosImage = "ghcr.io/siderolabs/talos:v1.14.1"
	// DefaultSimImage is Talon's node simulator image (make sim-image); it also runs the
	// clusters' load balancers (talon lb). $TALON_SIM_IMAGE overrides it.
	DefaultSimImage = "ghcr.io/talon-capi/talon-sim:dev"
)

// SimImage is the simulator image: $TALON_SIM_IMAGE, else DefaultSimImage.
func SimImage() string {
	if image := os.Getenv("TALON_SIM_IMAGE"); image != "" {
		return image
	}
	return DefaultSimImage
}

// Runtimes of the quickstart's nodes.
const (
	RuntimeDocker = "docker"
	RuntimeSim    = "sim"
	// RuntimeSimLight is the simulator's scale mode (light nodes, see sim.Light).
	RuntimeSimLight = "sim-light"
)

// Manager binaries the quickstart runs from the bin directory.
const (
	CAPIManagerBinary = "cluster-api-manager"
	BootstrapBinary   = "bootstrap-manager"
	ControlPlaneBin   = "controlplane-manager"
	InfraBinary       = "infrastructure-manager"
	// Sidero Labs' bootstrap (CABPT) and control-plane (CACPPT) managers, built by make tools
	// (see InstallSideroProviders).
	SideroBootstrapBinary    = "sidero-bootstrap-manager"
	SideroControlPlaneBinary = "sidero-controlplane-manager"
)

// SideroProvider is the clusterctl name of Sidero Labs' bootstrap and control-plane providers.
const SideroProvider = "talos"

// PlaneDirName is the management plane's directory inside the output directory.
const PlaneDirName = ".plane"

// Options configure Up.
type Options struct {
	// Name and Namespace of the Cluster.
	Name, Namespace string
	// ControlPlanes and Workers are the Machine counts.
	ControlPlanes, Workers int
	// KubernetesVersion of the cluster.
	KubernetesVersion string
	// Runtime is RuntimeDocker, RuntimeSim or empty to choose (see ChooseRuntime).
	Runtime string
	// Kubeconfig, when set, names a management cluster to use instead of a local plane. If
	// Talon is installed there (its managers running), up only creates the cluster;
	// otherwise it installs Cluster API and Talon there with clusterctl and runs their
	// managers here, as for a local plane.
	Kubeconfig string
	// BinDir holds the tools and the managers (make tools build).
	BinDir string
	// ClusterctlConfig is the clusterctl.yaml of Talon's local repository (make release-manifests).
	ClusterctlConfig string
	// OutDir receives <name>/ with the cluster's files and the plane's directory.
	OutDir string
	// APIPort publishes the cluster's Kubernetes API on this host port (Docker nodes only;
	// 0: a free port Docker picks), and Subnet is the cluster network's (Docker nodes only;
	// empty: Docker's choice).
	APIPort int
	Subnet  string
	// ManagersAsPods starts the local plane as a real single-node Kubernetes (a kubelet whose
	// Pods are containers of this Docker Engine) and installs cert-manager, Cluster API and
	// Talon there as Deployments, as on any management cluster (InstallProvidersAsPods),
	// instead of running the managers as local processes. Docker nodes only; needs root and
	// the images of make docker-build, cert-manager and pause-image.
	ManagersAsPods bool
	// PauseImage is the Pod sandbox image of ManagersAsPods (empty: plane.DefaultPauseImage).
	PauseImage string
	// Timeout bounds the wait for the cluster.
	Timeout time.Duration
	// Out receives progress; Interactive redraws the tree in place.
	Out         io.Writer
	Interactive bool
}

// Scheme holds the types the quickstart reads.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme, bootstrapv1.AddToScheme, controlplanev1.AddToScheme, infrav1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// ChooseRuntime picks where nodes run: Docker with the Talos image if the engine holds it,
// else Docker with the simulator image, else simulated nodes inside the infrastructure
// manager. want forces docker or sim. It returns the runtime, the node image and why.
func ChooseRuntime(ctx context.Context, want string) (runtime, image, why string, err error) {
	if want != "" && want != RuntimeDocker && want != RuntimeSim && want != RuntimeSimLight {
		return "", "", "", fmt.Errorf("--runtime must be %s, %s or %s, got %q", RuntimeDocker, RuntimeSim, RuntimeSimLight, want)
	}
	if want == RuntimeSim {
		return RuntimeSim, "", "simulated nodes inside the infrastructure manager (--runtime sim)", nil
	}
	if want == RuntimeSimLight {
		return RuntimeSimLight, "", "light simulated nodes inside the infrastructure manager, etcd and Kubernetes API in memory (--runtime sim-light)", nil
	}
	simImage := SimImage()
	has, dockerErr := dockerImages(ctx, TalosImage, simImage)
	switch {
	case has[TalosImage] && has[simImage]:
		return RuntimeDocker, TalosImage, "Docker with the Talos image " + TalosImage, nil
	case has[simImage]:
		return RuntimeDocker, simImage, fmt.Sprintf("Docker with the node simulator image %s (no %s here)", simImage, TalosImage), nil
	case want == RuntimeDocker && dockerErr != nil:
		return "", "", "", fmt.Errorf("--runtime docker: %w", dockerErr)
	case want == RuntimeDocker:
		return "", "", "", fmt.Errorf("--runtime docker needs %s (its load balancers run 'talon lb' from it): run 'make sim-image'", simImage)
	case dockerErr != nil:
		return RuntimeSim, "", fmt.Sprintf("simulated nodes inside the infrastructure manager (Docker: %v)", dockerErr), nil
	default:
		return RuntimeSim, "", fmt.Sprintf("simulated nodes inside the infrastructure manager (Docker holds neither %s nor %s)", TalosImage, simImage), nil
	}
}

// Up makes a management plane (or uses opts.Kubeconfig), creates the cluster from Talon's
// cluster template with clusterctl, shows its progress until it is ready and writes its
// files. It returns the record of what it made.
func Up(ctx context.Context, opts Options) (*Record, error) {
	if opts.ControlPlanes < 1 || opts.ControlPlanes%2 == 0 {
		return nil, fmt.Errorf("--control-planes must be odd and at least 1 (etcd needs a majority), got %d", opts.ControlPlanes)
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("--workers must not be negative, got %d", opts.Workers)
	}
	if opts.APIPort < 0 || opts.APIPort > 65535 {
		return nil, fmt.Errorf("--api-port must be a port number (1-65535), got %d", opts.APIPort)
	}
	if opts.Subnet != "" {
		if _, err := netip.ParsePrefix(opts.Subnet); err != nil {
			return nil, fmt.Errorf("--subnet must be a CIDR such as 172.30.0.0/24: %w", err)
		}
	}
	out := opts.Out
	rt, image, why, err := ChooseRuntime(ctx, opts.Runtime)
	if err != nil {
		return nil, err
	}
	if rt != RuntimeDocker && (opts.APIPort != 0 || opts.Subnet != "") {
		return nil, fmt.Errorf("--api-port and --subnet apply to Docker nodes, and these run as %s (use --runtime docker)", rt)
	}
	if opts.ManagersAsPods && (rt != RuntimeDocker || opts.Kubeconfig != "") {
		return nil, fmt.Errorf("--managers pods runs the managers in a local kubelet-run cluster, for Docker nodes (these run as %s) and without --kubeconfig", rt)
	}
	sayf(out, "Nodes: %s\n", why)

	rec := &Record{Namespace: opts.Namespace, Name: opts.Name, Runtime: rt, Image: image, Kubeconfig: opts.Kubeconfig}
	clusterDir := filepath.Join(opts.OutDir, opts.Name)
	installed := false
	if opts.Kubeconfig != "" {
		if installed, err = talonInstalled(ctx, opts.Kubeconfig); err != nil {
			return nil, err
		}
	}
	if !installed {
		p, err := ensurePlane(ctx, opts, rt)
		if err != nil {
			return nil, err
		}
		rec.Plane, rec.Kubeconfig = p.Dir(), p.Kubeconfig()
	}
	if err := os.MkdirAll(clusterDir, 0o700); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(clusterDir, "talon-up.json"), rec); err != nil {
		return nil, err
	}

	c, err := managementClient(rec.Kubeconfig)
	if err != nil {
		return nil, err
	}
	existing := &clusterv1.Cluster{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.Name}, existing); {
	case err == nil:
		sayf(out, "Cluster %s/%s exists: showing its progress\n", opts.Namespace, opts.Name)
	case apierrors.IsNotFound(err):
		if err := createCluster(ctx, c, opts, rec, image, clusterDir); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}

	if err := watch(ctx, c, opts, clusterDir); err != nil {
		return rec, err
	}
	hostAccess := ""
	docker := &infrav1.TalosDockerCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.Name}, docker); err == nil && docker.Status.LoadBalancer.HostPort > 0 {
		hostAccess = fmt.Sprintf("                (its contexts ending in %s reach the API server at https://127.0.0.1:%d, published by Docker)\n",
			HostContextSuffix, docker.Status.LoadBalancer.HostPort)
	}
	sayf(out, `
Cluster %[1]s is ready. Its files are in %[2]s:
  kubeconfig    kubectl --kubeconfig %[2]s/kubeconfig get nodes
%[3]s  talosconfig   talosctl --talosconfig %[2]s/talosconfig --nodes <address> version
  configs/      the machine config each node was given
Health:         talon status --name %[1]s
Remove it all:  talon down
`, opts.Name, clusterDir, hostAccess)
	return rec, nil
}

// ensurePlane reuses the plane running in the output directory or starts one with Cluster
// API and Talon installed by clusterctl and their managers running.
func ensurePlane(ctx context.Context, opts Options, rt string) (*plane.Plane, error) {
	dir := filepath.Join(opts.OutDir, PlaneDirName)
	if p, err := plane.Open(dir, opts.Out); err == nil && p.Running() {
		sayf(opts.Out, "Using the management plane running from %s\n", dir)
		return p, nil
	} else if err == nil {
		sayf(opts.Out, "The management plane in %s is not running (stopped, or the machine restarted): starting a new one. "+
			"'talon down' removes what clusters of the old one left in Docker.\n", dir)
	}
	needed := []string{plane.ClusterctlBinary, CAPIManagerBinary, BootstrapBinary, ControlPlaneBin, InfraBinary}
	if opts.ManagersAsPods {
		// The managers run from their images; plane.Start checks the node's programs.
		needed = []string{plane.ClusterctlBinary}
	}
	for _, name := range needed {
		if _, err := os.Stat(filepath.Join(opts.BinDir, name)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run 'make tools build' first (make quickstart does)", name, opts.BinDir)
		}
	}
	if _, err := os.Stat(opts.ClusterctlConfig); err != nil {
		return nil, fmt.Errorf("clusterctl configuration %s not found: run 'make release-manifests' first (make quickstart does)", opts.ClusterctlConfig)
	}
	start := time.Now()
	planeOpts := plane.Options{Dir: dir, BinDir: opts.BinDir, Log: opts.Out}
	var p *plane.Plane
	var err error
	if opts.ManagersAsPods {
		planeOpts.Node, planeOpts.PauseImage = true, cmp.Or(opts.PauseImage, plane.DefaultPauseImage)
		sayf(opts.Out, "Starting a single-node Kubernetes whose Pods are containers of this Docker Engine, for the managers\n")
		if p, err = plane.Start(ctx, planeOpts); err != nil {
			return nil, err
		}
		// The simulator needs no privileges; the Talos image does (and gets them).
		env := []string{"CLUSTER_TOPOLOGY=true", "TALON_DOCKER_UNPRIVILEGED_NODES=true"}
		if has, _ := dockerImages(ctx, TalosImage); has[TalosImage] {
			env[1] = "TALON_DOCKER_UNPRIVILEGED_NODES=false"
		}
		if err := InstallProvidersAsPods(ctx, p, opts.ClusterctlConfig, env); err != nil {
			return nil, errors.Join(err, p.Stop(context.WithoutCancel(ctx)))
		}
		sayf(opts.Out, "Management cluster ready in %s, the managers running as Pods (kubeconfig: %s)\n", time.Since(start).Round(time.Second), p.Kubeconfig())
		return p, nil
	}
	if opts.Kubeconfig != "" {
		sayf(opts.Out, "The cluster of %s has no Talon: installing Cluster API and Talon there with their managers running here "+
			"(its API server must reach this machine's 127.0.0.1 for their webhooks)\n", opts.Kubeconfig)
		p, err = plane.Attach(ctx, planeOpts, opts.Kubeconfig)
	} else {
		p, err = plane.Start(ctx, planeOpts)
	}
	if err != nil {
		return nil, err
	}
	if err := InstallProviders(ctx, p, opts.ClusterctlConfig, rt, nil); err != nil {
		return nil, errors.Join(err, p.Stop(context.WithoutCancel(ctx)))
	}
	sayf(opts.Out, "Management plane ready in %s (kubeconfig: %s)\n", time.Since(start).Round(time.Second), p.Kubeconfig())
	return p, nil
}

// InstallProviders installs Cluster API and Talon on p with clusterctl init from
// clusterctlConfig and runs their four managers; rt is the infrastructure manager's runtime.
// flags, keyed by manager name (cluster-api, talon-bootstrap, talon-control-plane,
// talon-infrastructure), are appended to that manager's arguments.
func InstallProviders(ctx context.Context, p *plane.Plane, clusterctlConfig, rt string, flags map[string][]string) error {
	bootstrap, controlPlane := talonManagers(p.BinDir())
	return installProviders(ctx, p, clusterctlConfig, rt, "talon", flags, bootstrap, controlPlane)
}

// CAPIFeatureGates are the feature gates the plane's Cluster API core manager runs with:
// ClusterClass, and the in-place updates of worker Machines through the runtime extension
// of Talon's control-plane manager.
const CAPIFeatureGates = "--feature-gates=ClusterTopology=true,InPlaceUpdates=true,RuntimeSDK=true"

// talonManagers are Talon's bootstrap and control-plane managers in bin.
func talonManagers(bin string) (bootstrap, controlPlane plane.Manager) {
	return plane.Manager{Name: "talon-bootstrap", Provider: "bootstrap-talon", Path: filepath.Join(bin, BootstrapBinary)},
		plane.Manager{Name: "talon-control-plane", Provider: "control-plane-talon", Path: filepath.Join(bin, ControlPlaneBin), Extension: true}
}

// InstallSideroProviders installs Cluster API, Talon's infrastructure provider and Sidero
// Labs' bootstrap and control-plane providers (clusterctl's "talos", from clusterctlConfig:
// make release-manifests writes out/clusterctl-sidero.yaml) on p, and runs their managers.
// Their CustomResourceDefinitions are those of Talon's bootstrap and control-plane
// providers (same groups and kinds), so Talon's own are not installed. flags are as for
// InstallProviders, keyed by sidero-bootstrap and sidero-control-plane for theirs.
func InstallSideroProviders(ctx context.Context, p *plane.Plane, clusterctlConfig, rt string, flags map[string][]string) error {
	bin := p.BinDir()
	return installProviders(ctx, p, clusterctlConfig, rt, SideroProvider, flags,
		plane.Manager{Name: "sidero-bootstrap", Provider: "bootstrap-talos", Path: filepath.Join(bin, SideroBootstrapBinary)},
		plane.Manager{Name: "sidero-control-plane", Provider: "control-plane-talos", Path: filepath.Join(bin, SideroControlPlaneBinary)})
}

// installProviders runs clusterctl init for Cluster API, Talon's infrastructure provider and
// the bootstrap and control-plane providers called provider, then starts the managers, each
// with its flags appended.
func installProviders(ctx context.Context, p *plane.Plane, clusterctlConfig, rt, provider string, flags map[string][]string, bootstrap, controlPlane plane.Manager) error {
	if err := p.InstallCertManagerAPI(ctx); err != nil {
		return err
	}
	if _, err := p.Clusterctl(ctx, nil, "init", "--config", clusterctlConfig,
		"--core", "cluster-api", "--bootstrap", provider, "--control-plane", provider, "--infrastructure", "talon"); err != nil {
		return err
	}
	bin := p.BinDir()
	infraArgs := []string{"--runtime=" + rt}
	switch rt {
	case RuntimeSim:
		infraArgs = append(infraArgs, "--sim-bin-dir="+bin, "--sim-state-dir="+filepath.Join(p.Dir(), "sim"))
	case RuntimeSimLight:
		infraArgs = append(infraArgs, "--sim-state-dir="+filepath.Join(p.Dir(), "sim"))
	default:
		infraArgs = append(infraArgs, "--load-balancer-image="+SimImage())
		// The simulator needs no privileges; the Talos image does (and gets them).
		if has, _ := dockerImages(ctx, TalosImage); !has[TalosImage] {
			infraArgs = append(infraArgs, "--docker-unprivileged-nodes")
		}
	}
	for _, m := range []plane.Manager{
		{Name: "cluster-api", Provider: "cluster-api", Path: filepath.Join(bin, CAPIManagerBinary),
			Args: []string{CAPIFeatureGates}},
		bootstrap, controlPlane,
		{Name: "talon-infrastructure", Provider: "infrastructure-talon", Path: filepath.Join(bin, InfraBinary), Args: infraArgs},
	} {
		m.Args = append(slices.Clone(m.Args), flags[m.Name]...)
		if err := p.StartManager(ctx, m); err != nil {
			return err
		}
		if m.Name == "cluster-api" && controlPlane.Extension {
			// Registered once the core manager runs (its webhook admits ExtensionConfigs) and
			// before the control-plane manager starts (the plane points it at its port).
			path := filepath.Join(filepath.Dir(clusterctlConfig), InPlaceUpdatesFile)
			if _, err := os.Stat(path); err != nil {
				p.Logf("Workers are replaced, not updated in place: no %s beside %s\n", InPlaceUpdatesFile, clusterctlConfig)
			} else if _, err := applyFile(ctx, p, path); err != nil {
				return fmt.Errorf("failed to register the in-place update hooks: %w", err)
			}
		}
	}
	return nil
}

// InPlaceUpdatesFile is the ExtensionConfig of the control-plane manager's in-place update
// hooks, which make release-manifests writes beside clusterctl.yaml.
const InPlaceUpdatesFile = "in-place-updates.yaml"

// applyFile applies the objects of a YAML file to p and returns them.
func applyFile(ctx context.Context, p *plane.Plane, path string) ([]unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := utilyaml.ToUnstructured(data)
	if err != nil {
		return nil, err
	}
	c, err := p.Client(client.Options{})
	if err != nil {
		return nil, err
	}
	for i := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&objs[i]), client.FieldOwner("talon-up"), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("failed to apply %s %s: %w", objs[i].GetKind(), objs[i].GetName(), err)
		}
	}
	return objs, nil
}

// createCluster renders Talon's cluster template with clusterctl and applies it.
func createCluster(ctx context.Context, c client.Client, opts Options, rec *Record, image, clusterDir string) error {
	env := []string{}
	if image != "" {
		env = append(env, "TALOS_IMAGE="+image)
	}
	manifest, err := plane.RunClusterctl(ctx, opts.BinDir, rec.Kubeconfig, env, opts.Out, "generate", "cluster", opts.Name,
		"--config", opts.ClusterctlConfig, "--infrastructure", "talon", "--target-namespace", opts.Namespace,
		"--kubernetes-version", opts.KubernetesVersion,
		"--control-plane-machine-count", strconv.Itoa(opts.ControlPlanes), "--worker-machine-count", strconv.Itoa(opts.Workers))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(clusterDir, "cluster.yaml"), manifest, 0o600); err != nil {
		return err
	}
	objs, err := utilyaml.ToUnstructured(manifest)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{}
	ns.Name = opts.Namespace
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	sayf(opts.Out, "Creating cluster %s/%s (%d control plane, %d workers, Kubernetes %s) from Talon's cluster template\n",
		opts.Namespace, opts.Name, opts.ControlPlanes, opts.Workers, opts.KubernetesVersion)
	for i := range objs {
		if objs[i].GetKind() != "TalosDockerCluster" {
			continue
		}
		if opts.APIPort != 0 {
			if err := unstructured.SetNestedField(objs[i].Object, int64(opts.APIPort), "spec", "loadBalancer", "hostPort"); err != nil {
				return err
			}
		}
		if opts.Subnet != "" {
			if err := unstructured.SetNestedField(objs[i].Object, opts.Subnet, "spec", "network", "subnet"); err != nil {
				return err
			}
		}
	}
	for i := range objs {
		if err := applyWhenWebhooksAnswer(ctx, c, &objs[i], opts.Out); err != nil {
			return fmt.Errorf("failed to create %s %s: %w", objs[i].GetKind(), objs[i].GetName(), err)
		}
	}
	return nil
}

// webhookWait bounds how long applyWhenWebhooksAnswer waits for the providers' webhooks.
const webhookWait = 2 * time.Minute

// Transient tells whether err is an API server that could not answer a request now (an
// internal error such as an unreachable webhook, a timeout, an unavailable server) rather
// than one that refused it: the same request may succeed when tried again.
func Transient(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err)
}

// applyWhenWebhooksAnswer applies obj, trying again while the API server cannot reach a
// webhook (an internal error or a timeout): the providers' Pods were just installed, and one
// restarted by a rollout, or slow on a busy machine, answers a little later. A refusal of
// the object itself is returned at once.
func applyWhenWebhooksAnswer(ctx context.Context, c client.Client, obj *unstructured.Unstructured, out io.Writer) error {
	deadline := time.Now().Add(webhookWait)
	said := false
	for {
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("talon-up"), client.ForceOwnership)
		if !Transient(err) || time.Now().After(deadline) {
			return err
		}
		if !said {
			sayf(out, "Waiting for the providers' webhooks to answer (%v)\n", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// watch shows the cluster's tree until it is ready, writing its files as they appear.
func watch(ctx context.Context, c client.Client, opts Options, clusterDir string) error {
	deadline := time.Now().Add(opts.Timeout)
	start, last, lines := time.Now(), "", 0
	for {
		tree, err := Describe(ctx, c, opts.Namespace, opts.Name)
		if err != nil {
			return err
		}
		text := tree.String()
		if text != last {
			if opts.Interactive && lines > 0 {
				// Move up over the previous tree and clear to the end of the screen.
				sayf(opts.Out, "\033[%dA\033[J", lines)
			} else if !opts.Interactive {
				sayf(opts.Out, "--- %s\n", time.Since(start).Round(time.Second))
			}
			sayf(opts.Out, "%s", text)
			last, lines = text, strings.Count(text, "\n")
		}
		if err := WriteFiles(ctx, c, opts.Namespace, opts.Name, clusterDir); err != nil {
			return err
		}
		if tree.Ready() {
			sayf(opts.Out, "Ready after %s\n", time.Since(start).Round(time.Second))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster %s/%s is not ready after %s:\n  %s", opts.Namespace, opts.Name, opts.Timeout, strings.Join(tree.Problems(), "\n  "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// HostContextSuffix ends the name of the kubeconfig context WriteFiles adds for a Docker
// cluster whose Kubernetes API is published on the host.
const HostContextSuffix = "-host"

// WithHostContext adds to kubeconfig, for each of its contexts, one named <context>-host
// whose server is https://127.0.0.1:<hostPort>: the cluster's endpoint as the host
// publishes it, for where the Docker network's addresses do not reach (Docker Desktop).
// The API server's certificate names 127.0.0.1, as Talos' does.
func WithHostContext(kubeconfig []byte, hostPort int) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to read the cluster's kubeconfig: %w", err)
	}
	server := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort))
	for _, name := range slices.Sorted(maps.Keys(cfg.Contexts)) {
		if strings.HasSuffix(name, HostContextSuffix) {
			continue
		}
		hostContext := *cfg.Contexts[name]
		cluster, ok := cfg.Clusters[hostContext.Cluster]
		if !ok {
			continue
		}
		hostCluster := *cluster
		hostCluster.Server = server
		cfg.Clusters[hostContext.Cluster+HostContextSuffix] = &hostCluster
		hostContext.Cluster += HostContextSuffix
		cfg.Contexts[name+HostContextSuffix] = &hostContext
	}
	return clientcmd.Write(*cfg)
}

// WriteFiles writes the cluster's kubeconfig, talosconfig and every Machine's rendered
// config (configs/<machine>.yaml) into dir, as far as they exist yet.
func WriteFiles(ctx context.Context, c client.Reader, namespace, name, dir string) error {
	files := map[string][]byte{}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-kubeconfig"}, secret); err == nil {
		files["kubeconfig"] = secret.Data["value"]
		docker := &infrav1.TalosDockerCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, docker); err == nil && docker.Status.LoadBalancer.HostPort > 0 {
			withHost, err := WithHostContext(secret.Data["value"], int(docker.Status.LoadBalancer.HostPort))
			if err != nil {
				return err
			}
			files["kubeconfig"] = withHost
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clustersecrets.TalosconfigSecretName(name)}, secret); err == nil {
		files["talosconfig"] = secret.Data[clustersecrets.TalosconfigKey]
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return err
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if m.Spec.Bootstrap.DataSecretName == nil {
			continue
		}
		data := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: *m.Spec.Bootstrap.DataSecretName}, data); err == nil {
			files[filepath.Join("configs", m.Name+".yaml")] = data.Data["value"]
		}
	}
	for path, data := range files {
		if len(data) == 0 {
			continue
		}
		full := filepath.Join(dir, path)
		if old, err := os.ReadFile(full); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(full, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// sayf writes progress for the user; a progress line that cannot be written is no reason
// to stop.
func sayf(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }

// talonInstalled says whether the management cluster of kubeconfig serves Talon's API.
func talonInstalled(ctx context.Context, kubeconfig string) (bool, error) {
	c, err := managementClient(kubeconfig)
	if err != nil {
		return false, err
	}
	err = c.List(ctx, &infrav1.TalosDockerClusterList{}, client.Limit(1))
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("cannot reach the management cluster of %s: %w", kubeconfig, err)
	}
	return true, nil
}

// managementClient is a client of the management cluster of kubeconfig.
func managementClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to read the management cluster's kubeconfig %s: %w", kubeconfig, err)
	}
	return client.New(cfg, client.Options{Scheme: Scheme})
}
