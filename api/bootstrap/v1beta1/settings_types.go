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

// TaintEffect is what a taint does to Pods that do not tolerate it.
// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
type TaintEffect string

const (
	// TaintEffectNoSchedule keeps new Pods off the node.
	TaintEffectNoSchedule TaintEffect = "NoSchedule"
	// TaintEffectPreferNoSchedule keeps new Pods off the node where the scheduler can.
	TaintEffectPreferNoSchedule TaintEffect = "PreferNoSchedule"
	// TaintEffectNoExecute also evicts running Pods.
	TaintEffectNoExecute TaintEffect = "NoExecute"
)

// NodeTaint is a taint the node registers with.
type NodeTaint struct {
	// key is the taint's key, e.g. dedicated or example.com/gpu.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key,omitempty"`

	// value is the taint's value; empty means none.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`

	// effect is NoSchedule, PreferNoSchedule or NoExecute.
	// +required
	Effect TaintEffect `json:"effect,omitempty"`
}

// RegistryMirror sends a registry's image pulls to mirrors.
type RegistryMirror struct {
	// registry is the registry mirrored, e.g. docker.io or registry.k8s.io; * mirrors
	// every registry.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Registry string `json:"registry,omitempty"`

	// endpoints are the mirrors' URLs, tried in order, e.g. https://mirror.example.com:5000.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^https?://`
	// +kubebuilder:validation:items:MaxLength=1024
	Endpoints []string `json:"endpoints,omitempty"`

	// skipFallback, when true, never pulls from the registry itself when no mirror has the
	// image.
	// +optional
	SkipFallback *bool `json:"skipFallback,omitempty"`
}

// CNI names the cluster's CNI.
// +kubebuilder:validation:Enum=flannel;none
type CNI string

const (
	// CNIFlannel is Talos' own Flannel, the default.
	CNIFlannel CNI = "flannel"
	// CNINone installs no CNI: the user installs one.
	CNINone CNI = "none"
)

// DiskEncryptionKey is where the key of an encrypted volume's first key slot comes from.
// +kubebuilder:validation:Enum=TPM;NodeID
type DiskEncryptionKey string

const (
	// DiskEncryptionKeyTPM seals the key with the node's TPM (and its SecureBoot state).
	DiskEncryptionKeyTPM DiskEncryptionKey = "TPM"
	// DiskEncryptionKeyNodeID derives the key from the node's ID; it protects a disk
	// taken out of the machine, not one read on it.
	DiskEncryptionKeyNodeID DiskEncryptionKey = "NodeID"
)

// DiskEncryptionSpec encrypts the node's STATE and EPHEMERAL volumes.
// +kubebuilder:validation:MinProperties=1
type DiskEncryptionSpec struct {
	// key is the key of slot 0: TPM or NodeID.
	// +optional
	Key DiskEncryptionKey `json:"key,omitempty"`

	// staticKeySecretRef names a Secret in the TalosConfig's namespace and the key of its
	// data that holds a passphrase: a static key, in slot 1 when key is set (e.g. a recovery
	// key beside the TPM), else in slot 0. The passphrase is read when the config is
	// rendered and written only into the bootstrap data Secret; it is never in the
	// TalosConfig, a template or a log.
	// +optional
	StaticKeySecretRef SecretKeyReference `json:"staticKeySecretRef,omitempty,omitzero"`
}

// IsZero reports whether the volumes are left unencrypted.
func (s DiskEncryptionSpec) IsZero() bool {
	return s.Key == "" && s.StaticKeySecretRef == (SecretKeyReference{})
}

// SecretKeyReference names one key of a Secret in the referring object's namespace.
type SecretKeyReference struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// key is the key in the Secret's data; default passphrase.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// DefaultStaticKeySecretKey is the Secret data key a staticKeySecretRef without a key reads.
const DefaultStaticKeySecretKey = "passphrase"

// DataKey is the key of the Secret's data the reference reads: key, or passphrase when unset.
func (r SecretKeyReference) DataKey() string {
	if r.Key == "" {
		return DefaultStaticKeySecretKey
	}
	return r.Key
}
