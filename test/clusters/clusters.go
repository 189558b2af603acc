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

// Package clusters holds the checks end-to-end tests make of a cluster as a user sees it:
// its Machines in the management cluster, its Nodes in the workload cluster.
package clusters

import (
	"context"

	. "github.com/onsi/gomega" //nolint:staticcheck // the assertions read as the tests' do
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UsableMachines are the Cluster's Machines; it fails g unless each is Running, not being
// deleted, with a Node, and Ready.
func UsableMachines(ctx context.Context, g Gomega, c client.Client, ns, cluster string) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})).To(Succeed())
	for i := range list.Items {
		m := &list.Items[i]
		g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s is being deleted", m.Name)
		g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "Machine %s", m.Name)
		g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "Machine %s has a Node", m.Name)
		g.Expect(conditions.IsTrue(m, clusterv1.ReadyCondition)).To(BeTrue(), "Machine %s Ready", m.Name)
	}
	return list.Items
}

// ReadyNodes are the names of the workload cluster's Ready Nodes.
func ReadyNodes(ctx context.Context, g Gomega, c client.Client) []string {
	nodes := &corev1.NodeList{}
	g.Expect(c.List(ctx, nodes)).To(Succeed())
	var ready []string
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = append(ready, n.Name)
			}
		}
	}
	return ready
}
