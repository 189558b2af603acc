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
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
)

// Tree is a snapshot of a Cluster and the objects under it, as Describe read them.
type Tree struct {
	// Cluster is the Cluster itself; Ready when its Available condition is True.
	Cluster Object
	// Endpoint is the control-plane endpoint (host:port), empty until it is known.
	Endpoint string
	// Initialized is whether the control plane is initialized, as the control plane or the
	// Cluster records it.
	Initialized bool
	// Infrastructure is the object of Cluster.spec.infrastructureRef; nil without a reference.
	Infrastructure *Object
	// ControlPlane is the object of Cluster.spec.controlPlaneRef with its Machines; nil
	// without a reference.
	ControlPlane *MachineGroup
	// MachineDeployments are the Cluster's MachineDeployments with their Machines, by name.
	MachineDeployments []MachineGroup
	// OtherMachines are worker Machines of no MachineDeployment (MachinePools, MachineSets
	// or Machines of their own), by name.
	OtherMachines []Machine
}

// Object is one object of the tree and what keeps it from being ready.
type Object struct {
	// Kind and Name name the object.
	Kind, Name string
	// Ready is whether the object says it is ready (or available).
	Ready bool
	// State is a word for the object's state: Ready, NotReady, Deleting, NotFound, Unknown
	// (it could not be read), or for the Cluster what it waits for (WaitingForControlPlane).
	State string
	// Blocker is the condition that keeps the object from being ready, or what else does;
	// empty when it is ready.
	Blocker Blocker
}

// Blocker is the condition that keeps an object from being ready, reduced to what a person
// reads; only Message is set when no condition says it (an object not found or unreadable).
type Blocker struct {
	Type, Status, Reason, Message string
}

// MachineGroup is a control plane or a MachineDeployment and the Machines it owns.
type MachineGroup struct {
	Object
	// Found is false when the referenced object does not exist (yet) or could not be read.
	Found bool
	// Replicas is the desired number of Machines (spec.replicas); nil when not given.
	Replicas *int32
	// ReadyReplicas is status.readyReplicas.
	ReadyReplicas int32
	// Version is the Kubernetes version of the group (status.version when the provider
	// reports it, else spec.version).
	Version string
	// Machines are the group's Machines, by name.
	Machines []Machine
}

// Machine is a Cluster API Machine as the tree and talon status show it.
type Machine struct {
	Object
	// ControlPlane is whether the Machine is a control-plane Machine.
	ControlPlane bool
	// Phase is the Machine's phase; Deleting once it is being deleted, Pending before it has one.
	Phase string
	// NodeName is the name of the Machine's Node, once it has one.
	NodeName string
	// Address is the Machine's first internal address (or any other).
	Address string
	// Version is the Machine's Kubernetes version.
	Version string
}

// lineWidth is how long a line of the rendered tree may be, in characters.
const lineWidth = 120

