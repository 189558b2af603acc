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
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	containertypes "github.com/moby/moby/api/types/container"
	networktypes "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/talon-capi/talon/infrastructure/docker/lb"
)

// The load-balancer container runs `talon lb`, which reads its backends from a file and
// reads it again on SIGHUP: SetBackends replaces the file through the Engine API.
const (
	lbBackendsFile = "/run/talon-lb/backends"
	lbStopSeconds  = 10
)

// apiServerPort is the load balancer's published port.
var apiServerPort, _ = networktypes.PortFrom(APIServerPort, networktypes.TCP)

// EnsureLoadBalancer creates and starts the cluster's load-balancer container unless it
// exists: an existing one is started if stopped.
func (d *Docker) EnsureLoadBalancer(ctx context.Context, spec LoadBalancerSpec) (LoadBalancer, error) {
	existing, err := d.loadBalancer(ctx, spec.Cluster)
	if err != nil {
		return LoadBalancer{}, err
	}
	if existing == nil {
		id, err := d.createLoadBalancer(ctx, spec)
		if err != nil {
			return LoadBalancer{}, err
		}
		existing = &containertypes.Summary{ID: id, Names: []string{spec.Name}, State: containertypes.StateCreated}
	}
	if existing.State != containertypes.StateRunning {
		var hostPorts []int
		if spec.HostPort > 0 {
			hostPorts = []int{spec.HostPort}
		}
		err := d.startContainer(ctx, startRequest{
			id: existing.ID, name: containerName(existing.Names), cluster: spec.Cluster,
			created: existing.State == containertypes.StateCreated, hostPorts: hostPorts, address: spec.Address,
		})
		if err != nil {
			return LoadBalancer{}, err
		}
	}
	return d.inspectLoadBalancer(ctx, spec.Cluster, existing.ID)
}

// createLoadBalancer creates the load-balancer container with an empty backends file.
func (d *Docker) createLoadBalancer(ctx context.Context, spec LoadBalancerSpec) (string, error) {
	if other, err := d.containerNamed(ctx, spec.Name); err != nil || other != nil {
		if err != nil {
			return "", fmt.Errorf("failed to look up container %s of cluster %s: %w", spec.Name, spec.Cluster, err)
		}
		return "", fmt.Errorf("container %s exists but is not the load balancer of cluster %s: %w", spec.Name, spec.Cluster, ErrConflict)
	}
	if spec.HostPort < 0 || spec.HostPort > 65535 {
		return "", fmt.Errorf("invalid host port %d of load balancer %s of cluster %s", spec.HostPort, spec.Name, spec.Cluster)
	}
	if err := d.ensureImage(ctx, spec.Image); err != nil {
		return "", fmt.Errorf("failed to create container %s of cluster %s: %w", spec.Name, spec.Cluster, err)
	}
	trustdPort, _ := networktypes.PortFrom(TrustdPort, networktypes.TCP)
	created, err := d.client.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: spec.Name,
		Config: &containertypes.Config{
			Image: spec.Image,
			Entrypoint: []string{"/usr/local/bin/talon", "lb", "--address", "0.0.0.0",
				"--port", strconv.Itoa(APIServerPort), "--port", strconv.Itoa(TrustdPort), "--backends-file", lbBackendsFile},
			Labels:       lbLabels(spec.Cluster),
			ExposedPorts: networktypes.PortSet{apiServerPort: {}, trustdPort: {}},
		},
		HostConfig: &containertypes.HostConfig{
			NetworkMode:   containertypes.NetworkMode(spec.Network),
			PortBindings:  networktypes.PortMap{apiServerPort: {{HostPort: hostPortString(spec.HostPort)}}},
			RestartPolicy: containertypes.RestartPolicy{Name: containertypes.RestartPolicyUnlessStopped},
		},
		NetworkingConfig: endpoint(spec.Network, spec.Address),
	})
	if cerrdefs.IsConflict(err) {
		return "", fmt.Errorf("failed to create container %s of cluster %s: the name is taken: %w: %w", spec.Name, spec.Cluster, ErrConflict, err)
	}
	if err != nil {
		return "", fmt.Errorf("failed to create container %s of cluster %s: %w", spec.Name, spec.Cluster, err)
	}
	// `talon lb` starts with the file in place.
	if err := d.writeBackends(ctx, created.ID, nil); err != nil {
		err = fmt.Errorf("failed to write backends of load balancer %s of cluster %s: %w", spec.Name, spec.Cluster, err)
		return "", errors.Join(err, d.removeContainer(context.WithoutCancel(ctx), created.ID, 0))
	}
	return created.ID, nil
}

