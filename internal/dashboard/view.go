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

package dashboard

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
)

// States a cluster is shown in, from the fleet's counts to each row's badge.
const (
	StateReady        = "Ready"
	StateProvisioning = "Provisioning"
	StateUpdating     = "Updating"
	StateDegraded     = "Degraded"
	StateDeleting     = "Deleting"
)

// states is the order the fleet page counts them in.
var states = []string{StateReady, StateUpdating, StateProvisioning, StateDegraded, StateDeleting}

// snapshot is what the caches hold at one moment; each list may be empty when the caller
// may not read that kind (Readable says which).
type snapshot struct {
	Clusters           []clusterv1.Cluster
	ControlPlanes      []controlplanev1.TalosControlPlane
	MachineDeployments []clusterv1.MachineDeployment
	Machines           []clusterv1.Machine
	Backups            []controlplanev1.TalosEtcdBackup
	Events             []corev1.Event
	// Readable names the kinds whose lists are complete.
	Readable map[string]bool
}

// clusterSummary is a cluster as the fleet page shows it.
type clusterSummary struct {
	Namespace, Name string
	State           string
	// Phase is Cluster API's phase (Provisioning, Provisioned, Deleting, Failed).
	Phase string
	// ControlPlaneReady and WorkersReady read "ready/desired".
	ControlPlaneReady, WorkersReady string
	Kubernetes, Talos               string
	// Progress says what is rolling out or updating, empty when nothing is.
	Progress string
	// LastBackup is the newest etcd backup's phase and age, empty when there is none.
	LastBackup string
	// HeldBy is the condition that holds the cluster back, empty when it is Ready.
	HeldBy string
}

// clusterView is one cluster's page.
type clusterView struct {
	clusterSummary
	Topology     bool
	Class        string
	Conditions   []conditionView
	Infra        objectView
	ControlPlane *controlPlaneView
	Deployments  []deploymentView
	// Machines not owned by the control plane or a MachineDeployment.
	Machines []machineView
	Events   []eventView
	Backups  []backupView
	// Stuck is the first condition holding the cluster back, with the object it is on.
	Stuck *stuckView
}

type objectView struct {
	Kind, Name string
	Conditions []conditionView
}

type controlPlaneView struct {
	objectView
	Replicas, Ready, UpToDate int32
	Version                   string
	Machines                  []machineView
}

type deploymentView struct {
	objectView
	Replicas, Ready, UpToDate int32
	Version                   string
	Machines                  []machineView
}

type machineView struct {
	Name, Phase, Node, Address string
	Kubernetes, Talos          string
	// Etcd is the member ID on control-plane Machines, EtcdHealth its role and health
	// ("healthy voter", or what the EtcdMemberHealthy condition says: a learner, unhealthy).
	Etcd       string
	EtcdHealth string
	Conditions []conditionView
}

type conditionView struct {
	Type, Status, Reason, Message string
	Since                         string
	// Bad is a condition that should be True and is not (or Deleting, Remediating...).
	Bad bool
}

type eventView struct {
	Age, Type, Reason, Object, Message string
	Count                              int32
}

type backupView struct {
	Name, Phase, Age, Key, Member string
}

type stuckView struct {
	Object, Condition, Reason, Message string
}

// negativeConditions are the condition types that say something is wrong or under way
// when True; every other condition should be True.
var negativeConditions = map[string]bool{
	clusterv1.DeletingCondition:        true,
	clusterv1.PausedCondition:          true,
	clusterv1.RemediatingCondition:     true,
	clusterv1.RollingOutCondition:      true,
	clusterv1.ScalingUpCondition:       true,
	clusterv1.ScalingDownCondition:     true,
	clusterv1.MachineUpdatingCondition: true,
}

func conditionsOf(conds []metav1.Condition, now time.Time) []conditionView {
	out := make([]conditionView, 0, len(conds))
	for _, c := range conds {
		bad := c.Status != metav1.ConditionTrue
		if negativeConditions[c.Type] {
			bad = c.Status == metav1.ConditionTrue
		}
		out = append(out, conditionView{
			Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			Since: age(c.LastTransitionTime.Time, now), Bad: bad,
		})
	}
	return out
}

