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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetalHostSpec describes one bare-metal server in the inventory: how it network-boots, how
// Talon powers it, and where Talos installs. Its labels are what TalosMetalMachines select it by.
type MetalHostSpec struct {
	// bootMACAddresses are the MAC addresses of the network interfaces the host boots from.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`
	BootMACAddresses []string `json:"bootMACAddresses,omitempty"`

	// bmc is how Talon powers the host and selects its boot device. A host without one
	// (registered automatically when it network-booted) stays Registering until it is set.
	// +optional
	BMC *BMCSpec `json:"bmc,omitempty"`

	// architecture is the host's CPU architecture; it selects the boot assets and iPXE binary.
	// +optional
	// +kubebuilder:default=amd64
	Architecture Architecture `json:"architecture,omitempty"`

	// firmware is how the host network-boots: UEFI or legacy BIOS. The DHCP request's client
	// architecture wins when the firmware sends one.
	// +optional
	// +kubebuilder:default=UEFI
	Firmware Firmware `json:"firmware,omitempty"`

	// installDisk is this host's disk for Talos, e.g. /dev/sda or /dev/nvme0n1. It
	// overrides the TalosMetalMachine's installDisk and the disk the Machine's Talos config
	// names; the boot service writes it where the config's contract keeps the install disk
	// (before v1.14, a config's own machine.install.diskSelector still wins on Talos).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^/dev/[A-Za-z0-9/_.:-]+$`
	InstallDisk string `json:"installDisk,omitempty"`

	// network gives the host static addresses, routes and name servers: the config Talon
	// serves it sets them (as LinkAliasConfig, LinkConfig and ResolverConfig documents under
	// the Talos 1.12+ contract, machine.network before), and the host's Machine has its first
	// address. Without it the host's addresses come from DHCP; with it, under Talos 1.12+,
	// interfaces it does not list run no DHCP. The host still network-boots with DHCP; the
	// static addresses replace the lease once Talos has its config. Change it only while the
	// host is not provisioned.
	// +optional
	Network *HostNetwork `json:"network,omitempty"`

	// consumerRef is the TalosMetalMachine that claimed the host. Talon sets it when a
	// Machine claims the host and clears it once the Machine released the host; do not set
	// it by hand. It lives in spec, not status, so that clusterctl move and a restore from a
	// backup keep the claim: Talon rebuilds a claimed host's lost status from it and never
	// powers off or boots again a host whose Machine's node runs on it.
	// +optional
	ConsumerRef *corev1.ObjectReference `json:"consumerRef,omitempty"`

	// needsWipe is true while the host may hold a previous node's data (it was released or
	// powered off without a Talos reset): it becomes Available only after Talon wiped it. Talon
	// sets and clears it; clear it by hand only after wiping the host's disks yourself.
	// +optional
	NeedsWipe bool `json:"needsWipe,omitempty"`

	// wipeDataDisks makes Talon wipe the host's data disks too, not only its system disk,
	// before the host is reused. A Machine that releases the host powers it off instead of
	// resetting it through Talos, and every wipe then network-boots it into Talos'
	// maintenance mode with the system-disk wipe and wipes every other writable disk Talos
	// finds (CD-ROMs, read-only and virtual devices excepted) through the Talos API, erasing
	// their partition tables and filesystem signatures. status.lastWipe names the disks
	// wiped. Without it a released host's data disks keep what they hold. It applies from the
	// next release on.
	// +optional
	WipeDataDisks bool `json:"wipeDataDisks,omitempty"`
}

// HostNetwork is a host's static network configuration.
type HostNetwork struct {
	// interfaces are the host's statically addressed network interfaces, each found by its
	// MAC address.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(i, self.exists_one(j, j.macAddress == i.macAddress))",message="each interface has a MAC address of its own"
	Interfaces []HostInterface `json:"interfaces,omitempty"`

	// nameservers are the DNS servers the host uses, e.g. 10.0.0.53.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:XValidation:rule="isIP(self)",message="a name server is an IP address"
	Nameservers []string `json:"nameservers,omitempty"`
}

