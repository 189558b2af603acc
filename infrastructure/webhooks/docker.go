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
	"net/netip"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	bootstrapwebhooks "github.com/talon-capi/talon/bootstrap/webhooks"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-talosdockercluster,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=talosdockerclusters,versions=v1alpha1,name=validation.talosdockercluster.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-talosdockerclustertemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=talosdockerclustertemplates,versions=v1alpha1,name=validation.talosdockerclustertemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-talosdockermachine,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=talosdockermachines,versions=v1alpha1,name=validation.talosdockermachine.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-talosdockermachinetemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=talosdockermachinetemplates,versions=v1alpha1,name=validation.talosdockermachinetemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// reservedEnv are the variables the provider sets on every node container.
var reservedEnv = []string{"PLATFORM", "TALOSSKU", "USERDATA"}

// TalosDockerCluster validates TalosDockerClusters.
type TalosDockerCluster struct{}

var _ admission.Validator[*infrav1.TalosDockerCluster] = &TalosDockerCluster{}

// SetupWebhookWithManager registers the webhook with mgr.
func (w *TalosDockerCluster) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.TalosDockerCluster{}).WithValidator(w).Complete()
}

// ValidateCreate refuses a network or load balancer that cannot be created.
func (w *TalosDockerCluster) ValidateCreate(_ context.Context, c *infrav1.TalosDockerCluster) (admission.Warnings, error) {
	return nil, invalid("TalosDockerCluster", c.Name, validateClusterSpec(c.Spec, field.NewPath("spec")))
}

// ValidateUpdate also refuses changes to the network and load balancer of a cluster, which
// its running nodes depend on; the endpoint may only be set once.
func (w *TalosDockerCluster) ValidateUpdate(_ context.Context, oldC, newC *infrav1.TalosDockerCluster) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := validateClusterSpec(newC.Spec, spec)
	if !equality.Semantic.DeepEqual(oldC.Spec.Network, newC.Spec.Network) {
		errs = append(errs, field.Forbidden(spec.Child("network"), "the network of a cluster cannot change: its nodes have addresses on it"))
	}
	if !equality.Semantic.DeepEqual(oldC.Spec.LoadBalancer, newC.Spec.LoadBalancer) {
		errs = append(errs, field.Forbidden(spec.Child("loadBalancer"), "the load balancer of a cluster cannot change: it serves the control-plane endpoint"))
	}
	if oldC.Spec.ControlPlaneEndpoint.IsValid() && oldC.Spec.ControlPlaneEndpoint != newC.Spec.ControlPlaneEndpoint {
		errs = append(errs, field.Forbidden(spec.Child("controlPlaneEndpoint"), "the control-plane endpoint cannot change once set: every machine config names it"))
	}
	return nil, invalid("TalosDockerCluster", newC.Name, errs)
}

// ValidateDelete allows every deletion.
func (w *TalosDockerCluster) ValidateDelete(context.Context, *infrav1.TalosDockerCluster) (admission.Warnings, error) {
	return nil, nil
}

func validateClusterSpec(spec infrav1.TalosDockerClusterSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s := spec.Network.Subnet; s != "" {
		prefix, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("network", "subnet"), s, "must be an IPv4 subnet in CIDR notation, such as 172.31.10.0/24"))
		case !prefix.Addr().Is4():
			errs = append(errs, field.Invalid(p.Child("network", "subnet"), s, "must be an IPv4 subnet: Talos containers get IPv4 addresses"))
		case prefix.Masked() != prefix:
			errs = append(errs, field.Invalid(p.Child("network", "subnet"), s, fmt.Sprintf("has host bits set; did you mean %s?", prefix.Masked())))
		case prefix.Bits() > 29:
			errs = append(errs, field.Invalid(p.Child("network", "subnet"), s, "is too small: a /29 or larger leaves room for the gateway, the load balancer and nodes"))
		}
	}
	if name := spec.Network.Name; name != "" && strings.ContainsAny(name, " /:") {
		errs = append(errs, field.Invalid(p.Child("network", "name"), name, "must be a Docker network name: no spaces, slashes or colons"))
	}
	return errs
}

