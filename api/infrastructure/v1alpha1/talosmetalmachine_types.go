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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TalosMetalMachineSpec is the desired node of one Machine on a bare-metal host booted over the network.
type TalosMetalMachineSpec struct {
	// providerID is the node's identity; the provider sets it on the workload Node too, so
	// that Cluster API links Machine and Node.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// hostSelector selects the MetalHosts the Machine may claim by their labels; empty
	// selects any Available host in the namespace.
	// +optional
	HostSelector metav1.LabelSelector `json:"hostSelector,omitempty,omitzero"`

	// bootAssets are the Talos kernel and initramfs the host network-boots.
	// +required
	BootAssets BootAssets `json:"bootAssets,omitempty,omitzero"`

	// extraKernelArgs are added to the kernel command line after Talos's defaults; a
	// console= argument replaces the default consoles.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^[^\s]+$`
	ExtraKernelArgs []string `json:"extraKernelArgs,omitempty"`

	// installDisk is the disk Talos installs to, e.g. /dev/sda, on a host whose MetalHost
	// names none; it overrides the disk the Machine's Talos config names (before v1.14, a
	// config's own machine.install.diskSelector still wins on Talos).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^/dev/[A-Za-z0-9/_.:-]+$`
	InstallDisk string `json:"installDisk,omitempty"`
}

// BootAssets are the Talos kernel and initramfs a host network-boots: URLs with their
// SHA-512, or a Talos Image Factory schematic and version. The infrastructure manager
// downloads them once into its verified cache and serves them from there.
// +kubebuilder:validation:XValidation:rule="has(self.kernel) == has(self.initramfs)",message="kernel and initramfs go together"
// +kubebuilder:validation:XValidation:rule="has(self.kernel) != has(self.imageFactory)",message="set kernel and initramfs, or imageFactory"
type BootAssets struct {
	// kernel is the Talos kernel (vmlinuz).
	// +optional
	Kernel *Asset `json:"kernel,omitempty"`

	// initramfs is the Talos initramfs (initramfs.xz).
	// +optional
	Initramfs *Asset `json:"initramfs,omitempty"`

	// imageFactory takes the kernel and initramfs of a Talos Image Factory schematic.
	// +optional
	ImageFactory *ImageFactory `json:"imageFactory,omitempty"`
}

// Asset is a file to download and verify.
type Asset struct {
	// url is where to download the file (http or https).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url,omitempty"`

	// sha512 is the file's SHA-512, 128 hexadecimal digits; a download that does not match
	// is discarded.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{128}$`
	SHA512 string `json:"sha512,omitempty"`
}

// ImageFactory names boot assets built by a Talos Image Factory.
// +kubebuilder:validation:XValidation:rule="has(self.schematic) == has(self.version)",message="set schematic and version together, or neither to use the schematic of the Machine's TalosConfig"
type ImageFactory struct {
	// url is the Image Factory's address.
	// +optional
	// +kubebuilder:default="https://factory.talos.dev"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	URL string `json:"url,omitempty"`

	// schematic is the schematic ID, 64 hexadecimal digits. Unset, with version, means the
	// schematic and release the Machine's TalosConfig resolved (its status.imageFactory), so
	// that the host boots the image it installs.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Schematic string `json:"schematic,omitempty"`

	// version is the Talos version, e.g. v1.14.1.
	// +optional
	// +kubebuilder:validation:Pattern=`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`
	Version string `json:"version,omitempty"`

	// kernelSHA512 and initramfsSHA512 are the assets' SHA-512 (128 hexadecimal digits); a
	// download that does not match is discarded and the host does not boot. The factory
	// publishes no checksums: without them the first download is the one kept.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{128}$`
	KernelSHA512 string `json:"kernelSHA512,omitempty"`

	// initramfsSHA512 is the initramfs' SHA-512; see kernelSHA512.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{128}$`
	InitramfsSHA512 string `json:"initramfsSHA512,omitempty"`
}

// TalosMetalMachineStatus is the observed state of the node.
type TalosMetalMachineStatus struct {
	// conditions describe the state of the node.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tracks the one-time milestones Cluster API reads.
	// +optional
	Initialization MachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// addresses are the node's addresses.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// host is the MetalHost the Machine claimed.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host,omitempty"`

	// lastBootRequest is when Talon last network-booted the host through its BMC.
	// +optional
	LastBootRequest *metav1.Time `json:"lastBootRequest,omitempty"`

	// failureDomain is the failure domain the node runs in.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// observedGeneration is the latest metadata.generation the controller has acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=talosmetalmachines,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster the node belongs to"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=".metadata.ownerReferences[?(@.kind==\"Machine\")].name",description="Machine that owns the node"
// +kubebuilder:printcolumn:name="Host",type="string",JSONPath=".status.host",description="MetalHost the node runs on"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the node is ready"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Whether the node is provisioned"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",description="Provider ID of the node",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// TalosMetalMachine is the node of one Machine on a bare-metal host booted over the network.
type TalosMetalMachine struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired node.
	// +optional
	Spec TalosMetalMachineSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the node.
	// +optional
	Status TalosMetalMachineStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the TalosMetalMachine.
func (m *TalosMetalMachine) GetConditions() []metav1.Condition {
	return m.Status.Conditions
}

// SetConditions replaces the conditions of the TalosMetalMachine.
func (m *TalosMetalMachine) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// TalosMetalMachineList is a list of TalosMetalMachines.
type TalosMetalMachineList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TalosMetalMachines.
	Items []TalosMetalMachine `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TalosMetalMachine{}, &TalosMetalMachineList{})
}