// Describe reads the Cluster namespace/name and the objects under it: its infrastructure and
// control plane (as unstructured objects, so that any provider works), its
// MachineDeployments and its Machines.
func Describe(ctx context.Context, c client.Reader, namespace, name string) (*Tree, error) {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		return nil, fmt.Errorf("failed to get Cluster %s: %w", klog.KRef(namespace, name), err)
	}
	t := &Tree{Cluster: clusterObject(cluster), Initialized: ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false)}
	if ep := cluster.Spec.ControlPlaneEndpoint; ep.IsValid() {
		t.Endpoint = ep.String()
	}
	if ref := cluster.Spec.InfrastructureRef; ref.IsDefined() {
		obj, err := external.GetObjectFromContractVersionedRef(ctx, c, ref, namespace)
		infra := infrastructureObject(ref, obj, err)
		t.Infrastructure = &infra
	}

	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil, fmt.Errorf("failed to list the Machines of Cluster %s: %w", klog.KObj(cluster), err)
	}
	deployments := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, deployments, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("failed to list the MachineDeployments of Cluster %s: %w", klog.KObj(cluster), err)
	}

	if ref := cluster.Spec.ControlPlaneRef; ref.IsDefined() {
		obj, err := external.GetObjectFromContractVersionedRef(ctx, c, ref, namespace)
		t.ControlPlane = controlPlaneGroup(ref, obj, err)
		if obj != nil {
			initialized, _, _ := unstructured.NestedBool(obj.Object, "status", "initialization", "controlPlaneInitialized")
			t.Initialized = t.Initialized || initialized
		}
	}
	// Sorted first, the groups and the Machines in each come out by name.
	slices.SortFunc(deployments.Items, func(a, b clusterv1.MachineDeployment) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(machines.Items, func(a, b clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	byDeployment := map[string]int{}
	for i := range deployments.Items {
		md := &deployments.Items[i]
		if md.Spec.ClusterName != name {
			continue
		}
		byDeployment[md.Name] = len(t.MachineDeployments)
		t.MachineDeployments = append(t.MachineDeployments, deploymentGroup(md))
	}
	for i := range machines.Items {
		m := newMachine(&machines.Items[i])
		md, inDeployment := byDeployment[machines.Items[i].Labels[clusterv1.MachineDeploymentNameLabel]]
		switch {
		case m.ControlPlane && t.ControlPlane != nil:
			t.ControlPlane.Machines = append(t.ControlPlane.Machines, m)
		case inDeployment:
			t.MachineDeployments[md].Machines = append(t.MachineDeployments[md].Machines, m)
		default:
			t.OtherMachines = append(t.OtherMachines, m)
		}
	}
	return t, nil
}

// Ready says whether the Cluster is ready for a user: its Available condition is True, the
// control plane is initialized, every Machine is Running and Ready with a Node, and the
// control plane and every MachineDeployment have as many Machines as they want.
func (t *Tree) Ready() bool {
	if !t.Cluster.Ready || !t.Initialized {
		return false
	}
	for _, g := range t.groups() {
		if !g.Found || g.Replicas != nil && int(*g.Replicas) != len(g.Machines) {
			return false
		}
	}
	return !slices.ContainsFunc(t.Machines(), func(m Machine) bool { return !m.usable() })
}

// Problems returns one line per object that is not ready, with the reason and message of
// the condition that keeps it from being ready: what to print when waiting gives up.
func (t *Tree) Problems() []string {
	var out []string
	add := func(o Object) {
		if o.Blocker != (Blocker{}) {
			out = append(out, o.Kind+"/"+o.Name+": "+o.Blocker.String())
		}
	}
	add(t.Cluster)
	if t.Cluster.Ready && !t.Initialized {
		out = append(out, "Cluster/"+t.Cluster.Name+": the control plane is not initialized yet")
	}
	if t.Infrastructure != nil {
		add(*t.Infrastructure)
	}
	for _, g := range t.groups() {
		add(g.Object)
		if g.Found && g.Blocker == (Blocker{}) && g.Replicas != nil && int(*g.Replicas) != len(g.Machines) {
			out = append(out, fmt.Sprintf("%s/%s: has %d Machines, wants %d", g.Kind, g.Name, len(g.Machines), *g.Replicas))
		}
	}
	for _, m := range t.Machines() {
		if m.Blocker == (Blocker{}) && !m.usable() {
			out = append(out, fmt.Sprintf("Machine/%s: Ready but %s, node %s", m.Name, m.Phase, dash(m.NodeName)))
		}
		add(m.Object)
	}
	return out
}

// Machines are the Cluster's Machines: the control plane's, then the workers', by name.
func (t *Tree) Machines() []Machine {
	var out []Machine
	for _, g := range t.groups() {
		out = append(out, g.Machines...)
	}
	return append(out, t.OtherMachines...)
}

// groups are the control plane, when there is one, and the MachineDeployments.
func (t *Tree) groups() []MachineGroup {
	if t.ControlPlane == nil {
		return t.MachineDeployments
	}
	return append([]MachineGroup{*t.ControlPlane}, t.MachineDeployments...)
}

// String renders the tree, one object per line, like clusterctl describe cluster: plain
// text, lines of at most 120 characters.
func (t *Tree) String() string {
	root := treeNode{label: "Cluster/" + t.Cluster.Name, state: t.Cluster.State}
	if t.Cluster.Blocker.Message != "" {
		root.state += "  " + oneLine(t.Cluster.Blocker.Message)
	}
	if t.Infrastructure != nil {
		root.children = append(root.children, treeNode{
			label: "ClusterInfrastructure - " + t.Infrastructure.Kind + "/" + t.Infrastructure.Name,
			state: objectState(*t.Infrastructure),
		})
	}
	if t.ControlPlane != nil {
		root.children = append(root.children, groupNode("ControlPlane - ", *t.ControlPlane))
	}
	if len(t.MachineDeployments) > 0 || len(t.OtherMachines) > 0 {
		workers := treeNode{label: "Workers"}
		for _, g := range t.MachineDeployments {
			workers.children = append(workers.children, groupNode("", g))
		}
		for _, m := range t.OtherMachines {
			workers.children = append(workers.children, machineNode(m))
		}
		root.children = append(root.children, workers)
	}
	var rows [][2]string
	root.render("", "", &rows)
	width := 0
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r[0]))
	}
	width = min(width, lineWidth/2)
	var b strings.Builder
	for _, r := range rows {
		line := r[0]
		if r[1] != "" {
			line += strings.Repeat(" ", max(width-utf8.RuneCountInString(r[0]), 0)) + "  " + r[1]
		}
		b.WriteString(truncate(line, lineWidth))
		b.WriteByte('\n')
	}
	return b.String()
}

