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
	"slices"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	// configVersion is the version of the pod's definition (APIServerConfig and the like),
	// which Talos puts on the pod and talosctl upgrade-k8s waits for.
	configVersion string
	// started is when the component's process started (zero before it has); restarts
	// counts its processes that exited before it.
	started  time.Time
	restarts int32
}

type staticPods []staticPod

func (n *Node) staticPods(cfg talosconfig.Provider) staticPods {
	versions := map[string]string{}
	for _, ptr := range []resource.Pointer{k8s.NewAPIServerConfig(k8s.APIServerConfigID).Metadata(), k8s.NewControllerManagerConfig(k8s.ControllerManagerConfigID).Metadata(), k8s.NewSchedulerConfig(k8s.SchedulerConfigID).Metadata()} {
		if r, err := n.res.Get(context.Background(), ptr); err == nil {
			versions[ptr.ID()] = r.Metadata().Version().String()
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return staticPods{
		staticPod{name: "kube-apiserver", image: cfg.K8sAPIServerConfig().Image(), ready: n.apiServer.running() && n.etcd != nil}.of(n.apiServer),
		staticPod{name: "kube-controller-manager", image: cfg.K8sControllerManagerConfig().Image(), ready: n.controllerManager.running()}.of(n.controllerManager),
		{name: "kube-scheduler", image: cfg.K8sSchedulerConfig().Image(), ready: true},
	}.withVersions(versions)
}

// of is sp with the start time and restart count of its component c, if there is one.
func (sp staticPod) of(c *component) staticPod {
	if c != nil {
		sp.started, sp.restarts = c.started, c.restarts
	}
	return sp
}

// withVersions sets each pod's config version from versions (by component name).
func (pods staticPods) withVersions(versions map[string]string) staticPods {
	for i := range pods {
		pods[i].configVersion = versions[pods[i].name]
	}
	return pods
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
	sum := sha256.Sum256([]byte(sp.name + "\x00" + sp.image + "\x00" + sp.configVersion))
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
		mirror := mirrorPod(node, sp, hash)
		if n.opts.Light != nil {
			// The in-memory API server of light nodes looks for an owner in the owned
			// object's namespace, and so finds no Node.
			mirror.OwnerReferences = nil
		}
		pod, err = pods.Create(ctx, mirror, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	pod.Status = staticPodStatus(n.ip.String(), sp, pod.CreationTimestamp)
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return err
	}
	n.publishStaticPodStatus(pod)
	return nil
}

// staticPodStatus is the status a kubelet reports for a static pod that runs since started,
// ready when its component serves.
func staticPodStatus(ip string, sp staticPod, started metav1.Time) corev1.PodStatus {
	status := corev1.ConditionFalse
	if sp.ready {
		status = corev1.ConditionTrue
	}
	now, containerStarted := metav1.Now(), started
	if !sp.started.IsZero() {
		containerStarted = metav1.NewTime(sp.started)
	}
	return corev1.PodStatus{
		Phase:  corev1.PodRunning,
		HostIP: ip, PodIP: ip,
		HostIPs: []corev1.HostIP{{IP: ip}}, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &started,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: sp.name, Image: sp.image, ImageID: sp.image, Ready: sp.ready, Started: ptr.To(true), RestartCount: sp.restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: containerStarted}},
		}},
	}
}

// publishStaticPodStatus reports a static pod's status in the node's resources, as Talos'
// StaticPodStatus (ID namespace/name, the pod status as the kubelet gives it), and the
// machine's readiness that follows it.
func (n *Node) publishStaticPodStatus(pod *corev1.Pod) {
	unstructured, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod.Status)
	if err != nil {
		n.opts.Log.Error(err, "Failed to convert a static pod's status", "pod", pod.Name)
		return
	}
	publish(n, k8s.NewStaticPodStatus(k8s.NamespaceName, pod.Namespace+"/"+pod.Name), func(r *k8s.StaticPodStatus) {
		r.TypedSpec().PodStatus = unstructured
	})
	n.publishMachineStatus()
}

// staticPodProblems is why the node's static pods are not all ready, as machined's
// readiness check words it; empty when they are.
func (n *Node) staticPodProblems() string {
	list, err := safe.StateListAll[*k8s.StaticPodStatus](context.Background(), n.res)
	if err != nil {
		return err.Error()
	}
	var problems []string
	for r := range list.All() {
		var status corev1.PodStatus
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.TypedSpec().PodStatus, &status); err != nil {
			return err.Error()
		}
		if status.Phase != corev1.PodRunning {
			problems = append(problems, r.Metadata().ID()+" "+strings.ToLower(string(status.Phase)))
			continue
		}
		ready := slices.ContainsFunc(status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		if !ready {
			problems = append(problems, r.Metadata().ID()+" not ready")
		}
	}
	return strings.Join(problems, ", ")
}

func mirrorPod(node *corev1.Node, sp staticPod, hash string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: sp.name + "-" + node.Name, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": sp.name, "tier": "control-plane"},
			Annotations: map[string]string{
				mirrorAnnotation: hash, hashAnnotation: hash, sourceAnnotation: "file", constants.AnnotationStaticPodConfigVersion: sp.configVersion,
			},
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
