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

package configgen

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/labels"
	"go.yaml.in/yaml/v4"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// The spec's typed settings (node labels and taints, registry mirrors, CNI, disk encryption)
// are written in the documents each contract reads them from, as one strategic-merge patch
// applied before the spec's own patches, which can still change them.

// ErrStaticKeyMissing is returned when a spec encrypts with a static key and the Machine
// carries no passphrase: the caller reads it from the Secret the spec names.
var ErrStaticKeyMissing = errors.New("diskEncryption.staticKeySecretRef is set but its passphrase was not read")

// systemVolumes are the volumes diskEncryption encrypts.
var systemVolumes = []string{"STATE", "EPHEMERAL"}

// settingsPatch returns the patch that writes spec's settings for contract, or nil when the
// spec sets none. staticKey is the passphrase of spec.diskEncryption.staticKeySecretRef.
func settingsPatch(spec bootstrapv1.TalosConfigSpec, staticKey string, contract *config.VersionContract) (configpatcher.Patch, error) {
	v1alpha1 := map[string]any{}
	var documents []map[string]any
	machine := func() map[string]any {
		if v1alpha1["machine"] == nil {
			v1alpha1["machine"] = map[string]any{}
		}
		return v1alpha1["machine"].(map[string]any)
	}

	if len(spec.NodeLabels) > 0 || len(spec.NodeTaints) > 0 {
		taints := map[string]string{}
		for _, t := range spec.NodeTaints {
			taints[t.Key] = taintValue(t)
		}
		if contract.MultidocKubernetesConfigSupported() {
			node := document("KubeNodeConfig", "")
			setIfAny(node, "labels", spec.NodeLabels)
			setIfAny(node, "taints", taints)
			documents = append(documents, node)
		} else {
			setIfAny(machine(), "nodeLabels", spec.NodeLabels)
			setIfAny(machine(), "nodeTaints", taints)
		}
	}

	if len(spec.RegistryMirrors) > 0 {
		if contract.Greater(config.TalosVersion1_11) {
			for _, m := range spec.RegistryMirrors {
				doc := document("RegistryMirrorConfig", m.Registry)
				var endpoints []any
				for _, e := range m.Endpoints {
					endpoints = append(endpoints, map[string]any{"url": e})
				}
				doc["endpoints"] = endpoints
				if m.SkipFallback != nil {
					doc["skipFallback"] = *m.SkipFallback
				}
				documents = append(documents, doc)
			}
		} else {
			mirrors := map[string]any{}
			for _, m := range spec.RegistryMirrors {
				mirror := map[string]any{"endpoints": m.Endpoints}
				if m.SkipFallback != nil {
					mirror["skipFallback"] = *m.SkipFallback
				}
				mirrors[m.Registry] = mirror
			}
			machine()["registries"] = map[string]any{"mirrors": mirrors}
		}
	}

	if spec.CNI == bootstrapv1.CNINone {
		if contract.MultidocKubernetesConfigSupported() {
			// Flannel is a document of its own: without it, Talos deploys no CNI.
			deleteFlannel := document("KubeFlannelCNIConfig", "")
			deleteFlannel["$patch"] = "delete"
			documents = append(documents, deleteFlannel)
		} else {
			v1alpha1["cluster"] = map[string]any{"network": map[string]any{"cni": map[string]any{"name": "none"}}}
		}
	}

	if !spec.DiskEncryption.IsZero() {
		encryption, err := encryptionSpec(spec.DiskEncryption, staticKey)
		if err != nil {
			return nil, err
		}
		if contract.VolumeConfigEncryptionSupported() {
			for _, volume := range systemVolumes {
				doc := document("VolumeConfig", volume)
				doc["encryption"] = encryption
				documents = append(documents, doc)
			}
		} else {
			machine()["systemDiskEncryption"] = map[string]any{"state": encryption, "ephemeral": encryption}
		}
	}

	if len(v1alpha1) == 0 && len(documents) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	encoder := yaml.NewEncoder(&buf)
	if len(v1alpha1) > 0 {
		if err := encoder.Encode(v1alpha1); err != nil {
			return nil, fmt.Errorf("failed to encode the settings patch: %w", err)
		}
	}
	for _, doc := range documents {
		if err := encoder.Encode(doc); err != nil {
			return nil, fmt.Errorf("failed to encode the settings patch: %w", err)
		}
	}
	if err := encoder.Close(); err != nil {
		return nil, fmt.Errorf("failed to encode the settings patch: %w", err)
	}
	cfg, err := configloader.NewFromBytes(buf.Bytes(), configloader.WithAllowPatchDelete())
	if err != nil {
		if staticKey != "" {
			// The patch holds the passphrase, which a loader's error may quote.
			return nil, errors.New("the settings (node labels and taints, registry mirrors, cni, diskEncryption) do not make a Talos config patch")
		}
		return nil, fmt.Errorf("the settings (node labels and taints, registry mirrors, cni, diskEncryption) do not make a Talos config patch: %s", oneLine(err))
	}
	return configpatcher.NewStrategicMergePatch(cfg), nil
}