// treeNode is one line of the rendered tree and the lines under it.
type treeNode struct {
	label, state string
	children     []treeNode
}

// render appends the node's line and its children's to rows as label and state.
func (n treeNode) render(prefix, childPrefix string, rows *[][2]string) {
	*rows = append(*rows, [2]string{prefix + n.label, n.state})
	for i, c := range n.children {
		if i == len(n.children)-1 {
			c.render(childPrefix+"└─", childPrefix+"  ", rows)
		} else {
			c.render(childPrefix+"├─", childPrefix+"│ ", rows)
		}
	}
}

func groupNode(prefix string, g MachineGroup) treeNode {
	n := treeNode{label: prefix + g.Kind + "/" + g.Name, state: objectState(g.Object)}
	if g.Found {
		desired := "?"
		if g.Replicas != nil {
			desired = fmt.Sprint(*g.Replicas)
		}
		n.state = fmt.Sprintf("%d/%s ready", g.ReadyReplicas, desired)
		if g.Version != "" {
			n.state += "  " + g.Version
		}
		if g.Blocker != (Blocker{}) {
			n.state += "  " + oneLine(g.Blocker.text())
		}
	}
	for _, m := range g.Machines {
		n.children = append(n.children, machineNode(m))
	}
	return n
}

func machineNode(m Machine) treeNode {
	state := m.Phase
	switch {
	case m.State == "Deleting":
		if m.Blocker.Message != "" {
			state += "  " + oneLine(m.Blocker.Message)
		}
	case m.Ready:
		state += "  Ready"
		if m.NodeName != "" {
			state += "  node " + m.NodeName
		}
	default:
		state += "  NotReady: " + oneLine(m.Blocker.text())
	}
	return treeNode{label: "Machine/" + m.Name, state: state}
}

// objectState is the state column of an object without replicas.
func objectState(o Object) string {
	if o.Ready || o.Blocker.text() == "" {
		return o.State
	}
	return o.State + ": " + oneLine(o.Blocker.text())
}

// usable is whether a Machine is ready for a user: Running, Ready and with a Node.
func (m Machine) usable() bool {
	return m.Phase == string(clusterv1.MachinePhaseRunning) && m.Ready && m.NodeName != ""
}

// String is the blocker as one line: the condition, its status and reason, and its message.
func (b Blocker) String() string {
	s := oneLine(b.Message)
	if b.Type == "" {
		return s
	}
	head := b.Type + " " + b.Status
	if b.Reason != "" {
		head += " (" + b.Reason + ")"
	}
	if s == "" {
		return head
	}
	return truncate(head+": "+s, 300)
}

// text is what the blocker says, for a tree line: the message, else the reason.
func (b Blocker) text() string {
	if b.Message != "" {
		return b.Message
	}
	if b.Reason != "" {
		return b.Reason
	}
	if b.Type != "" {
		return b.Type + " " + b.Status
	}
	return ""
}

// clusterWaits name what a Cluster waits for when one of its conditions is not True, in
// the order a cluster comes up.
var clusterWaits = []struct{ condition, state string }{
	{clusterv1.ClusterInfrastructureReadyCondition, "WaitingForInfrastructure"},
	{clusterv1.ClusterControlPlaneInitializedCondition, "WaitingForControlPlane"},
	{clusterv1.ClusterControlPlaneAvailableCondition, "WaitingForControlPlaneAvailable"},
	{clusterv1.ClusterWorkersAvailableCondition, "WaitingForWorkers"},
}