func (d *Docker) inspectLoadBalancer(ctx context.Context, cluster Cluster, id string) (LoadBalancer, error) {
	inspected, err := d.client.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return LoadBalancer{}, fmt.Errorf("failed to inspect load balancer of cluster %s: %w", cluster, err)
	}
	c := inspected.Container
	out := LoadBalancer{Name: strings.TrimPrefix(c.Name, "/")}
	if c.HostConfig != nil && c.NetworkSettings != nil {
		out.Address = containerAddress(string(c.HostConfig.NetworkMode), c.NetworkSettings.Networks)
	}
	// The port Docker chose is known while the container runs; a fixed one always.
	var bindings []networktypes.PortBinding
	if c.NetworkSettings != nil {
		bindings = c.NetworkSettings.Ports[apiServerPort]
	}
	if c.HostConfig != nil {
		bindings = append(bindings, c.HostConfig.PortBindings[apiServerPort]...)
	}
	for _, b := range bindings {
		if port, err := strconv.Atoi(b.HostPort); err == nil && port > 0 {
			out.HostPort = port
			break
		}
	}
	if out.Backends, err = d.readBackends(ctx, id); err != nil {
		return LoadBalancer{}, fmt.Errorf("failed to read backends of load balancer %s of cluster %s: %w", out.Name, cluster, err)
	}
	return out, nil
}

// SetBackends replaces the backends file of the cluster's load balancer unless it already
// lists backends, and tells `talon lb` with SIGHUP.
func (d *Docker) SetBackends(ctx context.Context, cluster Cluster, backends []netip.Addr) error {
	c, err := d.loadBalancer(ctx, cluster)
	if err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("cluster %s has no load balancer", cluster)
	}
	name := containerName(c.Names)
	want := slices.Compact(slices.SortedFunc(slices.Values(backends), netip.Addr.Compare))
	if current, err := d.readBackends(ctx, c.ID); err == nil && slices.Equal(current, want) {
		return nil
	}
	if err := d.writeBackends(ctx, c.ID, want); err != nil {
		return fmt.Errorf("failed to write backends of load balancer %s of cluster %s: %w", name, cluster, err)
	}
	if c.State != containertypes.StateRunning {
		return nil // it reads the file when it starts
	}
	_, err = d.client.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "SIGHUP"})
	if err != nil && !cerrdefs.IsConflict(err) && !cerrdefs.IsNotFound(err) { // conflict: not running any more
		return fmt.Errorf("failed to signal load balancer %s of cluster %s: %w", name, cluster, err)
	}
	return nil
}

// readBackends reads the backends file of a load-balancer container; none if it is missing.
func (d *Docker) readBackends(ctx context.Context, id string) ([]netip.Addr, error) {
	copied, err := d.client.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: lbBackendsFile})
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = copied.Content.Close() }()
	archive := tar.NewReader(copied.Content)
	if _, err := archive.Next(); err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", lbBackendsFile, err)
	}
	backends, err := lb.ReadBackends(archive)
	if err != nil {
		// A file that does not parse serves no backend; it is rewritten with the right ones.
		return nil, nil
	}
	return backends, nil
}

// writeBackends replaces the backends file of a load-balancer container, created or not.
func (d *Docker) writeBackends(ctx context.Context, id string, backends []netip.Addr) error {
	var content strings.Builder
	for _, b := range backends {
		if !b.IsValid() {
			return fmt.Errorf("refusing to write an invalid backend address into load balancer %s", id)
		}
		content.WriteString(b.String() + "\n")
	}
	// The archive is extracted at /; Docker creates missing parents of the directory.
	var archive bytes.Buffer
	w := tar.NewWriter(&archive)
	dir, now := strings.TrimPrefix(path.Dir(lbBackendsFile), "/")+"/", time.Now()
	headers := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: now},
		{Typeflag: tar.TypeReg, Name: dir + path.Base(lbBackendsFile), Mode: 0o644, Size: int64(content.Len()), ModTime: now},
	}
	for _, h := range headers {
		if err := w.WriteHeader(h); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, content.String()); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	_, err := d.client.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: &archive})
	return err
}

// DeleteLoadBalancer stops and removes the cluster's load-balancer container.
func (d *Docker) DeleteLoadBalancer(ctx context.Context, cluster Cluster) error {
	list, err := d.containers(ctx, lbLabels(cluster))
	if err != nil {
		return fmt.Errorf("failed to list load balancers of cluster %s: %w", cluster, err)
	}
	var errs []error
	for _, c := range list {
		if err := d.removeContainer(ctx, c.ID, lbStopSeconds); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove load balancer %s of cluster %s: %w", containerName(c.Names), cluster, err))
		}
	}
	return errors.Join(errs...)
}

// loadBalancer returns the cluster's load-balancer container, or nil.
func (d *Docker) loadBalancer(ctx context.Context, cluster Cluster) (*containertypes.Summary, error) {
	list, err := d.containers(ctx, lbLabels(cluster))
	if err != nil {
		return nil, fmt.Errorf("failed to look up load balancer of cluster %s: %w", cluster, err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	return &list[0], nil
}

func lbLabels(cluster Cluster) map[string]string {
	labels := cluster.Labels()
	labels[LabelRole] = RoleLoadBalancer
	return labels
}