// encryptionSpec is the encryption of one volume: LUKS2 with the spec's key in slot 0 and
// the static key after it.
func encryptionSpec(spec bootstrapv1.DiskEncryptionSpec, staticKey string) (map[string]any, error) {
	var keys []any
	switch spec.Key {
	case bootstrapv1.DiskEncryptionKeyTPM:
		keys = append(keys, map[string]any{"slot": len(keys), "tpm": map[string]any{}})
	case bootstrapv1.DiskEncryptionKeyNodeID:
		keys = append(keys, map[string]any{"slot": len(keys), "nodeID": map[string]any{}})
	}
	if spec.StaticKeySecretRef.Name != "" {
		if staticKey == "" {
			return nil, ErrStaticKeyMissing
		}
		keys = append(keys, map[string]any{"slot": len(keys), "static": map[string]any{"passphrase": staticKey}})
	}
	return map[string]any{"provider": "luks2", "keys": keys}, nil
}

// taintValue is a taint as Talos writes it: value:effect, or the effect alone.
func taintValue(t bootstrapv1.NodeTaint) string {
	if t.Value == "" {
		return string(t.Effect)
	}
	return t.Value + ":" + string(t.Effect)
}

// document starts a multi-document config document of kind, named when name is set.
func document(kind, name string) map[string]any {
	doc := map[string]any{"apiVersion": "v1alpha1", "kind": kind}
	if name != "" {
		doc["name"] = name
	}
	return doc
}

func setIfAny(m map[string]any, key string, values map[string]string) {
	if len(values) > 0 {
		m[key] = values
	}
}

// CheckSettings checks the spec's typed settings (node labels and taints, registry mirrors)
// as Talos checks them, naming the spec's fields; Check calls it.
func CheckSettings(spec bootstrapv1.TalosConfigSpec) error {
	var errs []error
	if err := labels.Validate(spec.NodeLabels); err != nil {
		errs = append(errs, fmt.Errorf("nodeLabels: %s", oneLine(err)))
	}
	taints := map[string]bool{}
	for i, t := range spec.NodeTaints {
		if err := labels.ValidateTaints(map[string]string{t.Key: taintValue(t)}); err != nil {
			errs = append(errs, fmt.Errorf("nodeTaints[%d]: %s", i, oneLine(err)))
		}
		// Talos keeps one taint per key.
		if taints[t.Key] {
			errs = append(errs, fmt.Errorf("nodeTaints[%d]: the key %s is listed twice", i, t.Key))
		}
		taints[t.Key] = true
	}
	registries := map[string]bool{}
	for i, m := range spec.RegistryMirrors {
		if len(m.Endpoints) == 0 {
			errs = append(errs, fmt.Errorf("registryMirrors[%d] (%s): at least one endpoint is needed", i, m.Registry))
		}
		if registries[m.Registry] {
			errs = append(errs, fmt.Errorf("registryMirrors[%d]: the registry %s is listed twice", i, m.Registry))
		}
		registries[m.Registry] = true
	}
	return errors.Join(errs...)
}
