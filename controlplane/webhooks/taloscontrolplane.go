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
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1alpha3 "github.com/talon-capi/talon/api/controlplane/v1alpha3"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	bootstrapwebhooks "github.com/talon-capi/talon/bootstrap/webhooks"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-controlplane-cluster-x-k8s-io-v1beta1-taloscontrolplane,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=controlplane.cluster.x-k8s.io,resources=taloscontrolplanes,versions=v1beta1,name=validation.taloscontrolplane.controlplane.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-controlplane-cluster-x-k8s-io-v1beta1-taloscontrolplanetemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=controlplane.cluster.x-k8s.io,resources=taloscontrolplanetemplates,versions=v1beta1,name=validation.taloscontrolplanetemplate.controlplane.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// +kubebuilder:webhook:verbs=create;update,path=/mutate-controlplane-cluster-x-k8s-io-v1beta1-taloscontrolplane,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=controlplane.cluster.x-k8s.io,resources=taloscontrolplanes,versions=v1beta1,name=default.taloscontrolplane.controlplane.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/mutate-controlplane-cluster-x-k8s-io-v1beta1-taloscontrolplanetemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=controlplane.cluster.x-k8s.io,resources=taloscontrolplanetemplates,versions=v1beta1,name=default.taloscontrolplanetemplate.controlplane.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// TalosControlPlane validates TalosControlPlanes and pins the contract of new ones.
type TalosControlPlane struct{}

var (
	_ admission.Validator[*controlplanev1.TalosControlPlane] = &TalosControlPlane{}
	_ admission.Defaulter[*controlplanev1.TalosControlPlane] = &TalosControlPlane{}
)

// Default records the contract of a TalosControlPlane (webhooks.PinContract).
func (w *TalosControlPlane) Default(ctx context.Context, tcp *controlplanev1.TalosControlPlane) error {
	return bootstrapwebhooks.PinContract(ctx, tcp,
		func(tcp *controlplanev1.TalosControlPlane) *bootstrapv1.TalosConfigSpec {
			return &tcp.Spec.ControlPlaneConfig
		},
		bootstrapwebhooks.DecodeAs(func() *controlplanev1.TalosControlPlane { return &controlplanev1.TalosControlPlane{} }))
}

// SetupWebhookWithManager registers the webhook with mgr.
func (w *TalosControlPlane) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &controlplanev1.TalosControlPlane{}).WithValidator(w).WithDefaulter(w).
		WithConverter(conversion.NewHubSpokeConverter(&controlplanev1.TalosControlPlane{}, conversion.NewSpokeConverter(&controlplanev1alpha3.TalosControlPlane{},
			func(_ context.Context, hub *controlplanev1.TalosControlPlane, spoke *controlplanev1alpha3.TalosControlPlane) error {
				return controlplanev1alpha3.ConvertTalosControlPlaneFromHub(hub, spoke)
			},
			func(_ context.Context, spoke *controlplanev1alpha3.TalosControlPlane, hub *controlplanev1.TalosControlPlane) error {
				return controlplanev1alpha3.ConvertTalosControlPlaneToHub(spoke, hub)
			}))).
		Complete()
}

// ValidateCreate refuses a control plane that could not keep etcd quorum or render its configs.
func (w *TalosControlPlane) ValidateCreate(_ context.Context, tcp *controlplanev1.TalosControlPlane) (admission.Warnings, error) {
	return nil, invalid("TalosControlPlane", tcp.Name, validate(tcp))
}