func clusterObject(cluster *clusterv1.Cluster) Object {
	o := Object{Kind: "Cluster", Name: cluster.Name}
	conds := cluster.GetConditions()
	o.Ready = isTrue(conds, clusterv1.ClusterAvailableCondition)
	if !cluster.DeletionTimestamp.IsZero() {
		o.Ready, o.State, o.Blocker = false, "Deleting", blocker(conds, clusterv1.DeletingCondition)
		return o
	}
	if o.Ready {
		o.State = "Ready"
		return o
	}
	for _, w := range clusterWaits {
		if c := findCondition(conds, w.condition); c != nil && c.Status != metav1.ConditionTrue {
			o.State, o.Blocker = w.state, blockerOf(c)
			return o
		}
	}
	o.State, o.Blocker = "NotReady", blocker(conds, clusterv1.ClusterAvailableCondition)
	if c := findCondition(conds, clusterv1.ClusterAvailableCondition); c != nil && c.Reason != "" {
		o.State = c.Reason
	}
	return o
}

// controlPlaneCauses are the conditions of a control plane that say why it is not
// available, most specific first; Cluster API's KubeadmControlPlane uses the same names.
var controlPlaneCauses = []string{
	controlplanev1.InitializedCondition,
	controlplanev1.EtcdClusterHealthyCondition,
	controlplanev1.ControlPlaneComponentsHealthyCondition,
	controlplanev1.MachinesReadyCondition,
}

func controlPlaneGroup(ref clusterv1.ContractVersionedObjectReference, obj *unstructured.Unstructured, err error) *MachineGroup {
	g := &MachineGroup{Object: referencedObject(ref, obj, err, controlPlaneCauses, clusterv1.AvailableCondition), Found: obj != nil}
	if obj == nil {
		return g
	}
	if replicas, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
		g.Replicas = ptr.To(int32(replicas))
	}
	ready, _, _ := unstructured.NestedInt64(obj.Object, "status", "readyReplicas")
	g.ReadyReplicas = int32(ready)
	g.Version, _, _ = unstructured.NestedString(obj.Object, "status", "version")
	if g.Version == "" {
		g.Version, _, _ = unstructured.NestedString(obj.Object, "spec", "version")
	}
	g.blockScaling(conditionsOf(obj))
	return g
}

func deploymentGroup(md *clusterv1.MachineDeployment) MachineGroup {
	conds := md.GetConditions()
	g := MachineGroup{
		Object:        objectWithConditions("MachineDeployment", md.Name, conds, []string{clusterv1.MachineDeploymentMachinesReadyCondition}, clusterv1.AvailableCondition),
		Found:         true,
		Replicas:      md.Spec.Replicas,
		ReadyReplicas: ptr.Deref(md.Status.ReadyReplicas, 0),
		Version:       md.Spec.Template.Spec.Version,
	}
	if !md.DeletionTimestamp.IsZero() {
		g.State, g.Ready, g.Blocker = "Deleting", false, blocker(conds, clusterv1.DeletingCondition)
	}
	g.blockScaling(conds)
	return g
}

// blockScaling makes a group that is scaling not ready: its scaling condition says what
// the scaling waits for.
func (g *MachineGroup) blockScaling(conds []metav1.Condition) {
	for _, scaling := range []string{clusterv1.ScalingUpCondition, clusterv1.ScalingDownCondition} {
		if c := findCondition(conds, scaling); c != nil && c.Status == metav1.ConditionTrue {
			g.Ready, g.Blocker = false, blockerOf(c)
			if g.State == "Ready" {
				g.State = "NotReady"
			}
			return
		}
	}
}

// infrastructureObject is the Cluster's infrastructure: ready when its Ready condition is
// True or, for a provider without one, when it reports status.initialization.provisioned.
func infrastructureObject(ref clusterv1.ContractVersionedObjectReference, obj *unstructured.Unstructured, err error) Object {
	o := referencedObject(ref, obj, err, nil, clusterv1.ReadyCondition)
	if obj == nil || findCondition(conditionsOf(obj), clusterv1.ReadyCondition) != nil || o.State == "Deleting" {
		return o
	}
	provisioned, _, _ := unstructured.NestedBool(obj.Object, "status", "initialization", "provisioned")
	o.Ready, o.State, o.Blocker = provisioned, "Ready", Blocker{}
	if !provisioned {
		o.State, o.Blocker = "NotReady", Blocker{Message: "not provisioned yet"}
	}
	return o
}

