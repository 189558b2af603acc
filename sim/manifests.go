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
	"fmt"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// bootstrappers is the group of every bootstrap-token user.
const bootstrappers = "system:bootstrappers"

// talosNodesRole is the ClusterRole, and its binding to every node, of Talos' bootstrap
// manifests that lets kubelets' credentials read EndpointSlices.
const talosNodesRole = "system:talos-nodes"

// applyBootstrapManifests creates what Talos' bootstrap manifests give a new cluster so that
// kubelets can join: the bootstrap token from the config, and the bindings that let its
// holders request kubelet client certificates which kube-controller-manager then approves
// automatically, and Talos' system:talos-nodes role, with which a worker reads the
// "kubernetes" EndpointSlices to find trustd. Existing objects are left alone; every
// control-plane node applies them.
func applyBootstrapManifests(ctx context.Context, cfg talosconfig.Provider, c *kubernetes.Clientset) error {
	token := cfg.Cluster().Token()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + token.ID(), Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": token.ID(), "token-secret": token.Secret(),
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
		},
	}
	if _, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create the bootstrap token: %w", err)
	}
	talosNodes := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: talosNodesRole},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, talosNodes, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create ClusterRole %s: %w", talosNodes.Name, err)
	}
	bindings := []struct{ name, role, group string }{
		// Bootstrap-token holders may create certificate signing requests...
		{"talon-sim:node-bootstrapper", "system:node-bootstrapper", bootstrappers},
		// ...which kube-controller-manager approves for them as node client certificates,
		{"talon-sim:approve-node-client-csr", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", bootstrappers},
		// and nodes may renew their own.
		{"talon-sim:approve-node-client-renewal", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
		// Nodes read the API servers' addresses (Talos' own binding).
		{talosNodesRole, talosNodesRole, "system:nodes"},
	}
	for _, b := range bindings {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: b.group}},
		}
		if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create ClusterRoleBinding %s: %w", b.name, err)
		}
	}
	return nil
}

// addonManifests are the kube-proxy and CoreDNS parts of Talos' bootstrap manifests, by
// their Manifest resource IDs, for the images cfg names: the DaemonSet and Deployment
// (kube-system) whose images `talosctl upgrade-k8s` and Talon's manifest sync move to a new
// version; Talos never updates them itself. The simulator publishes them, and does not
// create them at bootstrap as Talos does: it runs no workload Pods, and present they could
// never be ready (docs/sim.md).
func addonManifests(cfg talosconfig.Provider) map[string][]runtime.Object {
	out := map[string][]runtime.Object{}
	addon := func(name, app, image string, command ...string) (metav1.ObjectMeta, corev1.PodTemplateSpec) {
		labels := map[string]string{"k8s-app": app}
		meta := metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: labels}
		return meta, corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{
				ServiceAccountName: name, PriorityClassName: "system-cluster-critical",
				Containers: []corev1.Container{{Name: name, Image: image, Command: command}},
			},
		}
	}
	account := func(name string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}}
	}
	if proxy := cfg.K8sProxyConfig(); proxy.Enabled() {
		meta, template := addon("kube-proxy", "kube-proxy", proxy.Image(), "/usr/local/bin/kube-proxy")
		template.Spec.HostNetwork = true
		out["10-kube-proxy"] = []runtime.Object{
			&appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: meta,
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: meta.Labels}, Template: template}},
			account("kube-proxy"),
		}
	}
	if dns := cfg.K8sCoreDNSConfig(); dns.Enabled() {
		meta, template := addon("coredns", "kube-dns", dns.Image())
		template.Spec.Containers[0].Args = []string{"-conf", "/etc/coredns/Corefile"}
		out["11-core-dns"] = []runtime.Object{
			account("coredns"),
			&appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: meta,
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: meta.Labels}, Template: template}},
		}
	}
	return out
}

// publishManifests publishes the addon manifests as Talos' Manifest resources, which
// `talosctl upgrade-k8s` reads to sync them into the cluster.
func (n *Node) publishManifests(cfg talosconfig.Provider) {
	for id, objects := range addonManifests(cfg) {
		items := make([]k8s.SingleManifest, 0, len(objects))
		for _, o := range objects {
			object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				n.opts.Log.Error(err, "Failed to convert a manifest", "id", id)
				return
			}
			unstructured.RemoveNestedField(object, "metadata", "creationTimestamp")
			unstructured.RemoveNestedField(object, "status")
			items = append(items, k8s.SingleManifest{Object: object})
		}
		publish(n, k8s.NewManifest(k8s.ControlPlaneNamespaceName, id), func(m *k8s.Manifest) { m.TypedSpec().Items = items })
	}
}