// HostInterface is one statically addressed network interface of a host.
type HostInterface struct {
	// name is the name Talos gives the interface, through a LinkAliasConfig that selects it by
	// its MAC address. Other documents of the config (a VIP, a VLAN) can name it, and so can
	// a TalosMetalCluster's controlPlaneVIP.link.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_-]*$`
	Name string `json:"name,omitempty"`

	// macAddress is the interface's permanent MAC address, lower case.
	// +required
	// +kubebuilder:validation:MaxLength=17
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`
	MACAddress string `json:"macAddress,omitempty"`

	// addresses are the interface's addresses with their prefix length, e.g. 10.0.0.11/24.
	// The first one of the host's first interface is its Machine's address (and the Talos
	// API's); on hosts with several interfaces, pin the kubelet's and etcd's to it with the
	// Machine's config patches.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="an address is an IP address with its prefix length, e.g. 10.0.0.11/24"
	Addresses []string `json:"addresses,omitempty"`

	// gateway is the default route's gateway through this interface, if any.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="the gateway is an IP address"
	Gateway string `json:"gateway,omitempty"`
}

// BMCSpec is the address and credentials of a host's baseboard management controller.
type BMCSpec struct {
	// address is the BMC's address:
	// redfish://host[:port][/redfish/v1/Systems/<id>] (Redfish over HTTPS),
	// redfish+http://host[:port][/redfish/v1/Systems/<id>] (Redfish over plain HTTP) or
	// ipmi://host[:port] (IPMI v2.0 over LAN, port 623 by default).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^(redfish|redfish\+http|ipmi)://[^@/\s]+(/\S*)?$`
	Address string `json:"address,omitempty"`

	// credentialsName is the Secret in the host's namespace holding the BMC's "username" and
	// "password". Talon reads it only to talk to the BMC; neither value appears in status,
	// events or logs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CredentialsName string `json:"credentialsName,omitempty"`

	// disableCertificateVerification accepts any TLS certificate from a redfish:// BMC, for
	// BMCs with self-signed certificates.
	// +optional
	DisableCertificateVerification bool `json:"disableCertificateVerification,omitempty"`
}

// Architecture is a CPU architecture Talos ships boot assets for.
// +kubebuilder:validation:Enum=amd64;arm64
type Architecture string

// Firmware is the kind of firmware a host network-boots with.
// +kubebuilder:validation:Enum=UEFI;BIOS
type Firmware string

// The firmware kinds a MetalHost can have.
const (
	// FirmwareUEFI network-boots through UEFI.
	FirmwareUEFI Firmware = "UEFI"
	// FirmwareBIOS network-boots through the legacy BIOS.
	FirmwareBIOS Firmware = "BIOS"
)

// MetalHostState is where a host stands in its lifecycle.
// +kubebuilder:validation:Enum=Registering;Available;Provisioning;Provisioned;Deprovisioning;Error
type MetalHostState string

// The lifecycle states of a MetalHost.
const (
	// MetalHostStateRegistering: the host's BMC is being checked.
	MetalHostStateRegistering MetalHostState = "Registering"
	// MetalHostStateAvailable: the host is wiped and free to be claimed.
	MetalHostStateAvailable MetalHostState = "Available"
	// MetalHostStateProvisioning: a TalosMetalMachine claimed the host and is booting it.
	MetalHostStateProvisioning MetalHostState = "Provisioning"
	// MetalHostStateProvisioned: the host runs as a node of the claiming Machine's cluster.
	MetalHostStateProvisioned MetalHostState = "Provisioned"
	// MetalHostStateDeprovisioning: the host is being reset and wiped.
	MetalHostStateDeprovisioning MetalHostState = "Deprovisioning"
	// MetalHostStateError: the host needs a person; status.lastError says why.
	MetalHostStateError MetalHostState = "Error"
)

// BootAction is what a host was told to do when it network-booted.
// +kubebuilder:validation:Enum=Install;Wipe;Maintenance;Disk
type BootAction string

// The boot actions of a BootRecord.
const (
	// BootActionInstall booted Talos with a one-time config URL.
	BootActionInstall BootAction = "Install"
	// BootActionWipe booted Talos to wipe the system disk; Talos reboots when it is done.
	BootActionWipe BootAction = "Wipe"
	// BootActionMaintenance booted Talos with no config, into maintenance mode: the boot
	// after a wipe boot, where Talon checks the wipe and wipes the data disks.
	BootActionMaintenance BootAction = "Maintenance"
	// BootActionDisk told iPXE to boot the installed disk.
	BootActionDisk BootAction = "Disk"
)

// HostBootAssets name a kernel and initramfs in the boot service's asset cache.
type HostBootAssets struct {
	// kernel is the kernel's name in the cache.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Kernel string `json:"kernel,omitempty"`

	// initramfs is the initramfs's name in the cache.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Initramfs string `json:"initramfs,omitempty"`
}

