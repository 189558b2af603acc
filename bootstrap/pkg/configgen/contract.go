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
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

var (
	// OldestContract is the oldest Talos version Talon renders configs for.
	OldestContract = config.TalosVersion1_10

	// NewestContract is the newest Talos version Talon renders configs for: the version of
	// the Talos machinery library it is built with.
	NewestContract = config.TalosVersion1_14
)

// UnpinnedContract is what an empty talosVersion means: the contract Talon rendered for
// before it recorded one in every new control plane and template. It never changes, so that
// objects made then keep getting the configs their nodes were made with.
var UnpinnedContract = config.TalosVersion1_13

// DefaultTalosVersion is the contract recorded in control planes and templates created
// without one: the newest Talon renders for.
func DefaultTalosVersion() string {
	return NewestContract.String()
}

// ParseContract turns a talosVersion such as "v1.12" or "1.12.3" into a version contract,
// refusing versions Talon cannot render for. An empty version means UnpinnedContract.
func ParseContract(talosVersion string) (*config.VersionContract, error) {
	if talosVersion == "" {
		return UnpinnedContract, nil
	}
	v := talosVersion
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	contract, err := config.ParseContractFromVersion(v)
	if err != nil {
		return nil, fmt.Errorf("talosVersion %q is not a Talos version like v1.13: %w", talosVersion, err)
	}
	if contract.Greater(NewestContract) || OldestContract.Greater(contract) {
		return nil, fmt.Errorf("talosVersion %q is not supported: Talon renders configs for Talos %s to %s",
			talosVersion, OldestContract, NewestContract)
	}
	return contract, nil
}

// testedReleases is the Talos release Talon is tested with for each contract: the default
// release an Image Factory installer is built for (spec.imageFactory.version).
var testedReleases = map[string]string{
	"v1.10": "v1.10.0",
	"v1.11": "v1.11.5",
	"v1.12": "v1.12.6",
	"v1.13": "v1.13.3",
	"v1.14": "v1.14.1",
}

// FactoryRelease is the Talos release a spec's Image Factory installer is built for:
// spec.imageFactory.version, else the release Talon is tested with for its contract.
func FactoryRelease(spec bootstrapv1.TalosConfigSpec) (string, error) {
	if spec.ImageFactory.Version != "" {
		return spec.ImageFactory.Version, nil
	}
	contract, err := ParseContract(spec.TalosVersion)
	if err != nil {
		return "", err
	}
	return testedReleases[contract.String()], nil
}

// UsesImageFactory reports whether a node of mode installs from an Image Factory installer:
// metal nodes under the v1.14 contract (ghcr.io/siderolabs/installer is not published from
// Talos 1.14) and under earlier contracts when spec.imageFactory is set. Container nodes
// never install.
func UsesImageFactory(spec bootstrapv1.TalosConfigSpec, mode Mode) bool {
	if mode != ModeMetal || spec.GenerateType == bootstrapv1.GenerateTypeNone {
		return false
	}
	if !spec.ImageFactory.IsZero() {
		return true
	}
	contract, err := ParseContract(spec.TalosVersion)
	return err == nil && contract.UnattendedInstallConfig()
}
