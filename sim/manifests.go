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
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
