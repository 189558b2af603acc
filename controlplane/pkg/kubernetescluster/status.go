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

package kubernetescluster

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
)

// Reasons of the Ready condition.
const (
	// ReasonRunning: every node asked for is ready and up to date.
	ReasonRunning = "Running"
	// ReasonProvisioning: the cluster is being built.
	ReasonProvisioning = "Provisioning"
	// ReasonUpdating: a running cluster is scaling or changing version.
	ReasonUpdating = "Updating"
	// ReasonDeleting: the Cluster and its nodes are being deleted.
	ReasonDeleting = "Deleting"
)

// Observed is what the controller read of a KubernetesCluster's Cluster.
type Observed struct {
	// Cluster is the KubernetesCluster's Cluster.
	Cluster *clusterv1.Cluster
	// MachineDeployments and Machines are the Cluster's.
	MachineDeployments []clusterv1.MachineDeployment
	Machines           []clusterv1.Machine
	// Version is the resolved version the Cluster was given.
	Version string
	// Paused is set when the Cluster differs from the KubernetesCluster and is not changed
	// because it is paused (spec.paused, as clusterctl move leaves it while it runs).
	Paused bool
}

// SetStatus writes into kc's status the phase, message, nodes, versions, endpoints and Ready
// condition that o shows, as of now, by who.
func SetStatus(kc *vitiv1.KubernetesCluster, o Observed, now metav1.Time, who string) {
	s := &kc.Status
	cp, pools := groups(kc, o)
	state := vitiv1.ClusterState{
		Cluster: vitiv1.ClusterDetails{ControlPlane: cp, NodePools: pools},
		Created: o.Cluster.CreationTimestamp, LastUpdated: s.State.LastUpdated, LastUpdatedBy: s.State.LastUpdatedBy,
	}
	running := reportedVersion(o.Cluster)
	if running != "" {
		state.Versions = []vitiv1.Version{{Name: "kubernetes", Version: running}}
	}
	if ep := o.Cluster.Spec.ControlPlaneEndpoint; ep.IsValid() {
		state.Endpoints = []vitiv1.Endpoint{{Name: "kubernetes", Address: "https://" + net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))}}
	}

	var waiting []string
	if cp.Status != vitiv1.StatusOK {
		waiting = append(waiting, "control plane: "+cp.Message)
	}
	for _, p := range pools {
		if p.Status != vitiv1.StatusOK {
			waiting = append(waiting, "pool "+p.Name+": "+p.Message)
		}
	}
	if running != o.Version {
		waiting = append(waiting, fmt.Sprintf("the control plane runs %s, not yet %s", cmp.Or(running, "mixed versions"), o.Version))
	}
	if o.Paused {
		waiting = append(waiting, "Cluster "+o.Cluster.Name+" is paused (spec.paused): the KubernetesCluster's changes reach it once it is resumed")
	}
	if !meta.IsStatusConditionTrue(o.Cluster.Status.Conditions, clusterv1.AvailableCondition) {
		waiting = append(waiting, "Cluster "+o.Cluster.Name+" is not Available yet (kubectl describe cluster "+o.Cluster.Name+")")
	}

	phase, reason, message := vitiv1.PhaseRunning, ReasonRunning, fmt.Sprintf("Kubernetes %s on %d control-plane and %d worker nodes", o.Version, cp.Scale, workers(pools))
	if len(waiting) > 0 {
		phase, reason = vitiv1.PhaseProvisioning, ReasonProvisioning
		// A cluster that ran, or failed after its control plane came up, is updating.
		wasBuilt := s.Phase == vitiv1.PhaseRunning || s.Phase == vitiv1.PhaseUpdating ||
			s.Phase == vitiv1.PhaseFailed && meta.IsStatusConditionTrue(o.Cluster.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)
		if wasBuilt {
			phase, reason = vitiv1.PhaseUpdating, ReasonUpdating
		}
		message = strings.Join(waiting, "; ")
	}
	setReady(kc, phase, reason, message, state, now, who)
}

// SetFailed records that the cluster cannot go on until a person acts: message says what to do.
func SetFailed(kc *vitiv1.KubernetesCluster, reason, message string, now metav1.Time, who string) {
	setReady(kc, vitiv1.PhaseFailed, reason, message, kc.Status.State, now, who)
}

// SetDeleting records that the Cluster is being deleted.
func SetDeleting(kc *vitiv1.KubernetesCluster, message string, now metav1.Time, who string) {
	setReady(kc, vitiv1.PhaseDeleting, ReasonDeleting, message, kc.Status.State, now, who)
}

