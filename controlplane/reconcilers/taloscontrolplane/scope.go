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
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	etcdresource "github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
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
	// observed are the Machines as observed, by name: what patchMachineConditions compares
	// with to write only the conditions this reconcile changed.
	observed map[string]*clusterv1.Machine
	// nodes is what each Machine's node said through the Talos API, by Machine name.
	nodes map[string]*nodeReport
	// etcd is the cluster's etcd as the control-plane nodes report it; nil when no node
	// answered with a member list.
	etcd *etcdState
	// waiting says what the control plane waits for, for the conditions.
	waiting string
	// blocked says why a scale or rollout step is refused, for the conditions.
	blocked string
	// due is how soon a step that waits without an event to wake it wants to be looked at
	// again; zero for none.
	due time.Duration
	// components is the health of each Machine's control-plane components seen in the
	// workload cluster, by Machine name; componentsErr says why they could not be seen.
	components    map[string]*nodeComponents
	componentsErr error
}

// nodeReport is what one control-plane node said of etcd.
type nodeReport struct {
	// members is the member list the node gave; listed says whether it gave one.
	members []talosclient.Member
	listed  bool
	// noEtcd is true when the node's Talos API answers and its etcd does not: it runs no
	// serving etcd member.
	noEtcd bool
	// status is the node's own member status, when it gave one.
	status *talosclient.MemberStatus
	// problem says what went wrong reaching the node or its member, for the conditions.
	problem string
}

// etcdState is the etcd cluster as the nodes report it.
type etcdState struct {
	// members is the member list the nodes agree on (or most of them report).
	members []talosclient.Member
	// agreement is how the nodes' member lists compare.
	agreement controlplane.Agreement
	// healthy holds the IDs of the members whose node answered their status without errors
	// and knows a leader.
	healthy map[uint64]bool
	// leader is the ID of the leading member, if known.
	leader uint64
	// problems are the per-member findings, for the conditions.
	problems []string
}

