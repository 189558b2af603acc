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

package sim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/registry"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	machinetype "github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file is the node's COSI resource state, what `talosctl get`, `talosctl health` and
// `talosctl upgrade-k8s` read through the cosi.resource.State API. Like machined's, it is an
// in-memory state of machinery's own resource types, registered with their definitions in
// the meta namespace; the simulator updates the resources as the node changes (its config,
// its services, its etcd member, its static pods) instead of running Talos' controllers.

// simResources are the resource types the simulator publishes and registers.
var simResources = []meta.ResourceWithRD{
	&block.Disk{},
	&block.SystemDisk{},
	&block.VolumeStatus{},
	&cluster.Member{},
	&config.MachineConfig{},
	&config.MachineType{},
	&etcd.Member{},
	&k8s.APIServerConfig{},
	&k8s.BootstrapManifestsConfig{},
	&k8s.ControllerManagerConfig{},
	&k8s.KubeletSpec{},
	&k8s.Manifest{},
	&k8s.Nodename{},
	&k8s.SchedulerConfig{},
	&k8s.StaticPod{},
	&k8s.StaticPodStatus{},
	&network.HostnameStatus{},
	&network.NodeAddress{},
	&runtime.Diagnostic{},
	&runtime.MachineStatus{},
	&runtime.Version{},
	&v1alpha1.Service{},
}

// newResourceState is an empty node state with Talos' namespaces and the simulator's
// resource definitions registered.
func newResourceState(ctx context.Context) (state.State, error) {
	// The history depths of machined's own state (v1alpha2_state.go): a shallow start that
	// grows under watch load, rather than inmem's default of 100 events per resource type.
	build := inmem.NewStateWithOptions(inmem.WithHistoryInitialCapacity(8), inmem.WithHistoryMaxCapacity(1024), inmem.WithHistoryGap(4))
	st := state.WrapCore(namespaced.NewState(func(ns resource.Namespace) state.CoreState { return build(ns) }))
	namespaces := registry.NewNamespaceRegistry(st)
	if err := namespaces.RegisterDefault(ctx); err != nil {
		return nil, err
	}
	for _, ns := range []struct{ name, description string }{
		{v1alpha1.NamespaceName, "Talos v1alpha1 subsystems glue resources."},
		{cluster.NamespaceName, "Cluster configuration and discovery resources."},
		{config.NamespaceName, "Talos node configuration."},
		{etcd.NamespaceName, "etcd resources."},
		{k8s.NamespaceName, "Kubernetes all node types resources."},
		{k8s.ControlPlaneNamespaceName, "Kubernetes control plane resources."},
		{network.NamespaceName, "Networking resources."},
		{runtime.NamespaceName, "Talos runtime resources."},
	} {
		if err := namespaces.Register(ctx, ns.name, ns.description); err != nil && !state.IsConflictError(err) {
			return nil, err
		}
	}
	definitions := registry.NewResourceRegistry(st)
	if err := definitions.RegisterDefault(ctx); err != nil {
		return nil, err
	}
	for _, r := range simResources {
		if err := definitions.Register(ctx, r); err != nil {
			return nil, fmt.Errorf("failed to register %T: %w", r, err)
		}
	}
	return st, nil
}

// accessPolicy is what the API lets a caller do with the node's state, as Talos' access
// policy: nothing but reads, sensitive resources (secrets, the machine config) to admins
// only (never in maintenance mode, where every caller is a reader), and only types and
// namespaces the node knows.
func (n *Node) accessPolicy() state.FilteringRule {
	st := n.res
	return func(ctx context.Context, access state.Access) error {
		if !access.Verb.Readonly() {
			return status.Error(codes.PermissionDenied, "write access is not allowed")
		}
		rd, err := safe.StateGet[*meta.ResourceDefinition](ctx, st,
			resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(access.ResourceType), resource.VersionUndefined))
		if err != nil {
			if state.IsNotFoundError(err) {
				return status.Errorf(codes.PermissionDenied, "resource type %q is not supported", access.ResourceType)
			}
			return err
		}
		if rd.TypedSpec().Sensitivity == meta.Sensitive {
			roles := role.MakeSet(role.Reader)
			if n.configured() {
				var err error
				if roles, err = callerRoles(ctx); err != nil {
					return err
				}
			}
			if !roles.Includes(role.Admin) {
				return status.Error(codes.PermissionDenied, "not authorized")
			}
		}
		if _, err := safe.StateGet[*meta.Namespace](ctx, st,
			resource.NewMetadata(meta.NamespaceName, meta.NamespaceType, access.ResourceNamespace, resource.VersionUndefined)); err != nil {
			if state.IsNotFoundError(err) {
				return status.Errorf(codes.PermissionDenied, "namespace %q is not supported", access.ResourceNamespace)
			}
			return err
		}
		return nil
	}
}

