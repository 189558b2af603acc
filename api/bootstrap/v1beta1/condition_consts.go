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

import clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

// Conditions of a TalosConfig. Ready summarises them and is mirrored onto the Machine.
const (
	// TalosConfigReadyCondition is true when the machine config is rendered, validated and stored.
	TalosConfigReadyCondition = clusterv1.ReadyCondition

	// TalosConfigDataSecretAvailableCondition is true when the bootstrap data Secret exists.
	// While it is false, its reason says what the TalosConfig waits for or what is wrong.
	TalosConfigDataSecretAvailableCondition = "DataSecretAvailable"

	// TalosConfigPausedCondition is true while the TalosConfig or its Cluster is paused.
	TalosConfigPausedCondition = clusterv1.PausedCondition
)

// Reasons of the DataSecretAvailable condition.
const (
	// DataSecretAvailableReason: the bootstrap data Secret exists.
	DataSecretAvailableReason = clusterv1.AvailableReason

	// WaitingForOwnerReason: no Machine or MachinePool owns the TalosConfig yet.
	WaitingForOwnerReason = "WaitingForOwner"

	// WaitingForClusterReason: the Cluster named by the cluster-name label does not exist yet.
	WaitingForClusterReason = "WaitingForCluster"

	// WaitingForInfrastructureReason: the Cluster's infrastructure is not provisioned yet.
	WaitingForInfrastructureReason = "WaitingForInfrastructure"

	// WaitingForControlPlaneEndpointReason: the Cluster has no control-plane endpoint yet.
	WaitingForControlPlaneEndpointReason = "WaitingForControlPlaneEndpoint"

	// InvalidConfigReason: the spec cannot produce a config a Talos node would accept (a
	// patch does not apply, the version is unknown, the config fails validation); the message
	// says what to fix. Nothing is written until it is fixed.
	InvalidConfigReason = "InvalidConfig"

	// ImageFactoryUnavailableReason: Image Factory could not be asked for the schematic or its
	// extension list; it is asked again.
	ImageFactoryUnavailableReason = "ImageFactoryUnavailable"

	// ImageFactoryRejectedReason: Image Factory does not offer what spec.imageFactory asks for
	// (an extension it does not know, a release it does not build).
	ImageFactoryRejectedReason = "ImageFactoryRejected"

	// SecretsBundleUnavailableReason: the Cluster's secrets bundle cannot be read or is
	// missing while the cluster's CA still exists; Talon does not create a second one, as
	// that would split the cluster's identity.
	SecretsBundleUnavailableReason = "SecretsBundleUnavailable"

	// DiskEncryptionKeyUnavailableReason: the Secret spec.diskEncryption.staticKeySecretRef
	// names, or its data key, does not exist or is empty; the config is rendered once it does.
	DiskEncryptionKeyUnavailableReason = "DiskEncryptionKeyUnavailable"

	// InternalErrorReason: an unexpected error, such as a failed API call, that is retried.
	InternalErrorReason = clusterv1.InternalErrorReason
)

// Annotations of a bootstrap data Secret recording what Image Factory resolved for its
// config (status.imageFactory): the Secret is what "clusterctl move" carries, and the metal
// boot service reads the installer from it when it adds an install disk to a served config.
const (
	// ImageFactorySchematicAnnotation is the schematic ID.
	ImageFactorySchematicAnnotation = "talon.dev/image-factory-schematic"
	// ImageFactoryInstallerAnnotation is the installer image.
	ImageFactoryInstallerAnnotation = "talon.dev/image-factory-installer"
	// ImageFactoryVersionAnnotation is the Talos release of the installer.
	ImageFactoryVersionAnnotation = "talon.dev/image-factory-version"
	// ImageFactoryURLAnnotation is the factory the schematic was created at.
	ImageFactoryURLAnnotation = "talon.dev/image-factory-url"
	// RenderedForAnnotation, on a data Secret, identifies the spec and Kubernetes version the
	// config in it was rendered from (RenderedFor).
	RenderedForAnnotation = "talon.dev/rendered-for"
)

// InPlaceUpdateAnnotation is set on a TalosConfig by its owner while the owner's node is
// updated in place; its value is the Kubernetes version to render for. While it is set, the
// spec may change although the data Secret exists, and the Secret is rendered again (from the
// same secrets bundle) whenever the spec or the version changes.
const InPlaceUpdateAnnotation = "bootstrap.cluster.x-k8s.io/in-place-update"
