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
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	containertypes "github.com/moby/moby/api/types/container"
	mounttypes "github.com/moby/moby/api/types/mount"
	networktypes "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// nodeStopSeconds is how long Talos gets to shut down after SIGTERM before it is killed.
const nodeStopSeconds = 30

// CreateNode creates and starts the container of spec.Machine the way `talosctl cluster
// create` runs the Talos image, unless it exists: an existing one is started if stopped.
// Talos keeps its state in named volumes labelled like the container, so that DeleteNode
// finds them.
func (d *Docker) CreateNode(ctx context.Context, spec NodeSpec) (Node, error) {
	if spec.Role != RoleControlPlane && spec.Role != RoleWorker {
		return Node{}, fmt.Errorf("container %s of cluster %s has role %q, not %s or %s", spec.Name, spec.Cluster, spec.Role, RoleControlPlane, RoleWorker)
	}
	existing, err := d.node(ctx, spec.Cluster, spec.Machine)
	if err != nil {
		return Node{}, fmt.Errorf("failed to look up container of Machine %s of cluster %s: %w", spec.Machine, spec.Cluster, err)
	}
	if existing != nil {
		// One that never started is left from a failed call: removed too if it cannot start.
		return d.startNode(ctx, spec, existing, existing.State == containertypes.StateCreated)
	}
	if other, err := d.containerNamed(ctx, spec.Name); err != nil || other != nil {
		if err != nil {
			return Node{}, fmt.Errorf("failed to look up container %s of cluster %s: %w", spec.Name, spec.Cluster, err)
		}
		return Node{}, fmt.Errorf("container %s exists but does not belong to Machine %s of cluster %s: %w", spec.Name, spec.Machine, spec.Cluster, ErrConflict)
	}

	config, host, err := nodeContainer(spec, d.privileged)
	if err != nil {
		return Node{}, err
	}
	if err := d.ensureImage(ctx, spec.Image); err != nil {
		return Node{}, fmt.Errorf("failed to create container %s of cluster %s: %w", spec.Name, spec.Cluster, err)
	}
	if err := d.createNodeVolumes(ctx, spec, host.Mounts); err != nil {
		return Node{}, errors.Join(err, d.removeVolumes(context.WithoutCancel(ctx), spec.Cluster, spec.Machine))
	}
	created, err := d.client.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: spec.Name, Config: config, HostConfig: host, NetworkingConfig: endpoint(spec.Network, spec.Address),
	})
	if cerrdefs.IsConflict(err) {
		// The name was taken meanwhile: by this Machine's container is fine.
		if existing, lookupErr := d.node(ctx, spec.Cluster, spec.Machine); lookupErr == nil && existing != nil {
			return d.startNode(ctx, spec, existing, false)
		}
		err = fmt.Errorf("failed to create container %s of cluster %s: the name is taken: %w: %w", spec.Name, spec.Cluster, ErrConflict, err)
	} else if err != nil {
		err = fmt.Errorf("failed to create container %s of cluster %s: %w", spec.Name, spec.Cluster, err)
	}
	if err != nil {
		return Node{}, errors.Join(err, d.removeVolumes(context.WithoutCancel(ctx), spec.Cluster, spec.Machine))
	}
	return d.startNode(ctx, spec, &containertypes.Summary{ID: created.ID, State: containertypes.StateCreated}, true)
}

// startNode starts the Machine's container c unless it runs and returns it. A new container
// (created) is removed with all its volumes when it cannot start, so that a retry starts clean.
func (d *Docker) startNode(ctx context.Context, spec NodeSpec, c *containertypes.Summary, created bool) (Node, error) {
	if running(c.State) {
		return nodeOf(*c), nil
	}
	var hostPorts []int
	for _, p := range spec.Ports {
		if p.HostPort > 0 {
			hostPorts = append(hostPorts, p.HostPort)
		}
	}
	err := d.startContainer(ctx, startRequest{
		id: c.ID, name: spec.Name, cluster: spec.Cluster, created: created, hostPorts: hostPorts, address: spec.Address,
	})
	if err != nil {
		if created {
			if rmErr := d.removeVolumes(context.WithoutCancel(ctx), spec.Cluster, spec.Machine); rmErr != nil {
				err = errors.Join(err, rmErr)
			}
		}
		return Node{}, err
	}
	existing, err := d.node(ctx, spec.Cluster, spec.Machine)
	if err != nil {
		return Node{}, fmt.Errorf("failed to look up container %s of cluster %s: %w", spec.Name, spec.Cluster, err)
	}
	if existing == nil {
		return Node{}, fmt.Errorf("container %s of cluster %s disappeared right after it was started", spec.Name, spec.Cluster)
	}
	return nodeOf(*existing), nil
}