// BootRecord is one network boot of a host.
type BootRecord struct {
	// time is when the host fetched its iPXE script.
	// +required
	Time metav1.Time `json:"time,omitempty,omitzero"`

	// action is what the script told the host to do.
	// +required
	Action BootAction `json:"action,omitempty"`

	// address is the IP address the host fetched the script from.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Address string `json:"address,omitempty"`

	// configDelivered is true once the host fetched its one-time config.
	// +optional
	ConfigDelivered bool `json:"configDelivered,omitempty"`
}

// HostWipeMethod is how a host was wiped.
// +kubebuilder:validation:Enum=TalosReset;NetworkBoot
type HostWipeMethod string

const (
	// HostWipeTalosReset is a reset through the Talos API of the node the host ran: Talos
	// wiped its system disk and powered it off.
	HostWipeTalosReset HostWipeMethod = "TalosReset"
	// HostWipeNetworkBoot is a network boot into Talos with talos.experimental.wipe=system,
	// which wipes the system disk, then (with spec.wipeDataDisks) wipes through the Talos API
	// in maintenance mode.
	HostWipeNetworkBoot HostWipeMethod = "NetworkBoot"
)

// HostWipe records a wipe of a host.
type HostWipe struct {
	// method is how the host was wiped.
	// +required
	Method HostWipeMethod `json:"method,omitempty"`

	// finished is when the wipe ended.
	// +required
	Finished metav1.Time `json:"finished,omitempty,omitzero"`

	// disks are the disks Talon wiped through the Talos API after the system-disk wipe, by
	// device path (for example /dev/sdb): with spec.wipeDataDisks every writable disk Talos
	// found, the already wiped system disk among them when Talos did not report it as its
	// system disk.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:items:MaxLength=256
	Disks []string `json:"disks,omitempty"`
}

// MetalHostStatus is the observed state of a bare-metal server.
type MetalHostStatus struct {
	// conditions describe the state of the host.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// state is where the host stands in its lifecycle.
	// +optional
	State MetalHostState `json:"state,omitempty"`

	// powerState is the power state the BMC last reported: On, Off or Unknown.
	// +optional
	PowerState string `json:"powerState,omitempty"`

	// consumerRef is deprecated: the claim is spec.consumerRef. Talon moves a claim an earlier
	// version recorded here to spec.consumerRef and clears this field.
	// +optional
	DeprecatedConsumerRef *corev1.ObjectReference `json:"consumerRef,omitempty"`
	// needsWipe is deprecated: see spec.needsWipe. Talon moves a true value an earlier version
	// recorded here to spec.needsWipe and clears this field.
	// +optional
	DeprecatedNeedsWipe bool `json:"needsWipe,omitempty"`
	// lastError is the last problem with the host, e.g. an unreachable BMC; empty once it is
	// solved.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastError string `json:"lastError,omitempty"`

	// addresses are the IP addresses the host booted with most recently.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Addresses []string `json:"addresses,omitempty"`

	// bootAssets are the kernel and initramfs the host last installed from, as names in the
	// boot service's asset cache; a wipe boots them again.
	// +optional
	BootAssets *HostBootAssets `json:"bootAssets,omitempty"`

	// wipeRequested is when Talon last network-booted the host to wipe it.
	// +optional
	WipeRequested *metav1.Time `json:"wipeRequested,omitempty"`

	// lastWipe is how Talon last wiped the host, and when.
	// +optional
	LastWipe *HostWipe `json:"lastWipe,omitempty"`

	// boots are the host's last network boots through Talon's boot service, newest last.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Boots []BootRecord `json:"boots,omitempty"`

	// observedGeneration is the latest metadata.generation the controller has acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=metalhosts,shortName=mh,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.state",description="Lifecycle state of the host"
// +kubebuilder:printcolumn:name="Power",type="string",JSONPath=".status.powerState",description="Power state the BMC reports"
// +kubebuilder:printcolumn:name="Consumer",type="string",JSONPath=".spec.consumerRef.name",description="TalosMetalMachine that claimed the host"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"

// MetalHost is one bare-metal server in Talon's inventory, claimed by TalosMetalMachines.
type MetalHost struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the host.
	// +required
	Spec MetalHostSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the host.
	// +optional
	Status MetalHostStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the MetalHost.
func (h *MetalHost) GetConditions() []metav1.Condition {
	return h.Status.Conditions
}

// SetConditions replaces the conditions of the MetalHost.
func (h *MetalHost) SetConditions(conditions []metav1.Condition) {
	h.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// MetalHostList is a list of MetalHosts.
type MetalHostList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the MetalHosts.
	Items []MetalHost `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &MetalHost{}, &MetalHostList{})
}