// age is a duration as kubectl prints it: 45s, 12m, 3h, 5d.
func age(t time.Time, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// index groups a snapshot's objects by cluster.
type index struct {
	controlPlane map[string]*controlplanev1.TalosControlPlane
	deployments  map[string][]*clusterv1.MachineDeployment
	machines     map[string][]*clusterv1.Machine
	backups      map[string][]*controlplanev1.TalosEtcdBackup
}

func key(namespace, name string) string { return namespace + "/" + name }

func newIndex(s *snapshot) *index {
	ix := &index{
		controlPlane: map[string]*controlplanev1.TalosControlPlane{},
		deployments:  map[string][]*clusterv1.MachineDeployment{},
		machines:     map[string][]*clusterv1.Machine{},
		backups:      map[string][]*controlplanev1.TalosEtcdBackup{},
	}
	cpOf := map[string]string{} // control plane object key -> cluster key
	for i := range s.Clusters {
		c := &s.Clusters[i]
		if ref := c.Spec.ControlPlaneRef; ref.IsDefined() {
			cpOf[key(c.Namespace, ref.Name)] = key(c.Namespace, c.Name)
		}
	}
	for i := range s.ControlPlanes {
		tcp := &s.ControlPlanes[i]
		if k, ok := cpOf[key(tcp.Namespace, tcp.Name)]; ok {
			ix.controlPlane[k] = tcp
		}
	}
	for i := range s.MachineDeployments {
		md := &s.MachineDeployments[i]
		k := key(md.Namespace, md.Spec.ClusterName)
		ix.deployments[k] = append(ix.deployments[k], md)
	}
	for i := range s.Machines {
		m := &s.Machines[i]
		k := key(m.Namespace, m.Spec.ClusterName)
		ix.machines[k] = append(ix.machines[k], m)
	}
	for i := range s.Backups {
		b := &s.Backups[i]
		k := key(b.Namespace, b.Spec.ClusterName)
		ix.backups[k] = append(ix.backups[k], b)
	}
	for _, list := range ix.backups {
		slices.SortFunc(list, func(a, b *controlplanev1.TalosEtcdBackup) int {
			return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
		})
	}
	return ix
}

// summarize is a cluster's row on the fleet page.
func (ix *index) summarize(c *clusterv1.Cluster, now time.Time) clusterSummary {
	k := key(c.Namespace, c.Name)
	tcp := ix.controlPlane[k]
	s := clusterSummary{Namespace: c.Namespace, Name: c.Name, Phase: c.Status.Phase}

	var cpReady, cpDesired int32
	if tcp != nil {
		cpDesired = ptr.Deref(tcp.Spec.Replicas, 1)
		cpReady = ptr.Deref(tcp.Status.ReadyReplicas, 0)
		s.Kubernetes = tcp.Spec.Version
		s.Talos = tcp.Spec.ControlPlaneConfig.TalosVersion
	}
	if c.Spec.Topology.IsDefined() && c.Spec.Topology.Version != "" {
		s.Kubernetes = c.Spec.Topology.Version
	}
	s.ControlPlaneReady = fmt.Sprintf("%d/%d", cpReady, cpDesired)
	var wReady, wDesired int32
	for _, md := range ix.deployments[k] {
		wDesired += ptr.Deref(md.Spec.Replicas, 0)
		wReady += ptr.Deref(md.Status.ReadyReplicas, 0)
	}
	s.WorkersReady = fmt.Sprintf("%d/%d", wReady, wDesired)
	// Talos as the nodes report it, when they do: "Talos (v1.14.1)".
	for _, m := range ix.machines[k] {
		if m.Status.NodeInfo != nil && m.Status.NodeInfo.OSImage != "" {
			s.Talos = strings.TrimSuffix(strings.TrimPrefix(m.Status.NodeInfo.OSImage, "Talos ("), ")")
			break
		}
	}
	s.Progress = ix.progress(k, tcp)
	if list := ix.backups[k]; len(list) > 0 {
		b := list[0]
		s.LastBackup = fmt.Sprintf("%s %s ago", cmp.Or(string(b.Status.Phase), "Pending"), age(b.CreationTimestamp.Time, now))
	}

	available := findCondition(c.Status.Conditions, clusterv1.AvailableCondition)
	switch {
	case !c.DeletionTimestamp.IsZero():
		s.State = StateDeleting
	case available != nil && available.Status == metav1.ConditionTrue && s.Progress != "":
		s.State = StateUpdating
	case available != nil && available.Status == metav1.ConditionTrue:
		s.State = StateReady
	case !ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false) || cpReady < cpDesired && s.Progress == "" && tcp != nil && ptr.Deref(tcp.Status.Replicas, 0) < cpDesired:
		s.State = StateProvisioning
	default:
		s.State = StateDegraded
	}
	if s.State != StateReady {
		if st := ix.stuck(c, now); st != nil {
			s.HeldBy = fmt.Sprintf("%s %s: %s", st.Object, st.Condition, cmp.Or(st.Message, st.Reason))
		}
	}
	return s
}