// publish creates r or, when it exists, updates it with set applied. Publishing is
// best-effort bookkeeping of an in-memory state: a failure is logged, never fatal.
func publish[T resource.Resource](n *Node, r T, set func(T)) {
	err := safe.StateModify(context.Background(), n.res, r, func(r T) error {
		set(r)
		return nil
	})
	if err != nil {
		n.opts.Log.Error(err, "Failed to publish a resource", "type", r.Metadata().Type(), "id", r.Metadata().ID())
	}
}

// replace makes r the resource at its pointer, whatever was there: for resources whose spec
// is set whole (the machine config).
func (n *Node) replace(r resource.Resource) {
	ctx := context.Background()
	current, err := n.res.Get(ctx, r.Metadata())
	switch {
	case state.IsNotFoundError(err):
		err = n.res.Create(ctx, r)
	case err == nil:
		r.Metadata().SetVersion(current.Metadata().Version())
		err = n.res.Update(ctx, r)
	}
	if err != nil {
		n.opts.Log.Error(err, "Failed to publish a resource", "type", r.Metadata().Type(), "id", r.Metadata().ID())
	}
}

// unpublish removes the resource at ptr, if there is one.
func (n *Node) unpublish(ptr resource.Pointer) {
	if err := n.res.Destroy(context.Background(), ptr); err != nil && !state.IsNotFoundError(err) {
		n.opts.Log.Error(err, "Failed to remove a resource", "type", ptr.Type(), "id", ptr.ID())
	}
}

// forgetResources removes everything the simulator published: the node is off or wiped,
// and a new boot starts from nothing, as machined's in-memory state does.
func (n *Node) forgetResources() {
	ctx := context.Background()
	for _, r := range simResources {
		rd := r.ResourceDefinition()
		list, err := n.res.List(ctx, resource.NewMetadata(rd.DefaultNamespace, rd.Type, "", resource.VersionUndefined))
		if err != nil {
			continue
		}
		for _, item := range list.Items {
			n.unpublish(item.Metadata())
		}
	}
}

// publishBoot is what a node reports as it boots: its Talos version, its disks and the
// machine's stage.
func (n *Node) publishBoot() {
	publish(n, runtime.NewVersion(), func(v *runtime.Version) {
		v.TypedSpec().Name, v.TypedSpec().Version = "Talos", n.talosVersion()
	})
	n.publishDisks()
	n.setStage(runtime.MachineStageBooting)
}

// setStage records the machine's stage (booting, running, rebooting, ...) and its readiness.
func (n *Node) setStage(stage runtime.MachineStage) {
	n.mu.Lock()
	n.stage = stage
	n.mu.Unlock()
	n.publishMachineStatus()
}

// publishMachineStatus reports the machine's stage and, while it boots or runs, whether it is
// ready with the conditions it waits for, as machined's MachineStatus controller: the
// services a node needs running and healthy, its static pods ready, its Node Ready.
func (n *Node) publishMachineStatus() {
	n.mu.Lock()
	stage, cfg := n.stage, n.cfg
	n.mu.Unlock()
	var unmet []runtime.UnmetCondition
	if stage == runtime.MachineStageBooting || stage == runtime.MachineStageRunning {
		if problems := n.serviceProblems(cfg); problems != "" {
			unmet = append(unmet, runtime.UnmetCondition{Name: "services", Reason: problems})
		}
		if problems := n.staticPodProblems(); problems != "" {
			unmet = append(unmet, runtime.UnmetCondition{Name: "staticPods", Reason: problems})
		}
		if !n.nodeReady() {
			unmet = append(unmet, runtime.UnmetCondition{Name: "nodeReady", Reason: "node is not ready"})
		}
	}
	ready := (stage == runtime.MachineStageRunning || stage == runtime.MachineStageBooting) && len(unmet) == 0
	publish(n, runtime.NewMachineStatus(), func(s *runtime.MachineStatus) {
		s.TypedSpec().Stage = stage
		s.TypedSpec().Status.Ready = ready
		s.TypedSpec().Status.UnmetConditions = unmet
	})
	summary := fmt.Sprint(stage, ready, unmet)
	n.mu.Lock()
	changed := n.lastStatus != summary
	n.lastStatus = summary
	n.mu.Unlock()
	if changed {
		n.machineStatusEvent(stage, ready, unmet)
	}
}