// ValidateUpdate also refuses Kubernetes downgrades, skipped minor versions and changes of
// the infrastructure kind.
func (w *TalosControlPlane) ValidateUpdate(_ context.Context, oldTCP, newTCP *controlplanev1.TalosControlPlane) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldTCP.Spec, newTCP.Spec) {
		return nil, nil
	}
	errs := validate(newTCP)
	spec := field.NewPath("spec")
	if oldTCP.Spec.Version == newTCP.Spec.Version && oldTCP.Spec.ControlPlaneConfig.TalosVersion == newTCP.Spec.ControlPlaneConfig.TalosVersion {
		// A control plane already outside its window (made before the check) may still scale.
		errs = slices.DeleteFunc(errs, func(e *field.Error) bool {
			return e.Field == spec.Child("version").String() && e.Type == field.ErrorTypeInvalid
		})
	}
	if oldV, err := version.ParseSemantic(oldTCP.Spec.Version); err == nil {
		if newV, err := version.ParseSemantic(newTCP.Spec.Version); err == nil {
			switch {
			case newV.LessThan(oldV):
				errs = append(errs, field.Forbidden(spec.Child("version"), fmt.Sprintf(
					"cannot downgrade Kubernetes from %s to %s: the control plane only moves forward", oldTCP.Spec.Version, newTCP.Spec.Version)))
			case newV.Major() == oldV.Major() && newV.Minor() > oldV.Minor()+1:
				errs = append(errs, field.Forbidden(spec.Child("version"), fmt.Sprintf(
					"cannot skip a minor version from %s to %s: upgrade to v%d.%d first", oldTCP.Spec.Version, newTCP.Spec.Version, oldV.Major(), oldV.Minor()+1)))
			}
		}
	}
	if oldTCP.Spec.ControlPlaneConfig.TalosVersion != "" && newTCP.Spec.ControlPlaneConfig.TalosVersion == "" {
		errs = append(errs, field.Required(spec.Child("controlPlaneConfig", "talosVersion"), fmt.Sprintf(
			"the Talos version contract %s was recorded when the control plane was created and cannot be cleared; set the version the nodes should get", oldTCP.Spec.ControlPlaneConfig.TalosVersion)))
	} else if err := configgen.CheckTalosUpgrade(oldTCP.Spec.ControlPlaneConfig.TalosVersion, newTCP.Spec.ControlPlaneConfig.TalosVersion); err != nil {
		errs = append(errs, field.Forbidden(spec.Child("controlPlaneConfig", "talosVersion"), err.Error()))
	}
	if !equality.Semantic.DeepEqual(oldTCP.Spec.RestoreFrom, newTCP.Spec.RestoreFrom) && bootstrapped(oldTCP) {
		errs = append(errs, field.Forbidden(spec.Child("restoreFrom"),
			"etcd was already bootstrapped and is never bootstrapped again: to restore a backup, create a new control plane with restoreFrom, "+
				"or follow docs/backup.md for a cluster that lost quorum"))
	}
	oldRef, newRef := oldTCP.Spec.MachineTemplate.Spec.InfrastructureRef, newTCP.Spec.MachineTemplate.Spec.InfrastructureRef
	if oldRef.APIGroup != newRef.APIGroup || oldRef.Kind != newRef.Kind {
		errs = append(errs, field.Forbidden(spec.Child("machineTemplate", "spec", "infrastructureRef"),
			"the infrastructure provider of a control plane cannot change; only the template name may, which rolls out new Machines"))
	}
	return nil, invalid("TalosControlPlane", newTCP.Name, errs)
}

// ValidateDelete allows every deletion.
func (w *TalosControlPlane) ValidateDelete(context.Context, *controlplanev1.TalosControlPlane) (admission.Warnings, error) {
	return nil, nil
}

func validate(tcp *controlplanev1.TalosControlPlane) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	replicas := ptr.Deref(tcp.Spec.Replicas, 1)
	if replicas%2 == 0 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), replicas,
			"an even number of control-plane replicas tolerates no more failures than one fewer and makes etcd quorum harder; use an odd number"))
	}
	if _, err := version.ParseSemantic(tcp.Spec.Version); err != nil || !strings.HasPrefix(tcp.Spec.Version, "v") {
		errs = append(errs, field.Invalid(spec.Child("version"), tcp.Spec.Version, "must be a Kubernetes version like v1.36.3"))
	} else if err := configgen.CheckKubernetes(tcp.Spec.ControlPlaneConfig.TalosVersion, tcp.Spec.Version); err != nil {
		errs = append(errs, field.Invalid(spec.Child("version"), tcp.Spec.Version, err.Error()))
	}
	if ptr.Deref(tcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge, 1) == 0 && replicas < 3 {
		errs = append(errs, field.Forbidden(spec.Child("rollout", "strategy", "rollingUpdate", "maxSurge"),
			fmt.Sprintf("maxSurge 0 removes a Machine before its replacement exists; with %d replicas that would leave etcd without quorum, so it needs at least 3", replicas)))
	}
	errs = append(errs, validateMachineNaming(tcp.Spec.MachineNaming, tcp.Labels[clusterv1.ClusterNameLabel], tcp.Name, spec.Child("machineNaming", "template"))...)
	return append(errs, validateConfig(tcp.Spec.ControlPlaneConfig, spec.Child("controlPlaneConfig"))...)
}

