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

package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	containertypes "github.com/moby/moby/api/types/container"
	networktypes "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// mtuOption is the bridge driver's option for the MTU of a network.
const mtuOption = "com.docker.network.driver.mtu"

// Docker runs a cluster's nodes and load balancer as containers of a Docker Engine, the way
// `talosctl cluster create` does. It keeps no state of its own: every container, volume and
// network carries the labels of its cluster (and Machine), and is found again by them.
type Docker struct {
	client *client.Client
	// privileged runs nodes in Docker's privileged mode, as Talos needs.
	privileged bool
}

var _ Runtime = &Docker{}

// DockerOption configures NewDocker.
type DockerOption func(*dockerOptions)

type dockerOptions struct {
	client       []client.Opt
	unprivileged bool
}

// WithDockerClient adds options of the Engine API client, applied after the environment's.
func WithDockerClient(opts ...client.Opt) DockerOption {
	return func(o *dockerOptions) { o.client = append(o.client, opts...) }
}

// WithUnprivilegedNodes runs nodes without Docker's privileged mode. Talos needs it; the
// node simulator image (docs/sim.md) does not, and an engine that runs rootless or inside
// an unprivileged container cannot grant it ("unable to apply caps").
func WithUnprivilegedNodes() DockerOption {
	return func(o *dockerOptions) { o.unprivileged = true }
}

// NewDocker returns a runtime talking to the Docker Engine the environment names
// (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, DOCKER_API_VERSION). The API version
// is negotiated with the engine on the first call.
func NewDocker(opts ...DockerOption) (*Docker, error) {
	var o dockerOptions
	for _, opt := range opts {
		opt(&o)
	}
	c, err := client.New(append([]client.Opt{client.FromEnv}, o.client...)...)
	if err != nil {
		return nil, fmt.Errorf("failed to create Docker client: %w", err)
	}
	return &Docker{client: c, privileged: !o.unprivileged}, nil
}

// Close releases the connections to the Docker Engine.
func (d *Docker) Close() error { return d.client.Close() }

// Name is "docker".
func (d *Docker) Name() string { return "docker" }

// EnsureNetwork creates a labelled bridge network named spec.Name unless it exists. Without
// spec.Subnet Docker's IPAM chooses the subnet; the network returned says which.
func (d *Docker) EnsureNetwork(ctx context.Context, cluster Cluster, spec NetworkSpec) (Network, error) {
	if spec.Subnet.IsValid() && !spec.Subnet.Addr().Is4() {
		return Network{}, fmt.Errorf("subnet %s of network %s of cluster %s is not an IPv4 subnet", spec.Subnet, spec.Name, cluster)
	}
	existing, err := d.networkByName(ctx, cluster, spec.Name)
	if err != nil {
		return Network{}, err
	}
	if existing == nil {
		if err := d.createNetwork(ctx, cluster, spec); err != nil {
			return Network{}, err
		}
		if existing, err = d.networkByName(ctx, cluster, spec.Name); err != nil {
			return Network{}, err
		}
		if existing == nil {
			return Network{}, fmt.Errorf("network %s of cluster %s disappeared right after it was created", spec.Name, cluster)
		}
	}
	if !hasLabels(existing.Labels, cluster.Labels()) {
		return Network{}, fmt.Errorf("network %s exists but does not belong to cluster %s: %w", spec.Name, cluster, ErrConflict)
	}
	return networkOf(existing.Network), nil
}

// networkByName returns the network named name, preferring the cluster's if Docker holds
// several (engines before API 1.44 allow duplicate names), or nil.
func (d *Docker) networkByName(ctx context.Context, cluster Cluster, name string) (*networktypes.Summary, error) {
	// The name filter matches substrings: compare exactly.
	list, err := d.client.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("name", name)})
	if err != nil {
		return nil, fmt.Errorf("failed to look up network %s of cluster %s: %w", name, cluster, err)
	}
	var found *networktypes.Summary
	for i := range list.Items {
		n := &list.Items[i]
		if n.Name != name {
			continue
		}
		if found == nil || hasLabels(n.Labels, cluster.Labels()) {
			found = n
		}
	}
	return found, nil
}

