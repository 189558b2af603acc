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

package taloscontrolplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
)

// scope is what one reconcile knows of a control plane.
type scope struct {
	cluster  *clusterv1.Cluster
	tcp      *controlplanev1.TalosControlPlane
	machines []*clusterv1.Machine
	configs  map[string]*bootstrapv1.TalosConfig
	bundle   *secrets.Bundle
	// etcd is the cluster's etcd as the control-plane nodes report it; nil when no node
	// answered with a member list.
	etcd *etcdState
	// waiting says what the control plane waits for, for the conditions.
	waiting string
	// blocked says why a scale or rollout step is refused, for the conditions.
	blocked string
	// components are the problems of the control-plane components seen in the workload
	// cluster; componentsErr says why they could not be seen.
	components    []string
	componentsErr error
}

// etcdState is the etcd cluster as the nodes report it.
type etcdState struct {
	members []talosclient.Member
	// healthy holds the names of the members whose node answered their status without errors.
	healthy map[string]bool
	// leader is the name of the leading member, if known.
	leader string
	// problems are the per-member findings, for the conditions.
	problems []string
}

// observe reads the control plane: its Machines, their TalosConfigs, the cluster's bundle
// and, through the Talos API, etcd.
func (r *Reconciler) observe(ctx context.Context, cluster *clusterv1.Cluster, tcp *controlplanev1.TalosControlPlane) (*scope, error) {
	s := &scope{cluster: cluster, tcp: tcp, configs: map[string]*bootstrapv1.TalosConfig{}}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(tcp.Namespace), client.MatchingLabels(selectorLabels(cluster, tcp))); err != nil {
		return nil, fmt.Errorf("failed to list control-plane Machines: %w", err)
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if metav1.IsControlledBy(m, tcp) {
			s.machines = append(s.machines, m)
		}
	}
	slices.SortFunc(s.machines, func(a, b *clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	configs := &bootstrapv1.TalosConfigList{}
	if err := r.Client.List(ctx, configs, client.InNamespace(tcp.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}); err != nil {
		return nil, fmt.Errorf("failed to list TalosConfigs: %w", err)
	}
	for i := range configs.Items {
		s.configs[configs.Items[i].Name] = &configs.Items[i]
	}
	bundle, err := clustersecrets.Get(ctx, r.Client, cluster)
	switch {
	case err == nil:
		s.bundle = bundle
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	if s.bundle != nil && len(s.machines) > 0 {
		s.etcd = r.observeEtcd(ctx, s)
	}
	if s.initialized() {
		s.components, s.componentsErr = r.observeComponents(ctx, s)
	}
	return s, nil
}

// staticPods are the control-plane components Talos runs as static pods on every
// control-plane node; the kubelet publishes a mirror Pod <component>-<node> for each.
var staticPods = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// observeComponents reads the health of each control-plane node from the workload cluster:
// its Node is Ready and the mirror Pods of its static pods are Ready.
func (r *Reconciler) observeComponents(ctx context.Context, s *scope) ([]string, error) {
	if err := r.watchNodes(ctx, s); err != nil {
		return nil, fmt.Errorf("no connection to the workload cluster yet: %w", err)
	}
	kube, err := r.ClusterCache.GetClient(ctx, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		return nil, fmt.Errorf("no connection to the workload cluster yet: %w", err)
	}
	pods := &corev1.PodList{}
	if err := kube.List(ctx, pods, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{"tier": "control-plane"}); err != nil {
		return nil, fmt.Errorf("the workload API server does not answer: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := kube.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("the workload API server does not answer: %w", err)
	}
	readyPods := map[string]bool{}
	for _, pod := range pods.Items {
		readyPods[pod.Name] = podReady(&pod)
	}
	readyNodes := map[string]bool{}
	for _, node := range nodes.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				readyNodes[node.Name] = c.Status == corev1.ConditionTrue
			}
		}
	}
	var problems []string
	for _, m := range s.active() {
		name := nodeName(m, s.configs)
		ready, found := readyNodes[name]
		switch {
		case !found:
			problems = append(problems, fmt.Sprintf("Node %s has not registered", name))
			continue
		case !ready:
			problems = append(problems, fmt.Sprintf("Node %s is not Ready", name))
		}
		for _, component := range staticPods {
			if ready, found := readyPods[component+"-"+name]; !found {
				problems = append(problems, fmt.Sprintf("%s on %s has no mirror Pod", component, name))
			} else if !ready {
				problems = append(problems, fmt.Sprintf("%s on %s is not ready", component, name))
			}
		}
	}
	return problems, nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// observeEtcd asks every control-plane node for the member list and its own member's
// status. The list is taken from the first node that gives one.
func (r *Reconciler) observeEtcd(ctx context.Context, s *scope) *etcdState {
	log := ctrl.LoggerFrom(ctx)
	var state *etcdState
	healthy := map[string]bool{}
	var problems []string
	leader := uint64(0)
	for _, m := range s.machines {
		address := machineAddress(m)
		if address == "" {
			continue
		}
		c, err := r.TalosClients.New(ctx, s.bundle, address)
		if err != nil {
			problems = append(problems, fmt.Sprintf("node of Machine %s: %v", m.Name, err))
			continue
		}
		if state == nil {
			if members, err := c.EtcdMembers(ctx); err == nil {
				state = &etcdState{members: members}
			} else if !errors.Is(err, talosclient.ErrEtcdNotRunning) {
				log.V(4).Info("No etcd member list from the node", "Machine", m.Name, "reason", err.Error())
			}
		}
		st, err := c.EtcdStatus(ctx)
		switch {
		case err == nil && len(st.Errors) == 0 && st.Leader != 0:
			// A member cut off from its peers still answers; it knows no leader.
			healthy[nodeName(m, s.configs)] = true
			leader = st.Leader
		case err == nil && st.Leader == 0:
			problems = append(problems, fmt.Sprintf("etcd member %s knows no leader", nodeName(m, s.configs)))
		case err == nil:
			problems = append(problems, fmt.Sprintf("etcd member %s reports: %s", nodeName(m, s.configs), strings.Join(st.Errors, "; ")))
		case !errors.Is(err, talosclient.ErrEtcdNotRunning) || m.DeletionTimestamp.IsZero():
			problems = append(problems, fmt.Sprintf("etcd member %s is not reachable: %v", nodeName(m, s.configs), err))
		}
		_ = c.Close()
	}
	if state == nil {
		return nil
	}
	state.healthy, state.problems = healthy, problems
	for _, member := range state.members {
		if member.ID == leader {
			state.leader = member.Name
		}
	}
	return state
}

// selectorLabels select the Machines of a control plane.
func selectorLabels(cluster *clusterv1.Cluster, tcp *controlplanev1.TalosControlPlane) map[string]string {
	return map[string]string{
		clusterv1.ClusterNameLabel:             cluster.Name,
		clusterv1.MachineControlPlaneNameLabel: tcp.Name,
	}
}

// machineAddress is the address of a Machine's Talos API: its first internal address, or
// any other.
func machineAddress(m *clusterv1.Machine) string {
	for _, t := range []clusterv1.MachineAddressType{clusterv1.MachineInternalIP, clusterv1.MachineExternalIP, clusterv1.MachineInternalDNS, clusterv1.MachineExternalDNS} {
		for _, a := range m.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

// nodeName is the name of a Machine's Node (its hostname): from the Node reference once
// there is one, else the hostname its TalosConfig gives it.
func nodeName(m *clusterv1.Machine, configs map[string]*bootstrapv1.TalosConfig) string {
	if m.Status.NodeRef.IsDefined() {
		return m.Status.NodeRef.Name
	}
	source := bootstrapv1.HostnameSourceMachineName
	if c, ok := configs[m.Spec.Bootstrap.ConfigRef.Name]; ok && c.Spec.Hostname.Source != "" {
		source = c.Spec.Hostname.Source
	}
	return configgen.Hostname(source, m.Name, m.Spec.InfrastructureRef.Name)
}

// active are the Machines not being deleted.
func (s *scope) active() []*clusterv1.Machine {
	return slices.DeleteFunc(slices.Clone(s.machines), func(m *clusterv1.Machine) bool { return !m.DeletionTimestamp.IsZero() })
}

// deleting are the Machines being deleted.
func (s *scope) deleting() []*clusterv1.Machine {
	return slices.DeleteFunc(slices.Clone(s.machines), func(m *clusterv1.Machine) bool { return m.DeletionTimestamp.IsZero() })
}

// initialized reports whether the control plane was initialized: recorded in status once the
// workload API server answered after etcd was bootstrapped.
func (s *scope) initialized() bool {
	return ptr.Deref(s.tcp.Status.Initialization.ControlPlaneInitialized, false)
}

// model is the control plane as the decisions see it.
func (s *scope) model() controlplane.ControlPlane {
	cp := controlplane.ControlPlane{}
	for _, fd := range s.cluster.Status.FailureDomains {
		if ptr.Deref(fd.ControlPlane, false) {
			cp.FailureDomains = append(cp.FailureDomains, fd.Name)
		}
	}
	for _, m := range s.machines {
		_, deleteRequested := m.Annotations[clusterv1.DeleteMachineAnnotation]
		name := nodeName(m, s.configs)
		_, isMember := s.memberOf(m)
		unhealthy := isMember && !s.etcd.healthy[name]
		cp.Machines = append(cp.Machines, controlplane.Machine{
			Name: m.Name, NodeName: name, Created: m.CreationTimestamp.Time,
			FailureDomain: m.Spec.FailureDomain, Deleting: !m.DeletionTimestamp.IsZero(),
			DeleteRequested: deleteRequested, UpToDate: s.upToDate(m) == "", EtcdUnhealthy: unhealthy,
		})
	}
	if s.etcd != nil {
		for _, member := range s.etcd.members {
			cp.Members = append(cp.Members, controlplane.Member{
				ID: member.ID, Name: member.Name, Learner: member.Learner, Healthy: s.etcd.healthy[member.Name],
			})
		}
	}
	return cp
}

// machineByName finds a Machine of the control plane.
func (s *scope) machineByName(name string) *clusterv1.Machine {
	for _, m := range s.machines {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// memberOf is the etcd member of m's node, if etcd is known and has one.
func (s *scope) memberOf(m *clusterv1.Machine) (talosclient.Member, bool) {
	if s.etcd == nil {
		return talosclient.Member{}, false
	}
	name := nodeName(m, s.configs)
	i := slices.IndexFunc(s.etcd.members, func(member talosclient.Member) bool { return member.Name == name })
	if i < 0 {
		return talosclient.Member{}, false
	}
	return s.etcd.members[i], true
}

// isVoter reports whether m's node is a voting etcd member.
func (s *scope) isVoter(m *clusterv1.Machine) bool {
	member, ok := s.memberOf(m)
	return ok && !member.Learner
}