// publishConfig reports a node's config and what follows from it: its type, hostname,
// Kubernetes node name and addresses.
func (n *Node) publishConfig(cfg talosconfig.Provider) {
	n.replace(config.NewMachineConfig(cfg))
	n.replace(config.NewMachineConfigWithID(cfg, config.PersistentID))
	publish(n, config.NewMachineType(), func(t *config.MachineType) { t.SetMachineType(cfg.Machine().Type()) })
	n.mu.Lock()
	host, domain := n.fqdnLocked()
	n.mu.Unlock()
	publish(n, network.NewHostnameStatus(network.NamespaceName, network.HostnameID), func(h *network.HostnameStatus) {
		h.TypedSpec().Hostname, h.TypedSpec().Domainname = host, domain
	})
	publish(n, k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID), func(r *k8s.Nodename) {
		r.TypedSpec().Nodename, r.TypedSpec().HostnameVersion = n.nodename(), "1"
	})
	publish(n, k8s.NewKubeletSpec(k8s.NamespaceName, k8s.KubeletID), func(k *k8s.KubeletSpec) {
		k.TypedSpec().Image, k.TypedSpec().ExpectedNodename = kubeletConfig(cfg).Image(), n.nodename()
	})
	if cfg.Machine().Type() == machinetype.TypeControlPlane {
		// The static pods' definitions, whose versions the mirror Pods carry (staticpods.go):
		// the control plane's configs, under the components' names (Talos 1.14 also derives
		// final-* ones from them, which the simulator does not publish).
		publish(n, k8s.NewAPIServerConfig(k8s.APIServerConfigID), func(c *k8s.APIServerConfig) {
			spec, apiServer := c.TypedSpec(), cfg.K8sAPIServerConfig()
			spec.Image, spec.ControlPlaneEndpoint, spec.AdvertisedAddress = apiServer.Image(), clusterEndpoint(cfg).String(), n.ip.String()
			spec.LocalPort, spec.ServiceCIDRs = apiServer.APIPort(), prefixStrings(k8sNetwork(cfg).ServiceCIDRs())
		})
		publish(n, k8s.NewControllerManagerConfig(k8s.ControllerManagerConfigID), func(c *k8s.ControllerManagerConfig) {
			c.TypedSpec().Enabled, c.TypedSpec().Image = true, cfg.K8sControllerManagerConfig().Image()
		})
		publish(n, k8s.NewSchedulerConfig(k8s.SchedulerConfigID), func(c *k8s.SchedulerConfig) {
			c.TypedSpec().Enabled, c.TypedSpec().Image = true, cfg.K8sSchedulerConfig().Image()
		})
		n.publishManifests(cfg)
		publish(n, k8s.NewBootstrapManifestsConfig(), func(m *k8s.BootstrapManifestsConfig) {
			spec, network := m.TypedSpec(), k8sNetwork(cfg)
			spec.Server, spec.ClusterDomain = clusterEndpoint(cfg).String(), network.DNSDomain()
			spec.PodCIDRs = prefixStrings(network.PodCIDRs())
			spec.ProxyEnabled, spec.ProxyImage = cfg.K8sProxyConfig().Enabled(), cfg.K8sProxyConfig().Image()
			spec.CoreDNSEnabled, spec.CoreDNSImage = cfg.K8sCoreDNSConfig().Enabled(), cfg.K8sCoreDNSConfig().Image()
			spec.CNIName = cniName(cfg)
		})
	}
	prefix := n.addressPrefix()
	for _, id := range []resource.ID{network.NodeAddressDefaultID, network.NodeAddressCurrentID, network.NodeAddressRoutedID, network.NodeAddressAccumulativeID} {
		publish(n, network.NewNodeAddress(network.NamespaceName, id), func(a *network.NodeAddress) {
			a.TypedSpec().Addresses = []netip.Prefix{prefix}
		})
	}
	// Discovery, offline: the node knows itself (its local affiliate), named after its Node.
	publish(n, cluster.NewMember(cluster.NamespaceName, n.nodename()), func(m *cluster.Member) {
		spec := m.TypedSpec()
		spec.NodeID, spec.Hostname, spec.MachineType = n.nodeID(), host, cfg.Machine().Type()
		spec.Addresses = []netip.Addr{prefix.Addr()}
		spec.OperatingSystem = "Talos (" + n.talosVersion() + ")"
	})
}

