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
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch"
	"github.com/siderolabs/talos/pkg/machinery/config"
	coreconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// loadPatches turns a spec's patches into machinery patches: one RFC 6902 patch holding
// every configPatches operation, then each strategic patch.
func loadPatches(spec bootstrapv1.TalosConfigSpec) ([]configpatcher.Patch, error) {
	patches := make([]configpatcher.Patch, 0, 1+len(spec.StrategicPatches))
	if len(spec.ConfigPatches) > 0 {
		raw, err := json.Marshal(spec.ConfigPatches)
		if err != nil {
			return nil, fmt.Errorf("failed to encode configPatches: %w", err)
		}
		p, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			return nil, fmt.Errorf("configPatches are not a valid RFC 6902 patch: %w", err)
		}
		patches = append(patches, p)
	}
	for i, s := range spec.StrategicPatches {
		cfg, err := configloader.NewFromBytes([]byte(s), configloader.WithAllowPatchDelete())
		if err != nil {
			return nil, fmt.Errorf("strategicPatches[%d] is not a Talos config patch: %w", i, err)
		}
		patches = append(patches, configpatcher.NewStrategicMergePatch(cfg))
	}
	return patches, nil
}

// hostnamePatch sets a static hostname: a HostnameConfig document on Talos 1.12 and later,
// which replaces the stable automatic hostname generated there, machine.network.hostname before.
func hostnamePatch(hostname string, contract *config.VersionContract) (configpatcher.Patch, error) {
	var doc string
	if contract.MultidocNetworkConfigSupported() {
		doc = fmt.Sprintf("apiVersion: v1alpha1\nkind: HostnameConfig\nauto: \"off\"\nhostname: %q\n", hostname)
	} else {
		doc = fmt.Sprintf("machine:\n  network:\n    hostname: %q\n", hostname)
	}
	cfg, err := configloader.NewFromBytes([]byte(doc), configloader.WithAllowPatchDelete())
	if err != nil {
		return nil, fmt.Errorf("invalid hostname %q: %w", hostname, err)
	}
	return configpatcher.NewStrategicMergePatch(cfg), nil
}

// applyPatches applies patches in order. Machinery refuses RFC 6902 patches on configs of
// several documents (every config of Talos 1.12 and later), so they are applied to the
// v1alpha1 document alone, the one their paths (/machine/..., /cluster/...) address, and
// the other documents are kept as they are.
func applyPatches(cfg config.Provider, patches []configpatcher.Patch) (config.Provider, error) {
	for i, patch := range patches {
		var err error
		switch p := patch.(type) {
		case jsonpatch.Patch:
			cfg, err = applyJSON6902(cfg, p)
		case configpatcher.StrategicMergePatch:
			cfg, err = configpatcher.StrategicMerge(cfg, p)
		default:
			err = fmt.Errorf("unknown patch type %T", patch)
		}
		if err != nil {
			return nil, fmt.Errorf("patch %d: %w", i+1, err)
		}
	}
	return cfg, nil
}

func applyJSON6902(cfg config.Provider, patch jsonpatch.Patch) (config.Provider, error) {
	v1alpha1 := cfg.RawV1Alpha1()
	if v1alpha1 == nil {
		return nil, fmt.Errorf("configPatches address the v1alpha1 document, which this config does not have")
	}
	raw, err := container.NewV1Alpha1(v1alpha1).EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return nil, fmt.Errorf("failed to encode the v1alpha1 document: %w", err)
	}
	patched, err := configpatcher.JSON6902(raw, patch)
	if err != nil {
		return nil, fmt.Errorf("configPatches do not apply: %w", err)
	}
	loaded, err := configloader.NewFromBytes(patched)
	if err != nil {
		return nil, fmt.Errorf("configPatches produce an invalid v1alpha1 document: %w", err)
	}
	docs := []coreconfig.Document{loaded.RawV1Alpha1()}
	for _, doc := range cfg.Documents() {
		if doc.Kind() != v1alpha1.Kind() {
			docs = append(docs, doc)
		}
	}
	out, err := container.New(docs...)
	if err != nil {
		return nil, fmt.Errorf("configPatches produce an invalid config: %w", err)
	}
	return out, nil
}
