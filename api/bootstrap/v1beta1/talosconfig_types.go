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

package v1beta1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GenerateType says which kind of Talos machine config a TalosConfig renders.
// +kubebuilder:validation:Enum=controlplane;worker;none
type GenerateType string

const (
	// GenerateTypeControlPlane renders the config of a control-plane node.
	GenerateTypeControlPlane GenerateType = "controlplane"
	// GenerateTypeWorker renders the config of a worker node.
	GenerateTypeWorker GenerateType = "worker"
	// GenerateTypeNone renders nothing: spec.data is the complete config, used as it is.
	GenerateTypeNone GenerateType = "none"
)

// HostnameSource says where a node's hostname comes from.
// +kubebuilder:validation:Enum=MachineName;InfrastructureName
type HostnameSource string

const (
	// HostnameSourceMachineName names the node after its Cluster API Machine.
	HostnameSourceMachineName HostnameSource = "MachineName"
	// HostnameSourceInfrastructureName names the node after its infrastructure machine
	// (e.g. the TalosDockerMachine).
	HostnameSourceInfrastructureName HostnameSource = "InfrastructureName"
)

// TalosConfigSpec describes the Talos machine config to render for one Machine.
type TalosConfigSpec struct {
	// generateType is the kind of config to render: controlplane, worker, or none to use
	// spec.data as it is.
	// +required
	GenerateType GenerateType `json:"generateType,omitempty"`

	// talosVersion is the Talos version the config is rendered for, as a version contract
	// such as v1.13 (a patch version like v1.13.2 is accepted and means v1.13). Nodes accept
	// configs of their own version and older; the default is the newest version Talon knows.
	// +optional
	// +kubebuilder:validation:Pattern=`^v?\d+\.\d+(\.\d+)?$`
	// +kubebuilder:validation:MaxLength=32
	TalosVersion string `json:"talosVersion,omitempty"`

	// configPatches are RFC 6902 JSON patches applied to the generated config, in order. Each
	// operation applies to one document of the config: the v1alpha1 document unless its
	// document field names another, e.g. the KubeletConfig of the v1.14 contract.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	ConfigPatches []ConfigPatch `json:"configPatches,omitempty"`

	// strategicPatches are strategic-merge patches applied after configPatches, in order.
	// Each is YAML and may hold several documents, e.g. a v1alpha1 patch and a
	// HostnameConfig or other multi-document config.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1048576
	StrategicPatches []string `json:"strategicPatches,omitempty"`

	// hostname sets the node's hostname from its Machine or infrastructure machine; when
	// unset, Talos picks the hostname itself.
	// +optional
	Hostname HostnameSpec `json:"hostname,omitempty,omitzero"`

	// nodeLabels are the labels the node registers with: KubeNodeConfig's labels under the
	// v1.14 contract, machine.nodeLabels before. Keys and values follow Kubernetes' label
	// syntax.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`

	// nodeTaints are the taints the node registers with: KubeNodeConfig's taints under the
	// v1.14 contract, machine.nodeTaints before.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=32
	NodeTaints []NodeTaint `json:"nodeTaints,omitempty"`

	// registryMirrors are where the node pulls images of a registry from: a
	// RegistryMirrorConfig document per registry from the v1.12 contract,
	// machine.registries.mirrors before.
	// +optional
	// +listType=map
	// +listMapKey=registry
	// +kubebuilder:validation:MaxItems=32
	RegistryMirrors []RegistryMirror `json:"registryMirrors,omitempty"`

	// cni is the cluster's CNI: flannel, Talos' own and the default, or none, for a CNI
	// installed by other means (an addon such as Cilium through Cluster API's Helm addon
	// provider). Nodes stay NotReady until a CNI runs.
	// +optional
	CNI CNI `json:"cni,omitempty"`

	// diskEncryption encrypts the node's STATE and EPHEMERAL volumes with LUKS2 (VolumeConfig
	// documents), with a key sealed by the node's TPM or derived from its node ID, a static
	// key read from a Secret, or both in two key slots.
	// +optional
	DiskEncryption DiskEncryptionSpec `json:"diskEncryption,omitempty,omitzero"`

	// imageFactory is the Talos image nodes install, built by Talos Image Factory (whose URL
	// is the bootstrap manager's --image-factory-url). Nodes that install Talos (bare metal)
	// get the factory's installer under the v1.14 contract, as ghcr.io/siderolabs/installer
	// is no longer published from Talos 1.14, and under earlier contracts when this is set;
	// installing or upgrading without the schematic would drop its extensions and kernel
	// arguments. Container nodes do not install and do not use it.
	// +optional
	ImageFactory ImageFactorySpec `json:"imageFactory,omitempty,omitzero"`

	// data is a complete Talos machine config, used when generateType is none.
	// +optional
	// +kubebuilder:validation:MaxLength=1048576
	Data string `json:"data,omitempty"`
}