// addressPrefix is the node's address with the prefix length of the interface that holds
// it; a host's /32 when no interface does (it is forwarded to, or not up yet).
func (n *Node) addressPrefix() netip.Prefix {
	addr, _ := netip.AddrFromSlice(n.ip.To4())
	if !addr.IsValid() {
		addr, _ = netip.AddrFromSlice(n.ip)
	}
	if ifaces, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifaces {
			if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.Equal(n.ip) {
				ones, _ := ipnet.Mask.Size()
				return netip.PrefixFrom(addr, ones)
			}
		}
	}
	return netip.PrefixFrom(addr, addr.BitLen())
}

// serviceChanged reports a service's change in the node's resources (its Service, and the
// etcd member it runs) and in the machine's readiness.
func (n *Node) serviceChanged(info *machine.ServiceInfo) {
	n.serviceStateEvent(info)
	// As machined's Service controller: a running service has a resource, any other state
	// removes it.
	running := info.GetState() == serviceRunning
	if running {
		publish(n, v1alpha1.NewService(info.GetId()), func(s *v1alpha1.Service) {
			s.TypedSpec().Running = true
			s.TypedSpec().Healthy = info.GetHealth().GetHealthy()
			s.TypedSpec().Unknown = info.GetHealth().GetUnknown()
		})
	} else {
		n.unpublish(v1alpha1.NewService(info.GetId()).Metadata())
	}
	if info.GetId() == "etcd" {
		local := etcd.NewMember(etcd.NamespaceName, etcd.LocalMemberID)
		if m, err := n.etcdMember(); running && err == nil {
			publish(n, local, func(r *etcd.Member) { r.TypedSpec().MemberID = etcd.FormatMemberID(m.id()) })
		} else {
			n.unpublish(local.Metadata())
		}
	}
	n.finishBoot()
	n.publishMachineStatus()
}

// finishBoot ends the boot sequence once every service the node needs runs healthy, as
// machined's StartAllServices task does: the sequence's STOP event, and the Running stage.
func (n *Node) finishBoot() {
	n.mu.Lock()
	cfg, booting := n.cfg, n.booting
	n.mu.Unlock()
	if !booting || cfg == nil || n.serviceProblems(cfg) != "" {
		return
	}
	n.mu.Lock()
	booting, n.booting = n.booting, false
	n.mu.Unlock()
	if booting {
		n.events().publish(&machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_STOP}, "")
		n.setStage(runtime.MachineStageRunning)
	}
}

// serviceProblems is why the services a node needs are not all running and healthy, as
// machined's readiness check words it; empty when they are.
func (n *Node) serviceProblems(cfg talosconfig.Provider) string {
	required := []string{"apid", "machined", "kubelet"}
	if cfg != nil && cfg.Machine().Type() == machinetype.TypeControlPlane {
		required = append(required, "etcd", "trustd")
	}
	var problems []string
	running := map[string]bool{}
	for _, s := range n.services.list() {
		if s.GetState() != serviceRunning {
			problems = append(problems, s.GetId()+" not running")
			continue
		}
		running[s.GetId()] = true
		if !s.GetHealth().GetUnknown() && !s.GetHealth().GetHealthy() {
			problems = append(problems, s.GetId()+" not healthy")
		}
	}
	for _, id := range required {
		if !running[id] && !slices.Contains(problems, id+" not running") {
			problems = append(problems, id+" not running")
		}
	}
	return strings.Join(problems, ", ")
}

// nodeID is the node's identity in discovery: stable for the machine, like the one Talos
// keeps on its STATE partition.
func (n *Node) nodeID() string {
	return strings.ReplaceAll(n.UUID(), "-", "")
}