// progress says what is changing: Machines being replaced or updated, or scaling.
func (ix *index) progress(k string, tcp *controlplanev1.TalosControlPlane) string {
	var parts []string
	if tcp != nil {
		desired := ptr.Deref(tcp.Spec.Replicas, 1)
		upToDate := ptr.Deref(tcp.Status.UpToDateReplicas, desired)
		replicas := ptr.Deref(tcp.Status.Replicas, desired)
		switch {
		case upToDate < replicas:
			parts = append(parts, fmt.Sprintf("control plane %d of %d at %s", upToDate, replicas, tcp.Spec.Version))
		case replicas != desired:
			parts = append(parts, fmt.Sprintf("control plane scaling %d to %d", replicas, desired))
		}
	}
	for _, md := range ix.deployments[k] {
		desired := ptr.Deref(md.Spec.Replicas, 0)
		upToDate := ptr.Deref(md.Status.UpToDateReplicas, desired)
		replicas := ptr.Deref(md.Status.Replicas, desired)
		switch {
		case upToDate < replicas:
			parts = append(parts, fmt.Sprintf("%s %d of %d at %s", md.Name, upToDate, replicas, md.Spec.Template.Spec.Version))
		case replicas != desired:
			parts = append(parts, fmt.Sprintf("%s scaling %d to %d", md.Name, replicas, desired))
		}
	}
	return strings.Join(parts, "; ")
}

// stuck is the first condition that holds the cluster back, looking from the bottom up:
// the infrastructure, the control plane and its Machines, the workers, then the Cluster.
func (ix *index) stuck(c *clusterv1.Cluster, now time.Time) *stuckView {
	k := key(c.Namespace, c.Name)
	first := func(object string, conds []metav1.Condition) *stuckView {
		for _, cv := range conditionsOf(conds, now) {
			if cv.Bad && cv.Type != clusterv1.PausedCondition {
				return &stuckView{Object: object, Condition: cv.Type, Reason: cv.Reason, Message: cv.Message}
			}
		}
		return nil
	}
	if cond := findCondition(c.Status.Conditions, clusterv1.InfrastructureReadyCondition); cond != nil && cond.Status != metav1.ConditionTrue {
		return &stuckView{Object: "Cluster " + c.Name, Condition: cond.Type, Reason: cond.Reason, Message: cond.Message}
	}
	if tcp := ix.controlPlane[k]; tcp != nil {
		for _, m := range sortedMachines(ix.machines[k]) {
			if isControlPlane(m) {
				if st := first("Machine "+m.Name, m.Status.Conditions); st != nil {
					return st
				}
			}
		}
		if st := first("TalosControlPlane "+tcp.Name, tcp.Status.Conditions); st != nil {
			return st
		}
	}
	for _, m := range sortedMachines(ix.machines[k]) {
		if !isControlPlane(m) {
			if st := first("Machine "+m.Name, m.Status.Conditions); st != nil {
				return st
			}
		}
	}
	for _, md := range ix.deployments[k] {
		if st := first("MachineDeployment "+md.Name, md.Status.Conditions); st != nil {
			return st
		}
	}
	return first("Cluster "+c.Name, c.Status.Conditions)
}

