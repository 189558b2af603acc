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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// drain cordons the Node of m and evicts its Pods, as kubectl drain does: mirror Pods and
// DaemonSet Pods stay (the kubelet and the DaemonSet controller own them), and an eviction
// a PodDisruptionBudget refuses is tried again at the next call. It returns how many Pods
// are left to go; a Pod being deleted counts as gone.
func (r *Reconciler) drain(ctx context.Context, s *scope, m *clusterv1.Machine) (int, error) {
	kube, node, err := r.nodeClient(ctx, s, m)
	if err != nil {
		return 0, err
	}
	return drainNode(ctx, kube, node)
}

// drainNode cordons node and evicts its Pods (see drain).
func drainNode(ctx context.Context, kube *kubernetes.Clientset, node string) (int, error) {
	if err := setUnschedulable(ctx, kube, node, true); err != nil {
		return 0, err
	}
	pods, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return 0, fmt.Errorf("failed to list the Pods of Node %s: %w", node, err)
	}
	left := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !evictable(pod) {
			continue
		}
		left++
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
		err := kube.CoreV1().Pods(pod.Namespace).EvictV1(ctx, eviction)
		switch {
		case err == nil, apierrors.IsNotFound(err):
			left--
		case apierrors.IsTooManyRequests(err):
			// A PodDisruptionBudget holds it for now.
		default:
			return 0, fmt.Errorf("failed to evict Pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return left, nil
}

// evictable reports whether drain evicts pod: not a mirror Pod, not a DaemonSet's, not
// finished and not being deleted already.
func evictable(pod *corev1.Pod) bool {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "DaemonSet" {
			return false
		}
	}
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	return !finished && pod.DeletionTimestamp.IsZero()
}

// uncordon makes the Node of m schedulable again.
func (r *Reconciler) uncordon(ctx context.Context, s *scope, m *clusterv1.Machine) error {
	kube, node, err := r.nodeClient(ctx, s, m)
	if err != nil {
		return err
	}
	return setUnschedulable(ctx, kube, node, false)
}

// nodeClient is a client of the workload cluster and the name of m's Node.
func (r *Reconciler) nodeClient(ctx context.Context, s *scope, m *clusterv1.Machine) (*kubernetes.Clientset, string, error) {
	kube, err := r.workloadClient(ctx, s)
	if err != nil {
		return nil, "", fmt.Errorf("no connection to the workload cluster: %w", err)
	}
	node := nodeName(m, s.configs)
	if c, ok := s.components[m.Name]; ok {
		node = c.node
	}
	return kube, node, nil
}

// setUnschedulable cordons (or uncordons) a Node.
func setUnschedulable(ctx context.Context, kube *kubernetes.Clientset, node string, unschedulable bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
	if _, err := kube.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to set Node %s unschedulable=%t: %w", node, unschedulable, err)
	}
	return nil
}