// setReady sets the phase, the message and the Ready condition, and state; the state's
// lastUpdated moves only when something in the status changes.
func setReady(kc *vitiv1.KubernetesCluster, phase, reason, message string, state vitiv1.ClusterState, now metav1.Time, who string) {
	s := &kc.Status
	before := s.DeepCopy()
	s.ObservedGeneration = kc.Generation
	s.Phase, s.Message, s.State = phase, message, state
	status := metav1.ConditionFalse
	if phase == vitiv1.PhaseRunning {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: vitiv1.ReadyCondition, Status: status, Reason: reason,
		Message: message, ObservedGeneration: kc.Generation, LastTransitionTime: now})
	s.State.LastUpdated, s.State.LastUpdatedBy = before.State.LastUpdated, before.State.LastUpdatedBy
	if !statusEqual(before, s) {
		s.State.LastUpdated, s.State.LastUpdatedBy = now, who
	}
}

func statusEqual(a, b *vitiv1.KubernetesClusterStatus) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, s := range []*vitiv1.KubernetesClusterStatus{a, b} {
		s.State.LastUpdated, s.State.LastUpdatedBy = metav1.Time{}, ""
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}

// groups are the control plane's and each pool's state.
func groups(kc *vitiv1.KubernetesCluster, o Observed) (vitiv1.NodeGroupStatus, []vitiv1.NodeGroupStatus) {
	cpStatus := ptr.Deref(o.Cluster.Status.ControlPlane, clusterv1.ClusterControlPlaneStatus{})
	cp := group("", kc.Spec.Topology.ControlPlane.Replicas, cpStatus.Replicas, cpStatus.ReadyReplicas, cpStatus.UpToDateReplicas,
		nodesOf(o.Machines, func(m *clusterv1.Machine) bool { _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; return ok }))
	var pools []vitiv1.NodeGroupStatus
	for _, pool := range kc.Spec.Topology.Workers.NodePools {
		i := slices.IndexFunc(o.MachineDeployments, func(md clusterv1.MachineDeployment) bool {
			return md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] == pool.Name
		})
		if i < 0 {
			pools = append(pools, vitiv1.NodeGroupStatus{Name: pool.Name, Status: vitiv1.StatusWorking, Message: "waiting for its MachineDeployment"})
			continue
		}
		md := o.MachineDeployments[i]
		desired := pool.Replicas
		if pool.Autoscaling.Enabled {
			desired = ptr.Deref(md.Spec.Replicas, 0)
		}
		pools = append(pools, group(pool.Name, desired, md.Status.Replicas, md.Status.ReadyReplicas, md.Status.UpToDateReplicas,
			nodesOf(o.Machines, func(m *clusterv1.Machine) bool {
				return m.Labels[clusterv1.MachineDeploymentNameLabel] == md.Name
			})))
	}
	return cp, pools
}

func group(name string, desired int32, replicas, ready, upToDate *int32, nodes []string) vitiv1.NodeGroupStatus {
	g := vitiv1.NodeGroupStatus{Name: name, Scale: ptr.Deref(ready, 0), Nodes: nodes, Status: vitiv1.StatusOK}
	r, u := ptr.Deref(replicas, 0), ptr.Deref(upToDate, 0)
	if g.Scale != desired || u != desired || r != desired {
		g.Status = vitiv1.StatusWorking
		g.Message = fmt.Sprintf("%d of %d nodes ready, %d up to date, %d in all", g.Scale, desired, u, r)
	}
	return g
}

// nodesOf returns the sorted names of the Nodes of the Machines that match.
func nodesOf(machines []clusterv1.Machine, match func(*clusterv1.Machine) bool) []string {
	var nodes []string
	for i := range machines {
		if m := &machines[i]; match(m) && m.Status.NodeRef.Name != "" {
			nodes = append(nodes, m.Status.NodeRef.Name)
		}
	}
	slices.Sort(nodes)
	return nodes
}

// reportedVersion is the version every control-plane node runs, or empty while they differ.
func reportedVersion(c *clusterv1.Cluster) string {
	if cp := c.Status.ControlPlane; cp != nil && len(cp.Versions) == 1 {
		return cp.Versions[0].Version
	}
	return ""
}

func workers(pools []vitiv1.NodeGroupStatus) int32 {
	var n int32
	for _, p := range pools {
		n += p.Scale
	}
	return n
}