// ConfigPatch is one RFC 6902 JSON patch operation.
type ConfigPatch struct {
	// op is the operation: add, remove, replace, move, copy or test.
	// +required
	// +kubebuilder:validation:Enum=add;remove;replace;move;copy;test
	Op string `json:"op,omitempty"`

	// path is the JSON pointer the operation applies to, e.g. /machine/network/hostname.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path,omitempty"`

	// from is the source JSON pointer of move and copy.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	From string `json:"from,omitempty"`

	// value is the value of add, replace and test.
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`

	// document is the config document path and from point into; unset means the v1alpha1
	// document (paths like /machine/... and /cluster/...).
	// +optional
	Document ConfigDocumentRef `json:"document,omitempty,omitzero"`
}

// ConfigDocumentRef names one document of a multi-document Talos config.
// +kubebuilder:validation:MinProperties=1
type ConfigDocumentRef struct {
	// kind is the document's kind, e.g. KubeletConfig, HostnameConfig or v1alpha1.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Kind string `json:"kind,omitempty"`

	// name is the document's name, for kinds of which a config may hold several (e.g.
	// KubeAuthorizerConfig, LinkConfig); unset matches the only document of the kind.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// ImageFactorySpec is an Image Factory schematic and the Talos release built from it.
// +kubebuilder:validation:MinProperties=1
type ImageFactorySpec struct {
	// version is the Talos release to install, e.g. v1.14.1. Default: the release Talon is
	// tested with for talosVersion (v1.14.1 for v1.14; docs/compatibility.md).
	// +optional
	// +kubebuilder:validation:Pattern=`^v\d+\.\d+\.\d+$`
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version,omitempty"`

	// extensions are official system extensions, e.g. siderolabs/iscsi-tools. Talon checks
	// each against the factory's list for the release before it creates the schematic.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9._-]*$`
	// +kubebuilder:validation:items:MaxLength=128
	Extensions []string `json:"extensions,omitempty"`

	// extraKernelArgs are kernel arguments built into the image.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	ExtraKernelArgs []string `json:"extraKernelArgs,omitempty"`

	// overlay is a board or platform overlay, e.g. image siderolabs/sbc-raspberrypi and
	// name rpi_generic.
	// +optional
	Overlay ImageFactoryOverlay `json:"overlay,omitempty,omitzero"`

	// secureBoot installs the SecureBoot image (metal-installer-secureboot).
	// +optional
	SecureBoot *bool `json:"secureBoot,omitempty"`

	// bootloader is the bootloader the image installs: auto (the factory's choice), sd-boot,
	// grub or dual-boot.
	// +optional
	// +kubebuilder:validation:Enum=auto;sd-boot;grub;dual-boot
	Bootloader string `json:"bootloader,omitempty"`
}

// IsZero reports whether nothing of the spec is set.
func (s ImageFactorySpec) IsZero() bool {
	return s.Version == "" && len(s.Extensions) == 0 && len(s.ExtraKernelArgs) == 0 && s.Overlay == (ImageFactoryOverlay{}) &&
		s.SecureBoot == nil && s.Bootloader == ""
}

// ImageFactoryOverlay is an Image Factory overlay.
type ImageFactoryOverlay struct {
	// image is the overlay's image, e.g. siderolabs/sbc-raspberrypi.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// name is the overlay's name, e.g. rpi_generic.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name,omitempty"`
}

// HostnameSpec sets where the node's hostname comes from.
// +kubebuilder:validation:MinProperties=1
type HostnameSpec struct {
	// source is MachineName or InfrastructureName.
	// +optional
	Source HostnameSource `json:"source,omitempty"`
}

// TalosConfigStatus is the observed state of a TalosConfig, as the Cluster API v1beta2
// BootstrapConfig contract defines it.
type TalosConfigStatus struct {
	// conditions describe the state of the TalosConfig; the Ready condition is mirrored onto
	// the owning Machine by Cluster API.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tracks the one-time milestones of the TalosConfig that Cluster API reads.
	// +optional
	Initialization TalosConfigInitializationStatus `json:"initialization,omitempty,omitzero"`

	// dataSecretName is the name of the Secret that holds the rendered machine config under
	// the key "value".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DataSecretName *string `json:"dataSecretName,omitempty"`

	// imageFactory is what Image Factory resolved for this config's installs, recorded with
	// the data Secret.
	// +optional
	ImageFactory ImageFactoryStatus `json:"imageFactory,omitempty,omitzero"`

	// observedGeneration is the latest metadata.generation the controller has acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ImageFactoryStatus records a resolved schematic.
// +kubebuilder:validation:MinProperties=1
type ImageFactoryStatus struct {
	// schematicID is the schematic's ID at the factory.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SchematicID string `json:"schematicID,omitempty"`

	// installer is the installer image written into the machine config.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Installer string `json:"installer,omitempty"`

	// version is the Talos release of the installer.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version,omitempty"`

	// url is the Image Factory the schematic was created at; a TalosMetalMachine that boots
	// this schematic downloads its kernel and initramfs from there.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	URL string `json:"url,omitempty"`
}

// TalosConfigInitializationStatus carries the contract's initialization flags.
// +kubebuilder:validation:MinProperties=1
type TalosConfigInitializationStatus struct {
	// dataSecretCreated is true once the bootstrap data Secret named in
	// status.dataSecretName exists and holds a validated machine config.
	// +optional
	DataSecretCreated *bool `json:"dataSecretCreated,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosconfigs,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the config belongs to"
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.generateType",description="Kind of machine config"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the machine config is rendered and stored"
// +kubebuilder:printcolumn:name="Data Secret",type="string",JSONPath=".status.dataSecretName",description="Secret that holds the machine config",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosConfig renders the Talos machine config of one Machine into its bootstrap data Secret.
type TalosConfig struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired machine config.
	// +required
	Spec TalosConfigSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the TalosConfig.
	// +optional
	Status TalosConfigStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the TalosConfig.
func (c *TalosConfig) GetConditions() []metav1.Condition {
	return c.Status.Conditions
}

// SetConditions replaces the conditions of the TalosConfig.
func (c *TalosConfig) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// TalosConfigList is a list of TalosConfigs.
type TalosConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosConfigs.
	Items []TalosConfig `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosConfig{}, &TalosConfigList{})
}