// TalosDockerClusterTemplate validates TalosDockerClusterTemplates.
type TalosDockerClusterTemplate struct{}

var _ admission.Validator[*infrav1.TalosDockerClusterTemplate] = &TalosDockerClusterTemplate{}

// SetupWebhookWithManager registers the webhook with mgr.
func (w *TalosDockerClusterTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.TalosDockerClusterTemplate{}).WithValidator(w).Complete()
}

// ValidateCreate refuses a template whose clusters could not be created.
func (w *TalosDockerClusterTemplate) ValidateCreate(ctx context.Context, t *infrav1.TalosDockerClusterTemplate) (admission.Warnings, error) {
	return w.validate(ctx, t)
}

// ValidateUpdate refuses a template whose clusters could not be created.
func (w *TalosDockerClusterTemplate) ValidateUpdate(ctx context.Context, _, t *infrav1.TalosDockerClusterTemplate) (admission.Warnings, error) {
	return w.validate(ctx, t)
}

// ValidateDelete allows every deletion.
func (w *TalosDockerClusterTemplate) ValidateDelete(context.Context, *infrav1.TalosDockerClusterTemplate) (admission.Warnings, error) {
	return nil, nil
}

func (w *TalosDockerClusterTemplate) validate(ctx context.Context, t *infrav1.TalosDockerClusterTemplate) (admission.Warnings, error) {
	if dryRun, err := bootstrapwebhooks.IsTopologyDryRun(ctx, t); err != nil || dryRun {
		return nil, err
	}
	return nil, invalid("TalosDockerClusterTemplate", t.Name, validateClusterSpec(t.Spec.Template.Spec, field.NewPath("spec", "template", "spec")))
}

// TalosDockerMachine validates TalosDockerMachines.
type TalosDockerMachine struct{}

var _ admission.Validator[*infrav1.TalosDockerMachine] = &TalosDockerMachine{}

// SetupWebhookWithManager registers the webhook with mgr.
func (w *TalosDockerMachine) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.TalosDockerMachine{}).WithValidator(w).Complete()
}

// ValidateCreate refuses a container that cannot be created.
func (w *TalosDockerMachine) ValidateCreate(_ context.Context, m *infrav1.TalosDockerMachine) (admission.Warnings, error) {
	return nil, invalid("TalosDockerMachine", m.Name, validateMachineSpec(m.Spec, field.NewPath("spec")))
}

// ValidateUpdate refuses changes to a machine other than setting its providerID: a
// container is replaced, not changed (change the template to roll out new Machines).
func (w *TalosDockerMachine) ValidateUpdate(_ context.Context, oldM, newM *infrav1.TalosDockerMachine) (admission.Warnings, error) {
	oldSpec, newSpec := oldM.Spec, newM.Spec
	if oldSpec.ProviderID == "" {
		oldSpec.ProviderID = newSpec.ProviderID
	}
	if !equality.Semantic.DeepEqual(oldSpec, newSpec) {
		return nil, invalid("TalosDockerMachine", newM.Name, field.ErrorList{field.Forbidden(field.NewPath("spec"),
			"a TalosDockerMachine cannot change: its container is replaced, not changed; change the machine template to roll out new Machines")})
	}
	return nil, nil
}

// ValidateDelete allows every deletion.
func (w *TalosDockerMachine) ValidateDelete(context.Context, *infrav1.TalosDockerMachine) (admission.Warnings, error) {
	return nil, nil
}

