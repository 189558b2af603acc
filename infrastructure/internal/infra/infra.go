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

// Package infra holds what Talon's infrastructure providers (Docker and bare metal) do the
// same way: summarizing conditions into Ready, and linking a workload Node to its Machine
// through spec.providerID.
package infra

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
)

// Object is an infrastructure object with conditions.
type Object interface {
	client.Object
	conditions.Setter
}

// PatchReady summarizes conditionTypes into obj's Ready condition and patches obj, owning
// those conditions, Ready and Paused.
func PatchReady(ctx context.Context, h *patch.Helper, kind string, obj Object, conditionTypes ...string) error {
	summaryErr := conditions.SetSummaryCondition(obj, obj, infrav1.ReadyCondition, conditions.ForConditionTypes(conditionTypes))
	owned := append([]string{clusterv1.PausedCondition, infrav1.ReadyCondition}, conditionTypes...)
	if err := h.Patch(ctx, obj, patch.WithOwnedConditions{Conditions: owned}); err != nil {
		return errors.Join(summaryErr, fmt.Errorf("failed to patch %s %s: %w", kind, klog.KObj(obj), err))
	}
	return summaryErr
}

// SetTruef sets condition to True with reason Provisioned and a formatted message.
func SetTruef(obj conditions.Setter, condition, format string, args ...any) {
	conditions.Set(obj, metav1.Condition{Type: condition, Status: metav1.ConditionTrue, Reason: infrav1.ProvisionedReason, Message: fmt.Sprintf(format, args...)})
}

// SetFalsef sets condition to False with reason and a formatted message.
func SetFalsef(obj conditions.Setter, condition, reason, format string, args ...any) {
	conditions.Set(obj, metav1.Condition{Type: condition, Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// NodeLinker sets spec.providerID on workload Nodes, through Cluster API's ClusterCache, so
// that Cluster API links each Node to its Machine: without a cloud provider nobody else does.
type NodeLinker struct {
	// ClusterCache reaches the workload clusters.
	ClusterCache clustercache.ClusterCache
	// Controller is woken by Node events, through MapNode.
	Controller clustercache.SourceWatcher[ctrl.Request]
	// Name names the Node watch, e.g. "talosdockermachine".
	Name string
	// MapNode maps a Node of a cluster in a namespace to the objects to reconcile.
	MapNode func(namespace string) handler.MapFunc
}

// Link sets providerID on the Node named name, or else on the Node with address, and
// records the outcome on obj's NodeProviderIDSet condition. It returns how soon to look
// again when it has to wait for something no event reports.
func (l *NodeLinker) Link(ctx context.Context, cluster *clusterv1.Cluster, obj conditions.Setter, name, address, providerID string) (ctrl.Result, error) {
	if conditions.IsTrue(obj, infrav1.NodeProviderIDSetCondition) {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(cluster)
	if !conditions.IsTrue(cluster, clusterv1.ClusterControlPlaneInitializedCondition) {
		SetFalsef(obj, infrav1.NodeProviderIDSetCondition, infrav1.WaitingForNodeReason, "Waiting for the control plane of Cluster %s to be initialized", cluster.Name)
		return ctrl.Result{}, nil
	}
	if err := l.ClusterCache.Watch(ctx, key, clustercache.NewWatcher(clustercache.WatcherOptions{
		Name: l.Name + "-watchNodes", Watcher: l.Controller, Kind: &corev1.Node{},
		EventHandler: handler.EnqueueRequestsFromMapFunc(l.MapNode(cluster.Namespace)),
	})); err != nil {
		SetFalsef(obj, infrav1.NodeProviderIDSetCondition, infrav1.WaitingForNodeReason, "Waiting for a connection to the workload cluster: %v", err)
		return ctrl.Result{RequeueAfter: Converging}, nil
	}
	workload, err := l.ClusterCache.GetClient(ctx, key)
	if err != nil {
		SetFalsef(obj, infrav1.NodeProviderIDSetCondition, infrav1.WaitingForNodeReason, "Waiting for a connection to the workload cluster: %v", err)
		return ctrl.Result{RequeueAfter: Converging}, nil
	}
	nodes := &corev1.NodeList{}
	if err := workload.List(ctx, nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list the Nodes of Cluster %s: %w", cluster.Name, err)
	}
	// A kubelet started with --provider-id registered linked already.
	if slices.ContainsFunc(nodes.Items, func(n corev1.Node) bool { return n.Spec.ProviderID == providerID }) {
		SetTruef(obj, infrav1.NodeProviderIDSetCondition, "A Node has providerID %s", providerID)
		return ctrl.Result{}, nil
	}
	// By name, else by address: an address may have belonged to a Node of a deleted Machine.
	byName := slices.IndexFunc(nodes.Items, func(n corev1.Node) bool { return name != "" && n.Name == name })
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if byName >= 0 && i != byName || byName < 0 && !hasAddress(n, address) {
			continue
		}
		switch n.Spec.ProviderID {
		case providerID:
		case "":
			patch := client.MergeFrom(n.DeepCopy())
			n.Spec.ProviderID = providerID
			if err := workload.Patch(ctx, n, patch); err != nil {
				return ctrl.Result{}, fmt.Errorf("failed to set the providerID of Node %s: %w", n.Name, err)
			}
		default:
			SetFalsef(obj, infrav1.NodeProviderIDSetCondition, infrav1.ConflictReason,
				"Node %s has providerID %s, not %s: delete the Node so that it registers again", n.Name, n.Spec.ProviderID, providerID)
			return ctrl.Result{RequeueAfter: RetryConflict}, nil
		}
		SetTruef(obj, infrav1.NodeProviderIDSetCondition, "Node %s has providerID %s", n.Name, providerID)
		return ctrl.Result{}, nil
	}
	what := "at " + address
	if name != "" {
		what = name
	}
	SetFalsef(obj, infrav1.NodeProviderIDSetCondition, infrav1.WaitingForNodeReason, "Waiting for node %s to register in the workload cluster", what)
	return ctrl.Result{}, nil
}

func hasAddress(n *corev1.Node, address string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address == address {
			return true
		}
	}
	return false
}