// referencedObject is the object a reference of the Cluster names: NotFound when it does not
// exist, Unknown when it could not be read.
func referencedObject(ref clusterv1.ContractVersionedObjectReference, obj *unstructured.Unstructured, err error, causes []string, summary string) Object {
	switch {
	case apierrors.IsNotFound(err):
		return Object{Kind: ref.Kind, Name: ref.Name, State: "NotFound", Blocker: Blocker{Message: "not found"}}
	case err != nil:
		return Object{Kind: ref.Kind, Name: ref.Name, State: "Unknown", Blocker: Blocker{Message: err.Error()}}
	}
	o := objectWithConditions(ref.Kind, ref.Name, conditionsOf(obj), causes, summary)
	if obj.GetDeletionTimestamp() != nil {
		o.State, o.Ready = "Deleting", false
	}
	return o
}

// objectWithConditions is an object whose summary condition (Ready or Available) says
// whether it is ready; when it is not, the first of causes that is not True says why.
func objectWithConditions(kind, name string, conds []metav1.Condition, causes []string, summary string) Object {
	o := Object{Kind: kind, Name: name, Ready: isTrue(conds, summary)}
	if o.Ready {
		o.State = "Ready"
		return o
	}
	o.State, o.Blocker = "NotReady", blocker(conds, summary)
	for _, cause := range causes {
		if c := findCondition(conds, cause); c != nil && c.Status != metav1.ConditionTrue {
			o.Blocker = blockerOf(c)
			break
		}
	}
	return o
}

// machineCauses are the conditions of a Machine that say why it is not Ready, in the order a
// Machine comes up.
var machineCauses = []string{
	clusterv1.MachineInfrastructureReadyCondition,
	clusterv1.MachineBootstrapConfigReadyCondition,
	clusterv1.MachineNodeReadyCondition,
	clusterv1.MachineNodeHealthyCondition,
}

func newMachine(m *clusterv1.Machine) Machine {
	conds := m.GetConditions()
	_, controlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]
	out := Machine{
		Object:       objectWithConditions("Machine", m.Name, conds, machineCauses, clusterv1.MachineReadyCondition),
		ControlPlane: controlPlane,
		Phase:        m.Status.Phase,
		NodeName:     m.Status.NodeRef.Name,
		Address:      machineAddress(m.Status.Addresses),
		Version:      m.Spec.Version,
	}
	if out.Phase == "" {
		out.Phase = string(clusterv1.MachinePhasePending)
	}
	if !m.DeletionTimestamp.IsZero() {
		out.Phase, out.State, out.Blocker = string(clusterv1.MachinePhaseDeleting), "Deleting", blocker(conds, clusterv1.MachineDeletingCondition)
	}
	return out
}

// machineAddress is a Machine's first internal IP, or its first address of another type.
func machineAddress(addresses clusterv1.MachineAddresses) string {
	for _, t := range []clusterv1.MachineAddressType{clusterv1.MachineInternalIP, clusterv1.MachineExternalIP, clusterv1.MachineInternalDNS, clusterv1.MachineExternalDNS} {
		for _, a := range addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

func conditionsOf(obj *unstructured.Unstructured) []metav1.Condition {
	// A provider's conditions that do not parse are shown as none.
	conds, _ := conditions.UnstructuredGetAll(obj)
	return conds
}

func findCondition(conds []metav1.Condition, conditionType string) *metav1.Condition {
	i := slices.IndexFunc(conds, func(c metav1.Condition) bool { return c.Type == conditionType })
	if i < 0 {
		return nil
	}
	return &conds[i]
}

func isTrue(conds []metav1.Condition, conditionType string) bool {
	c := findCondition(conds, conditionType)
	return c != nil && c.Status == metav1.ConditionTrue
}

// blocker is the condition conditionType as a Blocker, or one that says it is not reported.
func blocker(conds []metav1.Condition, conditionType string) Blocker {
	if c := findCondition(conds, conditionType); c != nil {
		return blockerOf(c)
	}
	return Blocker{Type: conditionType, Status: string(metav1.ConditionUnknown), Message: conditionType + " is not reported yet"}
}

func blockerOf(c *metav1.Condition) Blocker {
	return Blocker{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}

// oneLine folds a condition message onto one line: Cluster API's aggregated messages are
// lists of "* Kind name: message" lines, some under a heading that ends in a colon.
func oneLine(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "* "))
		switch {
		case line == "":
			continue
		case b.Len() == 0:
		case strings.HasSuffix(b.String(), ":"):
			b.WriteString(" ")
		default:
			b.WriteString("; ")
		}
		b.WriteString(line)
	}
	return b.String()
}

// truncate cuts s to n characters, ending it with an ellipsis when it was longer.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
