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
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TestRefusal sorts the API server's answers to a Cluster write as the API server words
// them: what the KubernetesCluster's owner must change, what the installation must fix (and
// is retried meanwhile), and what is retried alone.
func TestRefusal(t *testing.T) {
	clusters := schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "clusters"}
	kind := clusterv1.GroupVersion.WithKind("Cluster").GroupKind()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a field Cluster API's webhook refuses", apierrors.NewInvalid(kind, "prod", field.ErrorList{field.Invalid(field.NewPath("spec", "topology", "version"), "v1.38.0", "skips a minor")}), ReasonClusterRefused},
		{"a webhook's denial, answered 403", apierrors.NewForbidden(clusters, "prod", errors.New(`admission webhook "validation.cluster.cluster.x-k8s.io" denied the request: no`)), ReasonClusterRefused},
		{"an admission policy's denial", apierrors.NewForbidden(clusters, "prod", errors.New(`ValidatingAdmissionPolicy 'no-prod' with binding 'no-prod' denied request: no`)), ReasonClusterRefused},
		{"a malformed object", apierrors.NewBadRequest("the object has no kind"), ReasonClusterRefused},
		{"the manager's RBAC", apierrors.NewForbidden(clusters, "prod", errors.New(`User "system:serviceaccount:talon-control-plane-system:talon-control-plane-manager" cannot create resource "clusters" in API group "cluster.x-k8s.io" in the namespace "vitistack"`)), ReasonClusterForbidden},
		{"a namespace being deleted", apierrors.NewForbidden(clusters, "prod", errors.New(`unable to create new content in namespace vitistack because it is being terminated`)), ReasonClusterForbidden},
		{"a conflict", apierrors.NewConflict(clusters, "prod", errors.New("the object has been modified")), ""},
		{"a timeout", apierrors.NewTimeoutError("slow", 1), ""},
	} {
		if got := refusal(tc.err); got != tc.want {
			t.Errorf("%s: refusal(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
	}
	cluster := &clusterv1.Cluster{}
	cluster.Name = "prod"
	forbidden := refused(cluster, apierrors.NewForbidden(clusters, "prod", errors.New(`User "x" cannot create resource "clusters"`)))
	if !strings.Contains(forbidden.Error(), "check its RBAC") || !apierrors.IsForbidden(forbidden) {
		t.Errorf("the RBAC refusal %q does not say to check the manager's RBAC, or is no longer the API server's Forbidden", forbidden)
	}
	refusedByWebhook := refused(cluster, apierrors.NewInvalid(kind, "prod", nil))
	if !strings.Contains(refusedByWebhook.Error(), "change the KubernetesCluster") {
		t.Errorf("the webhook's refusal %q does not say to change the KubernetesCluster", refusedByWebhook)
	}
}