// observe reads the control plane: its Machines, their TalosConfigs, the cluster's bundle
// and, through the Talos API, etcd.
func (r *Reconciler) observe(ctx context.Context, cluster *clusterv1.Cluster, tcp *controlplanev1.TalosControlPlane) (*scope, error) {
	s := &scope{cluster: cluster, tcp: tcp, configs: map[string]*bootstrapv1.TalosConfig{}, nodes: map[string]*nodeReport{}}
	machines := &clusterv1.MachineList{}
	// By the cluster only: Machines another provider made for this TalosControlPlane lack
	// the control-plane name label until they are adopted.
	if err := r.Client.List(ctx, machines, client.InNamespace(tcp.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}); err != nil {
		return nil, fmt.Errorf("failed to list control-plane Machines: %w", err)
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if metav1.IsControlledBy(m, tcp) {
			s.machines = append(s.machines, m)
		}
	}
	slices.SortFunc(s.machines, func(a, b *clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	if err := r.adoptMachines(ctx, s); err != nil {
		return nil, err
	}
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
		s.nodes = r.askNodes(ctx, s)
		s.etcd = s.etcdFromReports()
		if err := r.recordMemberIDs(ctx, s); err != nil {
			return nil, err
		}
	}
	if s.initialized() {
		s.components, s.componentsErr = r.observeComponents(ctx, s)
	}
	s.observed = map[string]*clusterv1.Machine{}
	for _, m := range s.machines {
		s.observed[m.Name] = m.DeepCopy()
	}
	return s, nil
}

// askNodes asks every control-plane node, concurrently, for its etcd member list and its
// own member's status.
func (r *Reconciler) askNodes(ctx context.Context, s *scope) map[string]*nodeReport {
	reports := map[string]*nodeReport{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range s.machines {
		address := controlplane.MachineAddress(m)
		if address == "" {
			continue
		}
		wg.Go(func() {
			report := r.askNode(ctx, s.bundle, address)
			mu.Lock()
			reports[m.Name] = report
			mu.Unlock()
		})
	}
	wg.Wait()
	return reports
}

// askNode asks one node for its own member's status and its member list. Talos reads the
// status from the node's local etcd: a node whose Talos API answers but whose status call
// fails runs no serving etcd member.
func (r *Reconciler) askNode(ctx context.Context, bundle *secrets.Bundle, address string) *nodeReport {
	report := &nodeReport{}
	c, err := r.TalosClients.New(ctx, bundle, address)
	if err != nil {
		report.problem = err.Error()
		return report
	}
	defer func() { _ = c.Close() }()
	st, err := c.EtcdStatus(ctx)
	if err != nil {
		report.problem = err.Error()
		if _, versionErr := c.Version(ctx); versionErr == nil {
			report.noEtcd = true
		}
		return report
	}
	report.status = &st
	members, err := c.EtcdMembers(ctx)
	if err != nil {
		// A member cut off from its peers lists nothing: it knows no leader.
		ctrl.LoggerFrom(ctx).V(4).Info("No etcd member list from the node", "address", address, "reason", err.Error())
		return report
	}
	report.members, report.listed = members, true
	return report
}

// etcdFromReports compares the member lists the nodes gave and works out which members are
// healthy; nil when no node gave a list.
func (s *scope) etcdFromReports() *etcdState {
	views, recorded := s.views("")
	if len(views) == 0 {
		return nil
	}
	state := &etcdState{agreement: controlplane.Agree(views, recorded), healthy: map[uint64]bool{}}
	for _, v := range views {
		if idKeyOf(v.Members) == idKeyOf(state.agreement.Members) {
			state.members = s.nodes[v.Machine].members
			break
		}
	}
	for _, m := range s.machines {
		report := s.nodes[m.Name]
		if report == nil {
			continue
		}
		st := report.status
		if st != nil && !slices.ContainsFunc(state.members, func(member talosclient.Member) bool { return member.ID == st.ID }) {
			// A member of another cluster (or one removed): its health and leader are not ours.
			continue
		}
		switch {
		case st != nil && len(st.Errors) == 0 && st.Leader != 0:
			// A member cut off from its peers still answers; it knows no leader.
			state.healthy[st.ID] = true
			state.leader = st.Leader
		case st != nil && st.Leader == 0:
			state.problems = append(state.problems, fmt.Sprintf("the etcd member of Machine %s knows no leader", m.Name))
		case st != nil:
			state.problems = append(state.problems, fmt.Sprintf("the etcd member of Machine %s reports: %s", m.Name, strings.Join(st.Errors, "; ")))
		case report.noEtcd:
			if recordedMemberID(m) != 0 && m.DeletionTimestamp.IsZero() {
				state.problems = append(state.problems, fmt.Sprintf("the node of Machine %s runs no etcd member", m.Name))
			}
		case m.DeletionTimestamp.IsZero():
			state.problems = append(state.problems, fmt.Sprintf("the etcd member of Machine %s is not reachable: %s", m.Name, report.problem))
		}
	}
	return state
}

// views are the member lists the nodes gave, but that of the Machine named exclude, and the
// member IDs recorded on the Machines.
func (s *scope) views(exclude string) ([]controlplane.View, map[uint64]bool) {
	var views []controlplane.View
	recorded := map[uint64]bool{}
	for _, m := range s.machines {
		if id := recordedMemberID(m); id != 0 {
			recorded[id] = true
		}
		if report := s.nodes[m.Name]; report != nil && report.listed && m.Name != exclude {
			views = append(views, controlplane.View{Machine: m.Name, Members: modelMembers(report.members, nil)})
		}
	}
	return views, recorded
}

// recordMemberIDs records on each Machine the member ID its node reported for itself, once
// that member is in the cluster's member list: from then on the Machine's member is found
// by this ID, never by a name.
func (r *Reconciler) recordMemberIDs(ctx context.Context, s *scope) error {
	if s.etcd == nil {
		return nil
	}
	for _, m := range s.machines {
		report := s.nodes[m.Name]
		if report == nil || report.status == nil || report.status.ID == 0 || recordedMemberID(m) == report.status.ID {
			continue
		}
		if !slices.ContainsFunc(s.etcd.members, func(member talosclient.Member) bool { return member.ID == report.status.ID }) {
			continue
		}
		if other := slices.IndexFunc(s.machines, func(o *clusterv1.Machine) bool { return o != m && recordedMemberID(o) == report.status.ID }); other >= 0 {
			ctrl.LoggerFrom(ctx).Info("Not recording an etcd member another Machine claims", "Machine", klog.KObj(m),
				"memberID", etcdresource.FormatMemberID(report.status.ID), "claimedBy", s.machines[other].Name)
			continue
		}
		before := m.DeepCopy()
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[controlplanev1.EtcdMemberIDAnnotation] = etcdresource.FormatMemberID(report.status.ID)
		if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to record the etcd member ID of Machine %s: %w", m.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Recorded the etcd member of Machine", "Machine", klog.KObj(m), "memberID", etcdresource.FormatMemberID(report.status.ID),
			"previous", before.Annotations[controlplanev1.EtcdMemberIDAnnotation])
	}
	return nil
}

// noMemberRecord is the value of EtcdMemberIDAnnotation by which a person records that a
// Machine never joined etcd.
const noMemberRecord = "none"

// recordedNoMember reports whether a person recorded that m never joined etcd.
func recordedNoMember(m *clusterv1.Machine) bool {
	return m.Annotations[controlplanev1.EtcdMemberIDAnnotation] == noMemberRecord
}

// recordedMemberID is the etcd member ID recorded on m, or 0.
func recordedMemberID(m *clusterv1.Machine) uint64 {
	id, err := etcdresource.ParseMemberID(m.Annotations[controlplanev1.EtcdMemberIDAnnotation])
	if err != nil {
		return 0
	}
	return id
}

// modelMembers are members as the model sees them, healthy as healthy says.
func modelMembers(members []talosclient.Member, healthy map[uint64]bool) []controlplane.Member {
	out := make([]controlplane.Member, 0, len(members))
	for _, member := range members {
		out = append(out, controlplane.Member{ID: member.ID, Name: member.Name, Learner: member.Learner, Healthy: healthy[member.ID]})
	}
	return out
}

// idKeyOf identifies a member list by its member IDs.
func idKeyOf(members []controlplane.Member) string {
	ids := make([]uint64, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return fmt.Sprint(ids)
}

// staticPods are the control-plane components Talos runs as static pods on every
// control-plane node; the kubelet publishes a mirror Pod <component>-<node> for each.
var staticPods = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// nodeComponents is the health of one Machine's Node and static pods in the workload cluster.
type nodeComponents struct {
	// node is the name of the Node looked for.
	node string
	// registered and ready describe the Node.
	registered, ready bool
	// kubelet is the kubelet version the Node reports.
	kubelet string
	// pods holds, per static pod, whether its mirror Pod exists and whether it is Ready.
	pods map[string]podHealth
}

// podHealth is what a mirror Pod shows: whether it exists and is Ready, and its image.
type podHealth struct {
	exists, ready bool
	image         string
}

// problems are what is wrong with the node's components, in words for a condition.
func (c *nodeComponents) problems() []string {
	if !c.registered {
		return []string{fmt.Sprintf("Node %s has not registered", c.node)}
	}
	var out []string
	if !c.ready {
		out = append(out, fmt.Sprintf("Node %s is not Ready", c.node))
	}
	for _, component := range staticPods {
		switch pod := c.pods[component]; {
		case !pod.exists:
			out = append(out, fmt.Sprintf("%s on %s has no mirror Pod", component, c.node))
		case !pod.ready:
			out = append(out, fmt.Sprintf("%s on %s is not ready", component, c.node))
		}
	}
	return out
}

// observeComponents reads the health of each control-plane node from the workload cluster:
// its Node is Ready and the mirror Pods of its static pods are Ready.
func (r *Reconciler) observeComponents(ctx context.Context, s *scope) (map[string]*nodeComponents, error) {
	pods, nodes, err := r.readWorkload(ctx, s)
	if err != nil {
		return nil, err
	}
	podsByName := map[string]podHealth{}
	for _, pod := range pods.Items {
		health := podHealth{exists: true, ready: podReady(&pod)}
		if len(pod.Spec.Containers) > 0 {
			health.image = pod.Spec.Containers[0].Image
		}
		podsByName[pod.Name] = health
	}
	readyNodes := map[string]bool{}
	kubelets := map[string]string{}
	byProviderID := map[string]string{}
	for _, node := range nodes.Items {
		readyNodes[node.Name] = false
		kubelets[node.Name] = node.Status.NodeInfo.KubeletVersion
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				readyNodes[node.Name] = c.Status == corev1.ConditionTrue
			}
		}
		if node.Spec.ProviderID != "" {
			byProviderID[node.Spec.ProviderID] = node.Name
		}
	}
	out := map[string]*nodeComponents{}
	for _, m := range s.machines {
		name := nodeName(m, s.configs)
		if linked, ok := byProviderID[m.Spec.ProviderID]; ok && !m.Status.NodeRef.IsDefined() {
			// Linked by the infrastructure provider, not yet seen by Cluster API: the Node may
			// be named otherwise than the hostname (registerWithFQDN).
			name = linked
		}
		ready, registered := readyNodes[name]
		health := &nodeComponents{node: name, registered: registered, ready: ready, kubelet: kubelets[name], pods: map[string]podHealth{}}
		for _, component := range staticPods {
			health.pods[component] = podsByName[component+"-"+name]
		}
		out[m.Name] = health
	}
	return out, nil
}

