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

package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
	"github.com/talon-capi/talon/controlplane/pkg/kubernetescluster"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-vitistack-io-v1alpha1-kubernetescluster,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=vitistack.io,resources=kubernetesclusters,versions=v1alpha1,name=validation.kubernetescluster.vitistack.io,sideEffects=None,admissionReviewVersions=v1

// KubernetesCluster refuses KubernetesClusters Talon cannot build (kubernetescluster.Check).
type KubernetesCluster struct{}

var _ admission.Validator[*vitiv1.KubernetesCluster] = &KubernetesCluster{}

// SetupWebhookWithManager registers the webhook with mgr.
func (w *KubernetesCluster) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &vitiv1.KubernetesCluster{}).WithValidator(w).Complete()
}

// ValidateCreate refuses versions Talon cannot run and labels and taints Talos refuses.
func (w *KubernetesCluster) ValidateCreate(_ context.Context, kc *vitiv1.KubernetesCluster) (admission.Warnings, error) {
	return nil, invalidKubernetesCluster(kc, kubernetescluster.Check(kc, ""))
}

// ValidateUpdate also refuses a version older than the one before.
func (w *KubernetesCluster) ValidateUpdate(_ context.Context, oldKC, newKC *vitiv1.KubernetesCluster) (admission.Warnings, error) {
	if _, moving := newKC.Annotations[clusterctlv1.DeleteForMoveAnnotation]; moving && equality.Semantic.DeepEqual(oldKC.Spec, newKC.Spec) {
		// clusterctl move, deleting what it copied, replaces every annotation with its own.
		return nil, nil
	}
	if equality.Semantic.DeepEqual(oldKC.Spec, newKC.Spec) && sameAnnotation(oldKC, newKC, vitiv1.ClusterClassAnnotation) &&
		sameAnnotation(oldKC, newKC, vitiv1.VariablesAnnotation) {
		// Finalizers, labels, other annotations (the controller's record): a KubernetesCluster
		// that was taken must stay deletable and movable.
		return nil, nil
	}
	return nil, invalidKubernetesCluster(newKC, kubernetescluster.Check(newKC, oldKC.Spec.Topology.Version))
}

// ValidateDelete allows every deletion.
func (w *KubernetesCluster) ValidateDelete(context.Context, *vitiv1.KubernetesCluster) (admission.Warnings, error) {
	return nil, nil
}

// sameAnnotation tells whether annotation key is the same (or absent) on a and b.
func sameAnnotation(a, b *vitiv1.KubernetesCluster, key string) bool {
	va, oka := a.Annotations[key]
	vb, okb := b.Annotations[key]
	return va == vb && oka == okb
}

func invalidKubernetesCluster(kc *vitiv1.KubernetesCluster, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(vitiv1.GroupVersion.WithKind("KubernetesCluster").GroupKind(), kc.Name, errs)
}
