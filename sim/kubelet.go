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
	"maps"
	"strings"
	"time"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	machinetype "github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// heartbeat is how often the kubelet stand-in renews its Lease and Ready condition.
const heartbeat = 10 * time.Second

// lightHeartbeat is how often the kubelet stand-in of a light node posts its unchanged
// status: a kubelet's default nodeStatusReportFrequency. Light nodes have no Lease to renew
// in between; a change (a config, a shutdown) is posted at once all the same.
const lightHeartbeat = 5 * time.Minute

// startKubelet runs the kubelet stand-in with client c until the node's services stop: it
// registers the Node (name, labels, taints, addresses, kubelet version from the current
// config), keeps it Ready, renews its Lease and, on a control-plane node, publishes the
// mirror Pods of the static control-plane pods, as a kubelet does. It runs no workloads. A
// partitioned node sends nothing; a config change is reported at once.
func (n *Node) startKubelet(c *kubernetes.Clientset) {
	n.mu.Lock()
	ctx := n.servicesCtx
	n.kubelet = c
	n.mu.Unlock()
	n.services.running("kubelet")
	go func() {
		for {
			n.mu.Lock()
			cfg, partitioned := n.cfg, n.partitioned
			n.mu.Unlock()
			next := n.reportInterval()
			if cfg != nil && !partitioned {
				if err := n.report(ctx, cfg, c); err != nil && ctx.Err() == nil {
					n.opts.Log.V(1).Info("Kubelet stand-in failed to report", "reason", err.Error())
					// A light node's heartbeat is minutes: retry a failed report sooner.
					next = min(next, heartbeat)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-n.configChanged:
			case <-time.After(next):
			}
		}
	}()
}

// report is one heartbeat: the Node and its Ready condition, the Lease, the mirror Pods.
func (n *Node) report(ctx context.Context, cfg talosconfig.Provider, c *kubernetes.Clientset) error {
	var node *corev1.Node
	// kube-controller-manager writes the Node too (taints, annotations): retry on conflicts.
	for attempt := 0; ; attempt++ {
		var err error
		if node, err = n.registerNode(ctx, cfg, c); err == nil {
			err = n.postStatus(ctx, cfg, c, node, corev1.ConditionTrue, "KubeletReady",
				"kubelet stand-in of the Talon node simulator is posting ready status")
		}
		if err == nil {
			break
		}
		// A conflict, or NodeRestriction refusing an update based on a Node whose taints
		// changed meanwhile (a cordon): read the Node again.
		if (!apierrors.IsConflict(err) && !apierrors.IsForbidden(err)) || attempt == 3 {
			return err
		}
	}
	n.setNodeReady(true)
	// The in-memory API server of light nodes serves no Leases (nothing reads them there:
	// no kube-controller-manager watches node heartbeats).
	if n.opts.Light == nil {
		if err := renewLease(ctx, c, node.Name); err != nil {
			return err
		}
	}
	if cfg.Machine().Type() == machinetype.TypeControlPlane {
		return n.publishMirrorPods(ctx, cfg, c, node)
	}
	return nil
}

// kubeletRestart is how long the kubelet is down when a new config restarts it.
const kubeletRestart = 500 * time.Millisecond

// restartKubeletIfChanged restarts the kubelet service when a new config changes its image
// (its version), as Talos does: the service finishes, starts again, and the kubelet
// reports its Node with the new version.
func (n *Node) restartKubeletIfChanged(old, cfg talosconfig.Provider) {
	if old == nil || kubeletConfig(old).Image() == kubeletConfig(cfg).Image() {
		return
	}
	n.mu.Lock()
	running, ctx := n.kubelet != nil, n.servicesCtx
	n.mu.Unlock()
	if !running || ctx == nil {
		return
	}
	n.opts.Log.Info("Restarting the kubelet for the new config", "image", kubeletConfig(cfg).Image())
	n.services.stopped("kubelet", serviceFinished, "Service finished successfully")
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(kubeletRestart):
		}
		n.services.running("kubelet")
		n.notifyConfigChanged()
	}()
}

// setNodeReady records whether the kubelet stand-in last reported its Node Ready, which the
// machine's readiness follows.
func (n *Node) setNodeReady(ready bool) {
	n.mu.Lock()
	changed := n.nodeIsReady != ready
	n.nodeIsReady = ready
	n.mu.Unlock()
	if changed {
		n.publishMachineStatus()
	}
}

// nodeReady reports whether the kubelet stand-in last reported its Node Ready.
func (n *Node) nodeReady() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodeIsReady
}

