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
	"strings"
	"time"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	machinetype "github.com/siderolabs/talos/pkg/machinery/config/machine"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// heartbeat is how often the kubelet stand-in renews its Lease and Ready condition.
const heartbeat = 10 * time.Second

// startKubelet runs the kubelet stand-in until the node's services stop: it registers the
// Node (name, labels, taints, addresses, kubelet version from the config), keeps it Ready
// and renews its Lease, as a kubelet does. It runs no workloads.
func (n *Node) startKubelet(cfg talosconfig.Provider, c *kubernetes.Clientset) {
	n.mu.Lock()
	ctx := n.servicesCtx
	name := n.hostnameLocked()
	n.mu.Unlock()
	go func() {
		for {
			if err := n.registerNode(ctx, cfg, c, name); err != nil && ctx.Err() == nil {
				n.opts.Log.V(1).Info("Kubelet stand-in failed to report", "reason", err.Error())
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(heartbeat):
			}
		}
	}()
}

func (n *Node) registerNode(ctx context.Context, cfg talosconfig.Provider, c *kubernetes.Clientset, name string) error {
	now := metav1.Now()
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = c.CoreV1().Nodes().Create(ctx, n.desiredNode(cfg, name), metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message:           "kubelet stand-in of the Talon node simulator is posting ready status",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip.String()}, {Type: corev1.NodeHostName, Address: name}}
	node.Status.NodeInfo.KubeletVersion = kubeletVersion(cfg)
	node.Status.NodeInfo.OSImage = "Talos (" + n.opts.TalosVersion + ", simulated)"
	node.Status.NodeInfo.OperatingSystem, node.Status.NodeInfo.Architecture = "linux", "amd64"
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return renewLease(ctx, c, name)
}

func (n *Node) desiredNode(cfg talosconfig.Provider, name string) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
	}}}
	for k, v := range cfg.Machine().NodeLabels() {
		node.Labels[k] = v
	}
	if cfg.Machine().Type() == machinetype.TypeControlPlane {
		node.Labels["node-role.kubernetes.io/control-plane"] = ""
		if !cfg.Cluster().ScheduleOnControlPlanes() {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule})
		}
	}
	for key, value := range cfg.Machine().NodeTaints() {
		val, effect, _ := strings.Cut(value, ":")
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: key, Value: val, Effect: corev1.TaintEffect(effect)})
	}
	return node
}

// kubeletVersion is the tag of the configured kubelet image, e.g. v1.36.3.
func kubeletVersion(cfg talosconfig.Provider) string {
	image := cfg.Machine().Kubelet().Image()
	if i := strings.LastIndex(image, ":"); i >= 0 {
		return image[i+1:]
	}
	return image
}

func renewLease(ctx context.Context, c *kubernetes.Clientset, name string) error {
	leases := c.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}
