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

	"github.com/blang/semver/v4"
	"github.com/siderolabs/talos/pkg/machinery/compatibility/talos110"
	"github.com/siderolabs/talos/pkg/machinery/compatibility/talos111"
	"github.com/siderolabs/talos/pkg/machinery/compatibility/talos112"
	"github.com/siderolabs/talos/pkg/machinery/compatibility/talos113"
	"github.com/siderolabs/talos/pkg/machinery/compatibility/talos114"
	"github.com/siderolabs/talos/pkg/machinery/config"
)

// Support is what one Talos minor version supports, as Talos' machinery states it.
type Support struct {
	// Talos is the Talos minor version, as a config contract.
	Talos *config.VersionContract
	// MinKubernetes and MaxKubernetes bound the Kubernetes versions it runs.
	MinKubernetes, MaxKubernetes semver.Version
	// MinUpgradeFrom is the oldest Talos version that upgrades to it directly.
	MinUpgradeFrom semver.Version
}

// SupportMatrix is the Talos ↔ Kubernetes support window and the Talos upgrade window of
// every version Talon renders configs for, oldest first, read from machinery's
// compatibility package (docs/compatibility.md prints it).
var SupportMatrix = []Support{
	{config.TalosVersion1_10, talos110.MinimumKubernetesVersion, talos110.MaximumKubernetesVersion, talos110.MinimumHostUpgradeVersion},
	{config.TalosVersion1_11, talos111.MinimumKubernetesVersion, talos111.MaximumKubernetesVersion, talos111.MinimumHostUpgradeVersion},
	{config.TalosVersion1_12, talos112.MinimumKubernetesVersion, talos112.MaximumKubernetesVersion, talos112.MinimumHostUpgradeVersion},
	{config.TalosVersion1_13, talos113.MinimumKubernetesVersion, talos113.MaximumKubernetesVersion, talos113.MinimumHostUpgradeVersion},
	{config.TalosVersion1_14, talos114.MinimumKubernetesVersion, talos114.MaximumKubernetesVersion, talos114.MinimumHostUpgradeVersion},
}

// TestedKubernetes are the Kubernetes versions Talon's tests run nodes of (the
// kube-apiservers of hack/tools/kubernetes*), one patch per minor, oldest first. A minor
// alone, as a KubernetesCluster may name it ("1.36"), resolves to the one listed here.
var TestedKubernetes = []string{"v1.35.4", "v1.36.3", "v1.37.2"}

// supportOf returns the row of contract.
func supportOf(contract *config.VersionContract) (Support, bool) {
	for _, s := range SupportMatrix {
		if s.Talos.Major == contract.Major && s.Talos.Minor == contract.Minor {
			return s, true
		}
	}
	return Support{}, false
}

// KubernetesWindow is the window as people write it: v1.32 to v1.37.
func (s Support) KubernetesWindow() string {
	return fmt.Sprintf("v%d.%d to v%d.%d", s.MinKubernetes.Major, s.MinKubernetes.Minor, s.MaxKubernetes.Major, s.MaxKubernetes.Minor)
}

// CheckKubernetes refuses a Kubernetes version (v1.36.3) outside the window of the Talos
// version talosVersion names (a contract such as v1.14; empty means UnpinnedContract).
func CheckKubernetes(talosVersion, kubernetesVersion string) error {
	contract, err := ParseContract(talosVersion)
	if err != nil {
		return err
	}
	support, ok := supportOf(contract)
	if !ok {
		return nil
	}
	k, err := semver.ParseTolerant(strings.TrimPrefix(kubernetesVersion, "v"))
	if err != nil {
		return fmt.Errorf("%q is not a Kubernetes version like v1.36.3", kubernetesVersion)
	}
	k.Pre, k.Build = nil, nil
	if k.LT(support.MinKubernetes) || k.GT(support.MaxKubernetes) {
		//nolint:staticcheck // ST1005: the message starts with a name, Kubernetes.
		return fmt.Errorf("Kubernetes %s is not supported on Talos %s, which runs Kubernetes %s", kubernetesVersion, contract, support.KubernetesWindow())
	}
	return nil
}

// CheckTalosUpgrade refuses moving a cluster's Talos version from one contract to a newer
// one that does not upgrade from it directly, naming the versions to go through. Moving to
// an older contract is allowed: nodes accept configs of older contracts.
func CheckTalosUpgrade(fromVersion, toVersion string) error {
	from, err := ParseContract(fromVersion)
	if err != nil {
		return nil //nolint:nilerr // an unknown old version is not this check's to refuse
	}
	to, err := ParseContract(toVersion)
	if err != nil || !to.Greater(from) {
		return nil //nolint:nilerr // ParseContract's own check reports a bad new version
	}
	support, ok := supportOf(to)
	if !ok {
		return nil
	}
	fromVersionSemver := semver.Version{Major: uint64(from.Major), Minor: uint64(from.Minor)}
	if !fromVersionSemver.LT(support.MinUpgradeFrom) {
		return nil
	}
	via := ""
	for _, s := range SupportMatrix {
		if s.Talos.Greater(from) && !fromVersionSemver.LT(s.MinUpgradeFrom) {
			via = s.Talos.String()
		}
	}
	msg := fmt.Sprintf("Talos %s upgrades only from v%d.%d or later, not from %s", to, support.MinUpgradeFrom.Major, support.MinUpgradeFrom.Minor, from)
	if via != "" {
		msg += fmt.Sprintf(": upgrade to %s first", via)
	}
	return fmt.Errorf("%s", msg)
}

// CheckNodeUpdate refuses updating a node that runs Talos running (v1.13.3) to Kubernetes
// kubernetesVersion and, when installs is not empty, to the Talos release installs
// (v1.14.1): the new release must upgrade from the running one, and the Talos the node runs
// afterwards must run that Kubernetes version. A Talos version Talon has no window for is
// not refused.
func CheckNodeUpdate(running, installs, kubernetesVersion string) error {
	target := running
	if installs != "" {
		if err := CheckTalosUpgrade(running, installs); err != nil {
			return err
		}
		target = installs
	}
	if _, err := ParseContract(target); err != nil {
		return nil //nolint:nilerr // a release outside SupportMatrix has no window to check against
	}
	return CheckKubernetes(target, kubernetesVersion)
}