// bootstrapped says whether etcd was bootstrapped (and served) for tcp, after which
// spec.restoreFrom no longer matters. A bootstrap that was only recorded may still change
// what it restores: the node refused the last backup.
func bootstrapped(tcp *controlplanev1.TalosControlPlane) bool {
	initialized := tcp.Status.Initialization.ControlPlaneInitialized
	return tcp.Annotations[controlplanev1.EtcdClusterAnnotation] != "" || (initialized != nil && *initialized)
}

// validateMachineNaming renders the naming template as the control plane will, with the
// Cluster's name (the TalosControlPlane's while it has no cluster-name label yet).
func validateMachineNaming(naming controlplanev1.TalosControlPlaneMachineNamingSpec, clusterName, tcpName string, path *field.Path) field.ErrorList {
	if naming.Template == "" {
		return nil
	}
	if clusterName == "" {
		clusterName = tcpName
	}
	if _, err := controlplane.MachineName(naming.Template, clusterName, tcpName, "x7k2p"); err != nil {
		return field.ErrorList{field.Invalid(path, naming.Template, err.Error())}
	}
	return nil
}

// validateConfig checks controlPlaneConfig as the TalosConfigs made from it will be checked.
func validateConfig(config bootstrapv1.TalosConfigSpec, path *field.Path) field.ErrorList {
	switch config.GenerateType {
	case "":
		config.GenerateType = bootstrapv1.GenerateTypeControlPlane
	case bootstrapv1.GenerateTypeControlPlane:
	default:
		return field.ErrorList{field.NotSupported(path.Child("generateType"), config.GenerateType, []string{string(bootstrapv1.GenerateTypeControlPlane)})}
	}
	return bootstrapwebhooks.ValidateSpec(config, path)
}

// TalosControlPlaneTemplate validates TalosControlPlaneTemplates and pins the contract of
// new ones.
type TalosControlPlaneTemplate struct{}

var (
	_ admission.Validator[*controlplanev1.TalosControlPlaneTemplate] = &TalosControlPlaneTemplate{}
	_ admission.Defaulter[*controlplanev1.TalosControlPlaneTemplate] = &TalosControlPlaneTemplate{}
)

// Default records the contract of a TalosControlPlaneTemplate (webhooks.PinContract).
func (w *TalosControlPlaneTemplate) Default(ctx context.Context, t *controlplanev1.TalosControlPlaneTemplate) error {
	return bootstrapwebhooks.PinContract(ctx, t,
		func(t *controlplanev1.TalosControlPlaneTemplate) *bootstrapv1.TalosConfigSpec {
			return &t.Spec.Template.Spec.ControlPlaneConfig
		},
		bootstrapwebhooks.DecodeAs(func() *controlplanev1.TalosControlPlaneTemplate { return &controlplanev1.TalosControlPlaneTemplate{} }))
}

// SetupWebhookWithManager registers the webhook with mgr.
func (w *TalosControlPlaneTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &controlplanev1.TalosControlPlaneTemplate{}).WithValidator(w).WithDefaulter(w).Complete()
}

// ValidateCreate refuses a template whose control planes could not render their configs.
func (w *TalosControlPlaneTemplate) ValidateCreate(ctx context.Context, t *controlplanev1.TalosControlPlaneTemplate) (admission.Warnings, error) {
	return w.validate(ctx, t)
}

// ValidateUpdate refuses a template whose control planes could not render their configs.
func (w *TalosControlPlaneTemplate) ValidateUpdate(ctx context.Context, _, t *controlplanev1.TalosControlPlaneTemplate) (admission.Warnings, error) {
	return w.validate(ctx, t)
}

// ValidateDelete allows every deletion.
func (w *TalosControlPlaneTemplate) ValidateDelete(context.Context, *controlplanev1.TalosControlPlaneTemplate) (admission.Warnings, error) {
	return nil, nil
}

func (w *TalosControlPlaneTemplate) validate(ctx context.Context, t *controlplanev1.TalosControlPlaneTemplate) (admission.Warnings, error) {
	if dryRun, err := bootstrapwebhooks.IsTopologyDryRun(ctx, t); err != nil || dryRun {
		return nil, err
	}
	spec := field.NewPath("spec", "template", "spec")
	// The names of the Cluster and control plane come from the topology: check with short ones.
	errs := validateMachineNaming(t.Spec.Template.Spec.MachineNaming, "cluster", "control-plane", spec.Child("machineNaming", "template"))
	return nil, invalid("TalosControlPlaneTemplate", t.Name, append(errs, validateConfig(t.Spec.Template.Spec.ControlPlaneConfig, spec.Child("controlPlaneConfig"))...))
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(controlplanev1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