// nodeContainer is the container of a Talos node: the settings of `talosctl cluster create`.
func nodeContainer(spec NodeSpec, privileged bool) (*containertypes.Config, *containertypes.HostConfig, error) {
	paths, err := talosVolumePaths(spec.TalosVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("container %s of cluster %s: %w", spec.Name, spec.Cluster, err)
	}
	mounts := make([]mounttypes.Mount, 0, len(paths)+len(spec.Mounts))
	for _, p := range paths {
		mounts = append(mounts, mounttypes.Mount{Type: mounttypes.TypeVolume, Source: nodeVolumeName(spec.Name, p), Target: p})
	}
	for _, m := range spec.Mounts {
		mounts = append(mounts, mounttypes.Mount{Type: mounttypes.TypeBind, Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	exposed, bindings, err := portBindings(spec.Ports)
	if err != nil {
		return nil, nil, fmt.Errorf("container %s of cluster %s: %w", spec.Name, spec.Cluster, err)
	}
	// PLATFORM, TALOSSKU and USERDATA are the provider's.
	env := maps.Clone(spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, map[string]string{
		"PLATFORM": "container",
		"TALOSSKU": talosSKU(spec.NanoCPUs, spec.MemoryBytes),
		"USERDATA": base64.StdEncoding.EncodeToString(spec.UserData),
	})
	config := &containertypes.Config{
		Hostname:     spec.Name,
		Image:        spec.Image,
		Env:          envList(env),
		Labels:       nodeLabels(spec.Cluster, spec.Role, spec.Machine),
		ExposedPorts: exposed,
	}
	host := &containertypes.HostConfig{
		NetworkMode:    containertypes.NetworkMode(spec.Network),
		PortBindings:   bindings,
		RestartPolicy:  containertypes.RestartPolicy{Name: containertypes.RestartPolicyDisabled},
		Privileged:     privileged,
		SecurityOpt:    []string{"seccomp=unconfined"},
		ReadonlyRootfs: true,
		Tmpfs:          map[string]string{"/run": "rw", "/system": "rw", "/tmp": "rw"},
		Sysctls:        map[string]string{"net.ipv6.conf.all.disable_ipv6": "0"},
		Resources:      containertypes.Resources{NanoCPUs: spec.NanoCPUs, Memory: spec.MemoryBytes},
		Mounts:         mounts,
	}
	return config, host, nil
}

// createNodeVolumes creates the named volumes among mounts, labelled like the node.
func (d *Docker) createNodeVolumes(ctx context.Context, spec NodeSpec, mounts []mounttypes.Mount) error {
	labels := nodeLabels(spec.Cluster, spec.Role, spec.Machine)
	for _, m := range mounts {
		if m.Type != mounttypes.TypeVolume {
			continue
		}
		// Creating an existing volume returns it as it is.
		v, err := d.client.VolumeCreate(ctx, client.VolumeCreateOptions{Name: m.Source, Labels: labels})
		if err != nil {
			return fmt.Errorf("failed to create volume %s of cluster %s: %w", m.Source, spec.Cluster, err)
		}
		if !hasLabels(v.Volume.Labels, nodeLabels(spec.Cluster, "", spec.Machine)) {
			return fmt.Errorf("volume %s exists but does not belong to Machine %s of cluster %s: %w", m.Source, spec.Machine, spec.Cluster, ErrConflict)
		}
	}
	return nil
}

// Nodes lists the containers of the cluster's Machines.
func (d *Docker) Nodes(ctx context.Context, cluster Cluster) ([]Node, error) {
	list, err := d.containers(ctx, cluster.Labels())
	if err != nil {
		return nil, fmt.Errorf("failed to list containers of cluster %s: %w", cluster, err)
	}
	var nodes []Node
	for _, c := range list {
		if role := c.Labels[LabelRole]; role == RoleControlPlane || role == RoleWorker {
			nodes = append(nodes, nodeOf(c))
		}
	}
	return nodes, nil
}

// DeleteNode stops the Machine's container gracefully, removes it and its volumes.
func (d *Docker) DeleteNode(ctx context.Context, cluster Cluster, machine string) error {
	list, err := d.containers(ctx, nodeLabels(cluster, "", machine))
	if err != nil {
		return fmt.Errorf("failed to list containers of Machine %s of cluster %s: %w", machine, cluster, err)
	}
	for _, c := range list {
		if err := d.removeContainer(ctx, c.ID, nodeStopSeconds); err != nil {
			return fmt.Errorf("failed to remove container %s of cluster %s: %w", containerName(c.Names), cluster, err)
		}
	}
	return d.removeVolumes(ctx, cluster, machine)
}

// removeVolumes removes the named volumes of the Machine's node.
func (d *Docker) removeVolumes(ctx context.Context, cluster Cluster, machine string) error {
	list, err := d.client.VolumeList(ctx, client.VolumeListOptions{Filters: labelFilters(nodeLabels(cluster, "", machine))})
	if err != nil {
		return fmt.Errorf("failed to list volumes of Machine %s of cluster %s: %w", machine, cluster, err)
	}
	var errs []error
	for _, v := range list.Items {
		if _, err := d.client.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("failed to remove volume %s of cluster %s: %w", v.Name, cluster, err))
		}
	}
	return errors.Join(errs...)
}

// node returns the container of the cluster's Machine, or nil.
func (d *Docker) node(ctx context.Context, cluster Cluster, machine string) (*containertypes.Summary, error) {
	list, err := d.containers(ctx, nodeLabels(cluster, "", machine))
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return &list[0], nil
}

func nodeOf(c containertypes.Summary) Node {
	var networks map[string]*networktypes.EndpointSettings
	if c.NetworkSettings != nil {
		networks = c.NetworkSettings.Networks
	}
	return Node{
		Name:    containerName(c.Names),
		Machine: c.Labels[LabelMachine],
		Role:    c.Labels[LabelRole],
		Address: containerAddress(c.HostConfig.NetworkMode, networks),
		Running: running(c.State),
	}
}

// running is true for a container that runs, and for one that is paused: a paused container
// is frozen, not stopped. Docker refuses to start it, and it goes on where it was once
// unpaused; a node that answers nothing meanwhile is the control plane's and health checks'
// to judge.
func running(state containertypes.ContainerState) bool {
	return state == containertypes.StateRunning || state == containertypes.StatePaused
}

// nodeLabels are the labels of a Machine's container and volumes; an empty role is left
// out, which makes them a filter for any role.
func nodeLabels(cluster Cluster, role, machine string) map[string]string {
	labels := cluster.Labels()
	labels[LabelMachine] = machine
	if role != "" {
		labels[LabelRole] = role
	}
	return labels
}

// talosVolumePaths are where Talos keeps state on its read-only root: up to Talos 1.13 it
// also writes to /etc/cni, /etc/kubernetes and /usr/libexec/kubernetes, from 1.14 on only
// to /var, /system/state and /opt. An empty version means 1.13.
func talosVolumePaths(version string) ([]string, error) {
	major, minor := 1, 13
	if version != "" {
		fields := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
		var errMajor, errMinor error
		major, errMajor = strconv.Atoi(fields[0])
		if len(fields) < 2 {
			errMinor = errors.New("no minor version")
		} else {
			minor, errMinor = strconv.Atoi(strings.SplitN(fields[1], "-", 2)[0])
		}
		if err := errors.Join(errMajor, errMinor); err != nil {
			return nil, fmt.Errorf("invalid Talos version %q: %w", version, err)
		}
	}
	if major > 1 || (major == 1 && minor >= 14) {
		return []string{"/var", "/system/state", "/opt"}, nil
	}
	return []string{"/var", "/system/state", "/etc/cni", "/etc/kubernetes", "/usr/libexec/kubernetes", "/opt"}, nil
}

// nodeVolumeName is the volume of a node's path: cp-0 and /system/state make cp-0-system-state.
func nodeVolumeName(container, path string) string {
	return container + strings.ReplaceAll(path, "/", "-")
}

// talosSKU is the TALOSSKU Talos reads its resources from: <cpus>CPU-<MiB>RAM, with
// talosctl's defaults (2 CPUs, 2048 MiB) where the node is unlimited.
func talosSKU(nanoCPUs, memoryBytes int64) string {
	const nano, mib = 1_000_000_000, 1 << 20
	cpus, memory := int64(2), int64(2048)
	if nanoCPUs > 0 {
		cpus = (nanoCPUs + nano - 1) / nano
	}
	if memoryBytes > 0 {
		memory = memoryBytes / mib
	}
	return fmt.Sprintf("%dCPU-%dRAM", cpus, memory)
}

// portBindings publishes ports on the host.
func portBindings(ports []PortMapping) (networktypes.PortSet, networktypes.PortMap, error) {
	if len(ports) == 0 {
		return nil, nil, nil
	}
	exposed, bindings := networktypes.PortSet{}, networktypes.PortMap{}
	for _, p := range ports {
		protocol := strings.ToLower(p.Protocol)
		if protocol == "" {
			protocol = string(networktypes.TCP)
		}
		if p.ContainerPort < 1 || p.ContainerPort > 65535 || p.HostPort < 0 || p.HostPort > 65535 {
			return nil, nil, fmt.Errorf("invalid port mapping %d:%d/%s", p.HostPort, p.ContainerPort, protocol)
		}
		port, ok := networktypes.PortFrom(uint16(p.ContainerPort), networktypes.IPProtocol(protocol))
		if !ok {
			return nil, nil, fmt.Errorf("invalid protocol %q of port %d", protocol, p.ContainerPort)
		}
		var hostIP netip.Addr
		if p.HostIP != "" {
			var err error
			if hostIP, err = netip.ParseAddr(p.HostIP); err != nil {
				return nil, nil, fmt.Errorf("invalid host IP of port %d: %w", p.ContainerPort, err)
			}
		}
		exposed[port] = struct{}{}
		bindings[port] = append(bindings[port], networktypes.PortBinding{HostIP: hostIP, HostPort: hostPortString(p.HostPort)})
	}
	return exposed, bindings, nil
}

// hostPortString is a published port's host port; empty lets Docker choose a free one.
func hostPortString(port int) string {
	if port == 0 {
		return ""
	}
	return strconv.Itoa(port)
}

// envList is env as KEY=value, sorted by key.
func envList(env map[string]string) []string {
	list := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		list = append(list, k+"="+env[k])
	}
	return list
}