func isControlPlane(m *clusterv1.Machine) bool {
	_, ok := m.Labels[clusterv1.MachineControlPlaneLabel]
	return ok
}

func sortedMachines(list []*clusterv1.Machine) []*clusterv1.Machine {
	out := slices.Clone(list)
	slices.SortFunc(out, func(a, b *clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// fleet is the fleet page: every cluster, and how many are in each state.
type fleet struct {
	Clusters []clusterSummary
	Counts   []stateCount
}

type stateCount struct {
	State string
	Count int
}

func (s *snapshot) fleet(now time.Time) fleet {
	ix := newIndex(s)
	f := fleet{Clusters: make([]clusterSummary, 0, len(s.Clusters))}
	counts := map[string]int{}
	for i := range s.Clusters {
		row := ix.summarize(&s.Clusters[i], now)
		counts[row.State]++
		f.Clusters = append(f.Clusters, row)
	}
	slices.SortFunc(f.Clusters, func(a, b clusterSummary) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, state := range states {
		f.Counts = append(f.Counts, stateCount{State: state, Count: counts[state]})
	}
	return f
}

// cluster is one cluster's page, nil when the snapshot has no such cluster.
func (s *snapshot) cluster(namespace, name string, now time.Time) *clusterView {
	var c *clusterv1.Cluster
	for i := range s.Clusters {
		if s.Clusters[i].Namespace == namespace && s.Clusters[i].Name == name {
			c = &s.Clusters[i]
		}
	}
	if c == nil {
		return nil
	}
	ix := newIndex(s)
	k := key(namespace, name)
	v := &clusterView{
		clusterSummary: ix.summarize(c, now),
		Topology:       c.Spec.Topology.IsDefined(),
		Conditions:     conditionsOf(c.Status.Conditions, now),
		Stuck:          ix.stuck(c, now),
	}
	if v.State == StateReady {
		v.Stuck = nil
	}
	if v.Topology {
		v.Class = c.Spec.Topology.ClassRef.Name
	}
	if ref := c.Spec.InfrastructureRef; ref.IsDefined() {
		v.Infra = objectView{Kind: ref.Kind, Name: ref.Name}
		if cond := findCondition(c.Status.Conditions, clusterv1.InfrastructureReadyCondition); cond != nil {
			v.Infra.Conditions = conditionsOf([]metav1.Condition{*cond}, now)
		}
	}
	owned := map[string]bool{}
	if tcp := ix.controlPlane[k]; tcp != nil {
		cp := &controlPlaneView{
			objectView: objectView{Kind: "TalosControlPlane", Name: tcp.Name, Conditions: conditionsOf(tcp.Status.Conditions, now)},
			Replicas:   ptr.Deref(tcp.Spec.Replicas, 1),
			Ready:      ptr.Deref(tcp.Status.ReadyReplicas, 0),
			UpToDate:   ptr.Deref(tcp.Status.UpToDateReplicas, 0),
			Version:    tcp.Spec.Version,
		}
		for _, m := range sortedMachines(ix.machines[k]) {
			if isControlPlane(m) {
				cp.Machines = append(cp.Machines, machineOf(m, now))
				owned[m.Name] = true
			}
		}
		v.ControlPlane = cp
	}
	for _, md := range ix.deployments[k] {
		dv := deploymentView{
			objectView: objectView{Kind: "MachineDeployment", Name: md.Name, Conditions: conditionsOf(md.Status.Conditions, now)},
			Replicas:   ptr.Deref(md.Spec.Replicas, 0),
			Ready:      ptr.Deref(md.Status.ReadyReplicas, 0),
			UpToDate:   ptr.Deref(md.Status.UpToDateReplicas, 0),
			Version:    md.Spec.Template.Spec.Version,
		}
		for _, m := range sortedMachines(ix.machines[k]) {
			if m.Labels[clusterv1.MachineDeploymentNameLabel] == md.Name {
				dv.Machines = append(dv.Machines, machineOf(m, now))
				owned[m.Name] = true
			}
		}
		v.Deployments = append(v.Deployments, dv)
	}
	slices.SortFunc(v.Deployments, func(a, b deploymentView) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range sortedMachines(ix.machines[k]) {
		if !owned[m.Name] {
			v.Machines = append(v.Machines, machineOf(m, now))
		}
	}
	for _, b := range ix.backups[k] {
		v.Backups = append(v.Backups, backupView{Name: b.Name, Phase: cmp.Or(string(b.Status.Phase), "Pending"),
			Age: age(b.CreationTimestamp.Time, now), Key: b.Status.Key, Member: b.Status.Member})
	}
	v.Events = s.eventsOf(c, ix, now)
	return v
}

// eventsOf are the newest events of the cluster's objects.
func (s *snapshot) eventsOf(c *clusterv1.Cluster, ix *index, now time.Time) []eventView {
	k := key(c.Namespace, c.Name)
	names := map[string]bool{"Cluster/" + c.Name: true}
	if ref := c.Spec.InfrastructureRef; ref.IsDefined() {
		names[ref.Kind+"/"+ref.Name] = true
	}
	if tcp := ix.controlPlane[k]; tcp != nil {
		names["TalosControlPlane/"+tcp.Name] = true
	}
	for _, md := range ix.deployments[k] {
		names["MachineDeployment/"+md.Name] = true
	}
	for _, m := range ix.machines[k] {
		names["Machine/"+m.Name] = true
		if ref := m.Spec.InfrastructureRef; ref.IsDefined() {
			names[ref.Kind+"/"+ref.Name] = true
		}
		if ref := m.Spec.Bootstrap.ConfigRef; ref.IsDefined() {
			names[ref.Kind+"/"+ref.Name] = true
		}
	}
	var events []*corev1.Event
	for i := range s.Events {
		e := &s.Events[i]
		if e.InvolvedObject.Namespace == c.Namespace && names[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] {
			events = append(events, e)
		}
	}
	slices.SortFunc(events, func(a, b *corev1.Event) int { return lastSeen(b).Compare(lastSeen(a)) })
	out := make([]eventView, 0, min(len(events), maxEvents))
	for _, e := range events[:min(len(events), maxEvents)] {
		out = append(out, eventView{Age: age(lastSeen(e), now), Type: e.Type, Reason: e.Reason,
			Object: e.InvolvedObject.Kind + " " + e.InvolvedObject.Name, Message: e.Message, Count: max(e.Count, 1)})
	}
	return out
}

// maxEvents is how many events a cluster's page lists.
const maxEvents = 30

func lastSeen(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

func machineOf(m *clusterv1.Machine, now time.Time) machineView {
	mv := machineView{Name: m.Name, Phase: m.Status.Phase, Node: m.Status.NodeRef.Name,
		Kubernetes: m.Spec.Version, Conditions: conditionsOf(m.Status.Conditions, now)}
	for _, a := range m.Status.Addresses {
		if a.Type == clusterv1.MachineInternalIP || a.Type == clusterv1.MachineExternalIP {
			mv.Address = a.Address
			break
		}
	}
	if info := m.Status.NodeInfo; info != nil {
		mv.Kubernetes = cmp.Or(info.KubeletVersion, mv.Kubernetes)
		mv.Talos = strings.TrimSuffix(strings.TrimPrefix(info.OSImage, "Talos ("), ")")
	}
	if isControlPlane(m) {
		mv.Etcd = m.Annotations[controlplanev1.EtcdMemberIDAnnotation]
		if cond := findCondition(m.Status.Conditions, controlplanev1.MachineEtcdMemberHealthyCondition); cond != nil {
			mv.EtcdHealth = cmp.Or(cond.Message, cond.Reason)
			if cond.Status == metav1.ConditionTrue {
				mv.EtcdHealth = "healthy voter"
			}
		}
	}
	return mv
}
