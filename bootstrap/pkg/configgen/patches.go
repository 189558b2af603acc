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
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch"
	"github.com/siderolabs/talos/pkg/machinery/config"
	coreconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// documentPatch is one configPatches operation and the document it applies to.
type documentPatch struct {
	index    int
	document bootstrapv1.ConfigDocumentRef
	op       bootstrapv1.ConfigPatch
	patch    jsonpatch.Patch
}

// loadPatches turns a spec's patches into machinery patches: each configPatches operation,
// then each strategic patch.
func loadPatches(spec bootstrapv1.TalosConfigSpec) ([]configpatcher.Patch, error) {
	patches := make([]configpatcher.Patch, 0, len(spec.ConfigPatches)+len(spec.StrategicPatches))
	for i, op := range spec.ConfigPatches {
		document := op.Document
		op.Document = bootstrapv1.ConfigDocumentRef{}
		raw, err := json.Marshal([]bootstrapv1.ConfigPatch{op})
		if err != nil {
			return nil, fmt.Errorf("failed to encode configPatches[%d]: %w", i, err)
		}
		p, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			return nil, fmt.Errorf("configPatches[%d] is not a valid RFC 6902 operation: %w", i, err)
		}
		patches = append(patches, documentPatch{index: i, document: document, op: op, patch: p})
	}
	for i, s := range spec.StrategicPatches {
		cfg, err := configloader.NewFromBytes([]byte(s), configloader.WithAllowPatchDelete())
		if err != nil {
			return nil, fmt.Errorf("strategicPatches[%d] is not a Talos config patch: %s", i, oneLine(err))
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

// setInstaller makes image the installer of cfg, where the config says how to install:
// the UnattendedInstallConfig document when there is one (the v1.14 contract with an install
// disk), machine.install when it is set. A config that says neither (the v1.14 contract,
// whose install disk the boot service adds when it serves the config) is left as it is: the
// boot service adds the installer with the disk (Inventory, from the data Secret's
// annotations).
func setInstaller(cfg config.Provider, image string) (config.Provider, error) {
	value, err := json.Marshal(image)
	if err != nil {
		return nil, err
	}
	op := bootstrapv1.ConfigPatch{Op: "add", Path: "/machine/install/image", Value: &apiextensionsv1.JSON{Raw: value}}
	var document bootstrapv1.ConfigDocumentRef
	for _, d := range cfg.Documents() {
		if d.Kind() == "UnattendedInstallConfig" {
			op.Path, document = "/installer/image", bootstrapv1.ConfigDocumentRef{Kind: d.Kind()}
		}
	}
	if document.Kind == "" {
		legacy, err := LegacyFields(cfg)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(legacy, ".machine.install") {
			return cfg, nil
		}
	}
	raw, err := json.Marshal([]bootstrapv1.ConfigPatch{op})
	if err != nil {
		return nil, err
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, err
	}
	out, err := applyToDocument(cfg, documentPatch{index: -1, document: document, op: op, patch: p})
	if err != nil {
		return nil, fmt.Errorf("failed to set the installer image %q: %w", image, err)
	}
	return out, nil
}

// applyPatches applies patches in order. Machinery refuses RFC 6902 patches on configs of
// several documents (every config of Talos 1.12 and later), so each operation is applied to
// the one document it addresses, and the other documents are kept as they are.
func applyPatches(cfg config.Provider, patches []configpatcher.Patch) (config.Provider, error) {
	for i, patch := range patches {
		var err error
		switch p := patch.(type) {
		case documentPatch:
			cfg, err = applyToDocument(cfg, p)
		case configpatcher.StrategicMergePatch:
			cfg, err = configpatcher.StrategicMerge(cfg, p)
			if err != nil {
				err = fmt.Errorf("patch %d: %w", i+1, err)
			}
		default:
			err = fmt.Errorf("patch %d: unknown patch type %T", i+1, patch)
		}
		if err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// applyToDocument applies one configPatches operation to the document it addresses.
func applyToDocument(cfg config.Provider, p documentPatch) (config.Provider, error) {
	where := fmt.Sprintf("configPatches[%d] (%s %s in the %s document)", p.index, p.op.Op, p.op.Path, describe(p.document))
	if p.index < 0 {
		// Talon's own operation, not one of the spec's.
		where = fmt.Sprintf("%s %s in the %s document", p.op.Op, p.op.Path, describe(p.document))
	}
	docs := cfg.Documents()
	target, err := findDocument(docs, p.document)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	raw, err := encodeDocument(docs[target])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	patched, err := configpatcher.JSON6902(raw, p.patch)
	if err != nil {
		return nil, fmt.Errorf("%s does not apply: %w", where, err)
	}
	loaded, err := configloader.NewFromBytes(patched)
	if err != nil {
		return nil, fmt.Errorf("%s makes the document invalid: %s", where, oneLine(err))
	}
	if len(loaded.Documents()) != 1 || documentID(loaded.Documents()[0]) != documentID(docs[target]) {
		return nil, fmt.Errorf("%s changes which document it is; change kind and name with a strategic patch instead", where)
	}
	out := append([]coreconfig.Document(nil), docs...)
	out[target] = loaded.Documents()[0]
	result, err := container.New(out...)
	if err != nil {
		return nil, fmt.Errorf("%s makes the config invalid: %s", where, oneLine(err))
	}
	return result, nil
}

// v1alpha1Kind is what the v1alpha1 document answers to Kind().
const v1alpha1Kind = "v1alpha1"

// describe names the document ref points to, as messages say it.
func describe(ref bootstrapv1.ConfigDocumentRef) string {
	kind := ref.Kind
	if kind == "" {
		kind = v1alpha1Kind
	}
	if ref.Name != "" {
		return fmt.Sprintf("%s %q", kind, ref.Name)
	}
	return kind
}

// findDocument returns the index of the one document ref points to.
func findDocument(docs []coreconfig.Document, ref bootstrapv1.ConfigDocumentRef) (int, error) {
	kind := ref.Kind
	if kind == "" {
		kind = v1alpha1Kind
	}
	var matches, names []string
	found := -1
	for i, doc := range docs {
		if doc.Kind() != kind {
			continue
		}
		name := documentName(doc)
		names = append(names, fmt.Sprintf("%q", name))
		if ref.Name == "" || ref.Name == name {
			matches = append(matches, name)
			found = i
		}
	}
	switch {
	case len(matches) == 1:
		return found, nil
	case len(matches) > 1:
		return 0, fmt.Errorf("the config has %d %s documents (%s): set document.name to pick one", len(matches), kind, strings.Join(names, ", "))
	case len(names) > 0:
		return 0, fmt.Errorf("the config has no %s document named %q, only %s", kind, ref.Name, strings.Join(names, ", "))
	default:
		return 0, fmt.Errorf("the config has no %s document: add it with a strategic patch, or check that the cluster's Talos version contract uses it", kind)
	}
}

// documentName is a document's name, or "" for kinds without one.
func documentName(doc coreconfig.Document) string {
	if named, ok := doc.(coreconfig.NamedDocument); ok {
		return named.Name()
	}
	return ""
}

// documentID identifies a document within a config.
func documentID(doc coreconfig.Document) string {
	return doc.Kind() + "/" + documentName(doc)
}

// encodeDocument encodes one document alone, as YAML.
func encodeDocument(doc coreconfig.Document) ([]byte, error) {
	c, err := container.New(doc)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the document: %w", err)
	}
	raw, err := c.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return nil, fmt.Errorf("failed to encode the document: %w", err)
	}
	return raw, nil
}