// registerNode creates the Node, or brings its labels up to date with the config.
func (n *Node) registerNode(ctx context.Context, cfg talosconfig.Provider, c *kubernetes.Clientset) (*corev1.Node, error) {
	desired := n.desiredNode(cfg)
	node, err := c.CoreV1().Nodes().Get(ctx, desired.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return c.CoreV1().Nodes().Create(ctx, desired, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, err
	}
	labels := maps.Clone(node.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, desired.Labels)
	if maps.Equal(labels, node.Labels) {
		return node, nil
	}
	node.Labels = labels
	return c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
}

// postStatus reports the node's conditions (Ready, and no memory, disk or PID pressure, as
// a kubelet with room to spare does), addresses and versions.
func (n *Node) postStatus(ctx context.Context, cfg talosconfig.Provider, c *kubernetes.Clientset, node *corev1.Node,
	ready corev1.ConditionStatus, reason, message string) error {
	now := metav1.Now()
	condition := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		transition := now
		for _, cond := range node.Status.Conditions {
			if cond.Type == t && cond.Status == status {
				transition = cond.LastTransitionTime
			}
		}
		return corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: transition}
	}
	node.Status.Conditions = []corev1.NodeCondition{
		condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		condition(corev1.NodeReady, ready, reason, message),
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip.String()}, {Type: corev1.NodeHostName, Address: node.Name}}
	node.Status.NodeInfo.KubeletVersion = kubeletVersion(cfg)
	node.Status.NodeInfo.OSImage = "Talos (" + n.talosVersion() + ", simulated)"
	node.Status.NodeInfo.OperatingSystem, node.Status.NodeInfo.Architecture = "linux", "amd64"
	_, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// reportShutdown posts NotReady, as a kubelet shutting down gracefully does; a node that
// loses power cannot, and kube-controller-manager marks it NotReady once its Lease expires.
func (n *Node) reportShutdown(ctx context.Context) {
	n.mu.Lock()
	c, cfg := n.kubelet, n.cfg
	n.mu.Unlock()
	if c == nil || cfg == nil {
		return
	}
	n.setNodeReady(false)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	node, err := c.CoreV1().Nodes().Get(ctx, n.nodename(), metav1.GetOptions{})
	if err == nil {
		err = n.postStatus(ctx, cfg, c, node, corev1.ConditionFalse, "KubeletNotReady", "node is shutting down")
	}
	if err != nil {
		n.opts.Log.V(1).Info("Kubelet stand-in could not report the shutdown", "reason", err.Error())
	}
}

func (n *Node) desiredNode(cfg talosconfig.Provider) *corev1.Node {
	name := n.nodename()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
	}}}
	// machine.nodeLabels and machine.nodeTaints, with the control-plane label, and taint
	// unless cluster.allowSchedulingOnControlPlanes, that Talos adds on a control-plane node.
	var labels, taints map[string]string
	if nodeConfig := cfg.K8sNodeConfig(); nodeConfig != nil {
		labels, taints = nodeConfig.Labels(), nodeConfig.Taints()
	}
	maps.Copy(node.Labels, labels)
	if cfg.Machine().Type() == machinetype.TypeControlPlane {
		node.Labels[constants.LabelNodeRoleControlPlane] = ""
		if taints[constants.LabelNodeRoleControlPlane] == constants.TaintEffectNoSchedule {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: constants.LabelNodeRoleControlPlane, Effect: corev1.TaintEffectNoSchedule})
			taints = maps.Clone(taints)
			delete(taints, constants.LabelNodeRoleControlPlane)
		}
	}
	for key, value := range taints {
		val, effect, _ := strings.Cut(value, ":")
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: key, Value: val, Effect: corev1.TaintEffect(effect)})
	}
	return node
}

// kubeletVersion is the tag of the configured kubelet image, e.g. v1.36.3.
func kubeletVersion(cfg talosconfig.Provider) string {
	return imageTag(kubeletConfig(cfg).Image())
}

// imageTag is the tag of an image reference: ghcr.io/siderolabs/kubelet:v1.36.3 → v1.36.3.
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i >= 0 && !strings.Contains(image[i:], "/") {
		return image[i+1:]
	}
	return ""
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

// reportInterval is how often the kubelet stand-in reports while nothing changes.
func (n *Node) reportInterval() time.Duration {
	if n.opts.Light != nil {
		return lightHeartbeat
	}
	return heartbeat
}
