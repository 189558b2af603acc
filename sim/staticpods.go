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
	"crypto/sha256"
	"encoding/hex"
	"errors"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Annotations a kubelet puts on the mirror Pod of a static pod.
const (
	mirrorAnnotation = "kubernetes.io/config.mirror"
	sourceAnnotation = "kubernetes.io/config.source"
	hashAnnotation   = "kubernetes.io/config.hash"
)

// staticPod is one of the static pods Talos runs on a control-plane node.
type staticPod struct {
	name  string
	image string
	// ready reports whether the component serves; kube-scheduler is not simulated (there
	// are no workloads to schedule), so its pod is reported as running.
	ready bool
}

func (n *Node) staticPods(cfg talosconfig.Provider) []staticPod {
	n.mu.Lock()
	defer n.mu.Unlock()
	return []staticPod{
		{name: "kube-apiserver", image: cfg.Cluster().APIServer().Image(), ready: n.apiServer.running() && n.etcd != nil},
		{name: "kube-controller-manager", image: cfg.Cluster().ControllerManager().Image(), ready: n.controllerManager.running()},
		{name: "kube-scheduler", image: cfg.Cluster().Scheduler().Image(), ready: true},
	}
}

// publishMirrorPods creates or updates the mirror Pods of the node's static control-plane
// pods in kube-system, named <component>-<node>, owned by the Node, with the configured
// images and a Ready condition that follows the component's process.
func (n *Node) publishMirrorPods(ctx context.Context, cfg talosconfig.Provider, c *kubernetes.Clientset, node *corev1.Node) error {
	pods := n.staticPods(cfg)
	errs := make([]error, 0, len(pods))
	for _, sp := range pods {
		errs = append(errs, n.publishMirrorPod(ctx, c, node, sp))
	}
	return errors.Join(errs...)
}

func (n *Node) publishMirrorPod(ctx context.Context, c *kubernetes.Clientset, node *corev1.Node, sp staticPod) error {
	pods := c.CoreV1().Pods(metav1.NamespaceSystem)
	sum := sha256.Sum256([]byte(sp.name + "\x00" + sp.image))
	hash := hex.EncodeToString(sum[:16])
	pod, err := pods.Get(ctx, sp.name+"-"+node.Name, metav1.GetOptions{})
	if err == nil && pod.Annotations[hashAnnotation] != hash {
		// A changed static pod gets a new mirror Pod, as the kubelet does.
		if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		err = apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
	}
	if apierrors.IsNotFound(err) {
		pod, err = pods.Create(ctx, mirrorPod(node, sp, hash), metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	status := corev1.ConditionFalse
	if sp.ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	started := pod.CreationTimestamp
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		HostIP: n.ip.String(), PodIP: n.ip.String(),
		HostIPs: []corev1.HostIP{{IP: n.ip.String()}}, PodIPs: []corev1.PodIP{{IP: n.ip.String()}},
		StartTime: &started,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: sp.name, Image: sp.image, ImageID: sp.image, Ready: sp.ready, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}},
	}
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

func mirrorPod(node *corev1.Node, sp staticPod, hash string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: sp.name + "-" + node.Name, Namespace: metav1.NamespaceSystem,
			Labels:      map[string]string{"k8s-app": sp.name, "tier": "control-plane"},
			Annotations: map[string]string{mirrorAnnotation: hash, hashAnnotation: hash, sourceAnnotation: "file"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:          node.Name,
			HostNetwork:       true,
			PriorityClassName: "system-cluster-critical",
			Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:        []corev1.Container{{Name: sp.name, Image: sp.image}},
		},
	}
}