func (d *Docker) createNetwork(ctx context.Context, cluster Cluster, spec NetworkSpec) error {
	if !spec.Subnet.IsValid() {
		// Docker gives containers fixed addresses only on networks whose subnet was asked
		// for: ask Docker for a free one, then ask for it.
		subnet, err := d.freeSubnet(ctx, cluster, spec.Name+"-subnet-probe")
		if err != nil {
			return err
		}
		spec.Subnet = subnet
	}
	opts := client.NetworkCreateOptions{Driver: "bridge", Labels: cluster.Labels()}
	opts.IPAM = &networktypes.IPAM{Config: []networktypes.IPAMConfig{{Subnet: spec.Subnet.Masked()}}}
	if spec.MTU > 0 {
		opts.Options = map[string]string{mtuOption: strconv.Itoa(spec.MTU)}
	}
	_, err := d.client.NetworkCreate(ctx, spec.Name, opts)
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsConflict(err):
		// Created meanwhile: the caller finds it and checks whose it is.
		return nil
	case strings.Contains(strings.ToLower(err.Error()), "pool overlaps"):
		holder := "an existing network"
		if others, listErr := d.client.NetworkList(ctx, client.NetworkListOptions{}); listErr == nil {
			for _, n := range others.Items {
				if subnet := ipv4Subnet(n.IPAM); subnet.IsValid() && subnet.Overlaps(spec.Subnet) {
					holder = fmt.Sprintf("subnet %s of network %s", subnet, n.Name)
					break
				}
			}
		}
		return fmt.Errorf("failed to create network %s of cluster %s: subnet %s overlaps %s: %w: %w",
			spec.Name, cluster, spec.Subnet, holder, ErrConflict, err)
	default:
		return fmt.Errorf("failed to create network %s of cluster %s: %w", spec.Name, cluster, err)
	}
}

// freeSubnet is a subnet Docker's address pools hold free now: that of a network named
// probe, created and removed again.
func (d *Docker) freeSubnet(ctx context.Context, cluster Cluster, probe string) (netip.Prefix, error) {
	if _, err := d.client.NetworkCreate(ctx, probe, client.NetworkCreateOptions{Driver: "bridge", Labels: cluster.Labels()}); err != nil && !cerrdefs.IsConflict(err) {
		return netip.Prefix{}, fmt.Errorf("failed to find a free subnet for cluster %s: %w", cluster, err)
	}
	found, err := d.networkByName(ctx, cluster, probe)
	if err != nil || found == nil {
		return netip.Prefix{}, fmt.Errorf("failed to find a free subnet for cluster %s: the probe network is gone: %w", cluster, err)
	}
	subnet := ipv4Subnet(found.IPAM)
	if _, err := d.client.NetworkRemove(ctx, found.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return netip.Prefix{}, fmt.Errorf("failed to remove probe network %s of cluster %s: %w", probe, cluster, err)
	}
	if !subnet.IsValid() {
		return netip.Prefix{}, fmt.Errorf("docker gave probe network %s of cluster %s no IPv4 subnet", probe, cluster)
	}
	return subnet, nil
}

// networkOf reads a network's IPv4 subnet and gateway; Docker's default gateway is the
// subnet's first address when the IPAM configuration does not name one.
func networkOf(n networktypes.Network) Network {
	out := Network{Name: n.Name}
	for _, c := range n.IPAM.Config {
		if c.Subnet.IsValid() && c.Subnet.Addr().Is4() {
			out.Subnet, out.Gateway = c.Subnet.Masked(), c.Gateway
			if !out.Gateway.IsValid() {
				out.Gateway = out.Subnet.Addr().Next()
			}
			break
		}
	}
	return out
}

func ipv4Subnet(ipam networktypes.IPAM) netip.Prefix {
	for _, c := range ipam.Config {
		if c.Subnet.IsValid() && c.Subnet.Addr().Is4() {
			return c.Subnet
		}
	}
	return netip.Prefix{}
}

// DeleteNetwork removes the cluster's networks. Docker refuses while containers are attached.
func (d *Docker) DeleteNetwork(ctx context.Context, cluster Cluster) error {
	list, err := d.client.NetworkList(ctx, client.NetworkListOptions{Filters: labelFilters(cluster.Labels())})
	if err != nil {
		return fmt.Errorf("failed to list networks of cluster %s: %w", cluster, err)
	}
	var errs []error
	for _, n := range list.Items {
		if _, err := d.client.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("failed to remove network %s of cluster %s: %w", n.Name, cluster, err))
		}
	}
	return errors.Join(errs...)
}

// containers lists every container, running or not, carrying labels.
func (d *Docker) containers(ctx context.Context, labels map[string]string) ([]containertypes.Summary, error) {
	list, err := d.client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilters(labels)})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// containerNamed returns the container named name, or nil.
func (d *Docker) containerNamed(ctx context.Context, name string) (*containertypes.Summary, error) {
	// Names carry a leading slash; the name filter is a regular expression.
	filters := client.Filters{}.Add("name", "^/"+regexp.QuoteMeta(name)+"$")
	list, err := d.client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil || len(list.Items) == 0 {
		return nil, err
	}
	return &list.Items[0], nil
}

// startContainer starts a container unless it runs. A container this call created is
// removed with its volumes when it cannot start, so that a retry starts clean.
func (d *Docker) startContainer(ctx context.Context, c startRequest) error {
	_, err := d.client.ContainerStart(ctx, c.id, client.ContainerStartOptions{})
	if err == nil {
		return nil
	}
	if c.created {
		// Also when ctx is done: nothing half-made stays behind.
		if rmErr := d.removeContainer(context.WithoutCancel(ctx), c.id, 0); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
	}
	if taken := takenResource(err, c.hostPorts, c.address); taken != "" {
		// Not the daemon's message: it names the endpoint of this attempt, and a message
		// that changes with every attempt would make every retry a new condition.
		return fmt.Errorf("failed to start container %s of cluster %s: %s: %w", c.name, c.cluster, taken, ErrConflict)
	}
	return fmt.Errorf("failed to start container %s of cluster %s: %w", c.name, c.cluster, err)
}

