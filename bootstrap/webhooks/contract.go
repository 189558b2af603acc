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
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-bootstrap-cluster-x-k8s-io-v1beta1-talosconfigtemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=bootstrap.cluster.x-k8s.io,resources=talosconfigtemplates,versions=v1beta1,name=default.talosconfigtemplate.bootstrap.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// PinContract records the Talos version contract of spec, part of obj, as the admission
// request in ctx creates or updates it:
//
//   - an object a person creates without one gets the contract Talon renders for by default
//     today, so that a later Talon with a newer default never changes what its nodes get;
//   - an object created with owners is a copy of one that exists (clusterctl move re-creates
//     every object of a cluster; Cluster API creates control planes and templates from
//     ClusterClass templates): it keeps what it has, and an empty talosVersion keeps meaning
//     configgen.UnpinnedContract, the contract its nodes were made with;
//   - an update that leaves talosVersion out (a server-side apply that does not own it, a
//     replace from a manifest without it) keeps the recorded one.
//
// old decodes the object before an update.
func PinContract[T metav1.Object](ctx context.Context, obj T, spec func(T) *bootstrapv1.TalosConfigSpec, old func(raw []byte) (T, error)) error {
	current := spec(obj)
	if current.TalosVersion != "" {
		return nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("expected an admission request in the context: %v", err))
	}
	switch req.Operation {
	case admissionv1.Create:
		if len(obj.GetOwnerReferences()) == 0 {
			current.TalosVersion = configgen.DefaultTalosVersion()
		}
	case admissionv1.Update:
		before, err := old(req.OldObject.Raw)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("cannot decode the object before the update: %v", err))
		}
		current.TalosVersion = spec(before).TalosVersion
	}
	return nil
}

// DecodeAs returns a decoder of raw JSON into a new object of T's kind.
func DecodeAs[T any](newObj func() T) func(raw []byte) (T, error) {
	return func(raw []byte) (T, error) {
		obj := newObj()
		err := json.Unmarshal(raw, obj)
		return obj, err
	}
}

// Default records the contract of a TalosConfigTemplate (PinContract).
func (w *TalosConfigTemplate) Default(ctx context.Context, t *bootstrapv1.TalosConfigTemplate) error {
	return PinContract(ctx, t, func(t *bootstrapv1.TalosConfigTemplate) *bootstrapv1.TalosConfigSpec { return &t.Spec.Template.Spec },
		DecodeAs(func() *bootstrapv1.TalosConfigTemplate { return &bootstrapv1.TalosConfigTemplate{} }))
}