// readWorkload lists the control-plane mirror Pods and the Nodes of the workload cluster,
// through Cluster API's ClusterCache, whose Node watch wakes the reconciler. Until the
// ClusterCache has connected (it retries a first attempt made before the control plane
// existed only after 30 s) they are read directly with the cluster's kubeconfig, so that
// adding the next Machine does not wait for that retry.
func (r *Reconciler) readWorkload(ctx context.Context, s *scope) (*corev1.PodList, *corev1.NodeList, error) {
	pods, nodes := &corev1.PodList{}, &corev1.NodeList{}
	cached, err := r.ClusterCache.GetClient(ctx, client.ObjectKeyFromObject(s.cluster))
	if err == nil {
		err = r.watchNodes(ctx, s)
	}
	if err == nil {
		if err := cached.List(ctx, pods, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{"tier": "control-plane"}); err != nil {
			return nil, nil, fmt.Errorf("the workload API server does not answer: %w", err)
		}
		if err := cached.List(ctx, nodes); err != nil {
			return nil, nil, fmt.Errorf("the workload API server does not answer: %w", err)
		}
		return pods, nodes, nil
	}
	direct, directErr := r.workloadClient(ctx, s)
	if directErr != nil {
		return nil, nil, fmt.Errorf("no connection to the workload cluster yet: %w", errors.Join(err, directErr))
	}
	// No Node events without the ClusterCache: look again soon.
	s.lookAgain(5 * converging)
	if pods, err = direct.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "tier=control-plane"}); err != nil {
		return nil, nil, fmt.Errorf("the workload API server does not answer: %w", err)
	}
	if nodes, err = direct.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		return nil, nil, fmt.Errorf("the workload API server does not answer: %w", err)
	}
	return pods, nodes, nil
}