type startRequest struct {
	id, name string
	cluster  Cluster
	// created is true when this call created the container.
	created bool
	// hostPorts and address are what the container takes on the host and its network.
	hostPorts []int
	address   netip.Addr
}

// hostPortInMessage finds ":<port>" not followed by another digit.
var hostPortInMessage = regexp.MustCompile(`:(\d+)\b`)

// takenResource says what a start error says is taken: one of hostPorts, the container's
// address, or "" when the error is about something else. Docker says "port is already
// allocated" when another container publishes the port and "address already in use" when
// another process listens on it or the static IP is held by another container.
func takenResource(err error, hostPorts []int, address netip.Addr) string {
	msg := err.Error()
	if !strings.Contains(msg, "port is already allocated") && !strings.Contains(strings.ToLower(msg), "address already in use") {
		return ""
	}
	var named []string
	for _, m := range hostPortInMessage.FindAllStringSubmatch(msg, -1) {
		if p, _ := strconv.Atoi(m[1]); slices.Contains(hostPorts, p) && !slices.Contains(named, m[1]) {
			named = append(named, m[1])
		}
	}
	switch {
	case len(named) == 1:
		return "host port " + named[0] + " is already in use"
	case len(named) > 1:
		return "host ports " + strings.Join(named, ", ") + " are already in use"
	case address.IsValid() && strings.Contains(msg, "Address already in use"):
		return "address " + address.String() + " is already in use"
	case len(hostPorts) > 0:
		return fmt.Sprintf("one of the host ports %v is already in use", hostPorts)
	default:
		return "an address or port it needs is already in use"
	}
}

// stopContainer stops a container: SIGTERM, then SIGKILL after timeoutSeconds.
func (d *Docker) stopContainer(ctx context.Context, id string, timeoutSeconds int) error {
	_, err := d.client.ContainerStop(ctx, id, client.ContainerStopOptions{Signal: "SIGTERM", Timeout: &timeoutSeconds})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}

// removeContainer stops a container within timeoutSeconds (killing it at once when 0) and
// removes it with its anonymous volumes.
func (d *Docker) removeContainer(ctx context.Context, id string, timeoutSeconds int) error {
	if timeoutSeconds > 0 {
		if err := d.stopContainer(ctx, id, timeoutSeconds); err != nil {
			return err
		}
	}
	_, err := d.client.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}

// HasImage says whether the engine holds image, without pulling it.
func (d *Docker) HasImage(ctx context.Context, image string) (bool, error) {
	_, err := d.client.ImageInspect(ctx, image)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// ensureImage pulls image unless the engine holds it: the Engine API, unlike `docker run`,
// does not pull on create.
func (d *Docker) ensureImage(ctx context.Context, image string) error {
	_, err := d.client.ImageInspect(ctx, image)
	if err == nil || !cerrdefs.IsNotFound(err) {
		return err
	}
	pull, err := d.client.ImagePull(ctx, image, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("failed to pull image %s: %w", image, err)
	}
	err = errors.Join(pull.Wait(ctx), pull.Close())
	if err != nil {
		return fmt.Errorf("failed to pull image %s: %w", image, err)
	}
	return nil
}

// endpoint places a container on network, at address when it is valid.
func endpoint(network string, address netip.Addr) *networktypes.NetworkingConfig {
	settings := &networktypes.EndpointSettings{}
	if address.IsValid() {
		settings.IPAMConfig = &networktypes.EndpointIPAMConfig{IPv4Address: address}
	}
	return &networktypes.NetworkingConfig{EndpointsConfig: map[string]*networktypes.EndpointSettings{network: settings}}
}

// containerAddress is a container's IPv4 address on the network it was created on (its
// network mode): the address it holds, or while it is stopped the static one it asked for.
func containerAddress(networkMode string, networks map[string]*networktypes.EndpointSettings) netip.Addr {
	candidates := make([]*networktypes.EndpointSettings, 0, len(networks)+1)
	candidates = append(candidates, networks[networkMode])
	for _, name := range slices.Sorted(maps.Keys(networks)) {
		candidates = append(candidates, networks[name])
	}
	for _, e := range candidates {
		switch {
		case e == nil:
		case e.IPAddress.Is4():
			return e.IPAddress
		case e.IPAMConfig != nil && e.IPAMConfig.IPv4Address.Is4():
			return e.IPAMConfig.IPv4Address
		}
	}
	return netip.Addr{}
}

// containerName is a container's name without Docker's leading slash.
func containerName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return strings.TrimPrefix(names[0], "/")
}

func labelFilters(labels map[string]string) client.Filters {
	f := client.Filters{}
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	return f
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