func validateMachineSpec(spec infrav1.TalosDockerMachineSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	quantity := func(child, value, example string) {
		if value == "" {
			return
		}
		q, err := resource.ParseQuantity(value)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child(child), value, "must be a quantity such as "+example))
		case q.Sign() <= 0:
			errs = append(errs, field.Invalid(p.Child(child), value, "must be more than zero; leave it out for no limit"))
		}
	}
	quantity("cpus", spec.CPUs, `"2" or "1500m"`)
	quantity("memory", spec.Memory, `"2Gi" or "2048Mi"`)
	if spec.Memory != "" {
		if q, err := resource.ParseQuantity(spec.Memory); err == nil && q.Sign() > 0 && q.Value() < 512<<20 {
			errs = append(errs, field.Invalid(p.Child("memory"), spec.Memory, "is too little for a Talos node; give it at least 512Mi"))
		}
	}
	for i, m := range spec.ExtraMounts {
		mp := p.Child("extraMounts").Index(i)
		if !path.IsAbs(m.HostPath) {
			errs = append(errs, field.Invalid(mp.Child("hostPath"), m.HostPath, "must be an absolute path"))
		}
		if !path.IsAbs(m.ContainerPath) {
			errs = append(errs, field.Invalid(mp.Child("containerPath"), m.ContainerPath, "must be an absolute path"))
		}
	}
	seen := map[string]int{}
	for i, pm := range spec.ExtraPortMappings {
		pp := p.Child("extraPortMappings").Index(i)
		if pm.HostIP != "" {
			if _, err := netip.ParseAddr(pm.HostIP); err != nil {
				errs = append(errs, field.Invalid(pp.Child("hostIP"), pm.HostIP, "must be an IP address of the host"))
			}
		}
		protocol := pm.Protocol
		if protocol == "" {
			protocol = "TCP"
		}
		key := fmt.Sprintf("%s/%d", protocol, pm.HostPort)
		if pm.HostIP != "" {
			key = pm.HostIP + ":" + key
		}
		if j, dup := seen[key]; dup {
			errs = append(errs, field.Duplicate(pp.Child("hostPort"), fmt.Sprintf("host port %s is already published by extraPortMappings[%d]", key, j)))
		}
		seen[key] = i
	}
	for i, e := range spec.ExtraEnv {
		for _, r := range reservedEnv {
			if e.Name == r {
				errs = append(errs, field.Forbidden(p.Child("extraEnv").Index(i).Child("name"),
					fmt.Sprintf("%s is set by the provider (PLATFORM, TALOSSKU and USERDATA are how a Talos container is configured)", r)))
			}
		}
	}
	return errs
}

// TalosDockerMachineTemplate validates TalosDockerMachineTemplates.
type TalosDockerMachineTemplate struct{}

var _ admission.Validator[*infrav1.TalosDockerMachineTemplate] = &TalosDockerMachineTemplate{}

// SetupWebhookWithManager registers the webhook with mgr.
func (w *TalosDockerMachineTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.TalosDockerMachineTemplate{}).WithValidator(w).Complete()
}

// ValidateCreate refuses a template whose containers could not be created.
func (w *TalosDockerMachineTemplate) ValidateCreate(ctx context.Context, t *infrav1.TalosDockerMachineTemplate) (admission.Warnings, error) {
	return w.validate(ctx, t)
}

// ValidateUpdate refuses a template whose containers could not be created.
func (w *TalosDockerMachineTemplate) ValidateUpdate(ctx context.Context, _, t *infrav1.TalosDockerMachineTemplate) (admission.Warnings, error) {
	return w.validate(ctx, t)
}

// ValidateDelete allows every deletion.
func (w *TalosDockerMachineTemplate) ValidateDelete(context.Context, *infrav1.TalosDockerMachineTemplate) (admission.Warnings, error) {
	return nil, nil
}

func (w *TalosDockerMachineTemplate) validate(ctx context.Context, t *infrav1.TalosDockerMachineTemplate) (admission.Warnings, error) {
	if dryRun, err := bootstrapwebhooks.IsTopologyDryRun(ctx, t); err != nil || dryRun {
		return nil, err
	}
	return nil, invalid("TalosDockerMachineTemplate", t.Name, validateMachineSpec(t.Spec.Template.Spec, field.NewPath("spec", "template", "spec")))
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(infrav1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