// componentsSeen reports whether the workload cluster answered with its Nodes and Pods.
func (s *scope) componentsSeen() bool { return s.componentsErr == nil }

// componentProblems are the problems of the active Machines' components, for the conditions.
func (s *scope) componentProblems() []string {
	var out []string
	for _, m := range s.active() {
		if c, ok := s.components[m.Name]; ok {
			out = append(out, c.problems()...)
		}
	}
	return out
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// selectorLabels select the Machines of a control plane.
func selectorLabels(cluster *clusterv1.Cluster, tcp *controlplanev1.TalosControlPlane) map[string]string {
	return map[string]string{
		clusterv1.ClusterNameLabel:             cluster.Name,
		clusterv1.MachineControlPlaneNameLabel: tcp.Name,
	}
}

// nodeName is the name of a Machine's Node (its hostname): from the Node reference once
// there is one, else the hostname its TalosConfig gives it.
func nodeName(m *clusterv1.Machine, configs map[string]*bootstrapv1.TalosConfig) string {
	if m.Status.NodeRef.IsDefined() {
		return m.Status.NodeRef.Name
	}
	return hostname(m, configs)
}

// hostname is the hostname a Machine's TalosConfig gives its node: the name its etcd member
// starts under (its Node's name may differ, an FQDN with registerWithFQDN).
func hostname(m *clusterv1.Machine, configs map[string]*bootstrapv1.TalosConfig) string {
	source := bootstrapv1.HostnameSourceMachineName
	if c, ok := configs[m.Spec.Bootstrap.ConfigRef.Name]; ok && c.Spec.Hostname.Source != "" {
		source = c.Spec.Hostname.Source
	}
	return configgen.Hostname(source, m.Name, m.Spec.InfrastructureRef.Name)
}

// lookAgain asks for the control plane to be reconciled again within d.
func (s *scope) lookAgain(d time.Duration) {
	if s.due == 0 || d < s.due {
		s.due = d
	}
}

// active are the Machines not being deleted.
func (s *scope) active() []*clusterv1.Machine {
	return slices.DeleteFunc(slices.Clone(s.machines), func(m *clusterv1.Machine) bool { return !m.DeletionTimestamp.IsZero() })
}

// deleting are the Machines being deleted.
func (s *scope) deleting() []*clusterv1.Machine {
	return slices.DeleteFunc(slices.Clone(s.machines), func(m *clusterv1.Machine) bool { return m.DeletionTimestamp.IsZero() })
}

// etcdFormed reports whether etcd is known to have served the cluster: the control plane is
// initialized, or was recorded so before its status was lost (clusterctl move). Membership
// safety checks hold from then on.
func (s *scope) etcdFormed() bool {
	return s.initialized() || s.tcp.Annotations[controlplanev1.EtcdClusterAnnotation] != ""
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
		member, isMember := s.memberOf(m)
		report := s.nodes[m.Name]
		recorded := recordedNoMember(m)
		reported := !recorded && recordedMemberID(m) == 0 && report != nil && report.noEtcd
		cp.Machines = append(cp.Machines, controlplane.Machine{
			Name: m.Name, MemberID: recordedMemberID(m), NoMember: recorded || reported, NoMemberReported: reported, Hostname: hostname(m, s.configs),
			Created: m.CreationTimestamp.Time, FailureDomain: m.Spec.FailureDomain, Deleting: !m.DeletionTimestamp.IsZero(),
			DeleteRequested: deleteRequested, UpToDate: s.upToDate(m) == "", EtcdUnhealthy: isMember && !s.etcd.healthy[member.ID],
		})
	}
	if s.etcd != nil {
		cp.Members = modelMembers(s.etcd.members, s.etcd.healthy)
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

// memberOf is the etcd member of m's node, found by the member ID recorded on m, if etcd is
// known and has it.
func (s *scope) memberOf(m *clusterv1.Machine) (talosclient.Member, bool) {
	id := recordedMemberID(m)
	if s.etcd == nil || id == 0 {
		return talosclient.Member{}, false
	}
	i := slices.IndexFunc(s.etcd.members, func(member talosclient.Member) bool { return member.ID == id })
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

// disagreement says why etcd membership must not change now: the nodes do not report one
// and the same member list, or some node reports a second etcd cluster. The node of the
// Machine named exclude is left out: removing that Machine is how a person repairs it.
func (s *scope) disagreement(exclude string) string {
	if s.etcd == nil {
		return "no control-plane node answers with the etcd member list"
	}
	if s.etcd.agreement.Agree {
		return ""
	}
	views, recorded := s.views(exclude)
	if a := controlplane.Agree(views, recorded); len(views) > 0 && !a.Agree {
		return "the control-plane nodes do not agree on etcd's members: " + strings.Join(a.Problems, "; ")
	}
	return ""
}
