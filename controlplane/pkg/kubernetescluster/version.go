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

package kubernetescluster

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// kubeVersion is a Kubernetes version as a KubernetesCluster names it: a patch (v1.36.3) or
// a minor alone (1.36).
type kubeVersion struct {
	major, minor, patch uint64
	hasPatch            bool
}

// parseVersion reads "1.36", "v1.36", "1.36.3" or "v1.36.3".
func parseVersion(s string) (kubeVersion, error) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return kubeVersion{}, fmt.Errorf("%q is not a Kubernetes version: write a minor (1.36) or a patch version (1.36.3)", s)
	}
	var nums [3]uint64
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return kubeVersion{}, fmt.Errorf("%q is not a Kubernetes version: write a minor (1.36) or a patch version (1.36.3)", s)
		}
		nums[i] = n
	}
	return kubeVersion{major: nums[0], minor: nums[1], patch: nums[2], hasPatch: len(parts) == 3}, nil
}

func (v kubeVersion) String() string {
	if v.hasPatch {
		return fmt.Sprintf("v%d.%d.%d", v.major, v.minor, v.patch)
	}
	return fmt.Sprintf("v%d.%d", v.major, v.minor)
}

func (v kubeVersion) sameMinor(o kubeVersion) bool { return v.major == o.major && v.minor == o.minor }

// compare orders versions by major, minor, then patch; a minor alone compares equal to
// every patch of it.
func (v kubeVersion) compare(o kubeVersion) int {
	if c := cmp.Compare(v.major, o.major); c != 0 {
		return c
	}
	if c := cmp.Compare(v.minor, o.minor); c != 0 {
		return c
	}
	if !v.hasPatch || !o.hasPatch {
		return 0
	}
	return cmp.Compare(v.patch, o.patch)
}

// agrees says whether two versions can name the same version: equal patches, or the same
// minor when either names a minor alone.
func agrees(a, b kubeVersion) bool {
	if a.hasPatch && b.hasPatch {
		return a == b
	}
	return a.sameMinor(b)
}

// ResolveVersion returns the Kubernetes patch version a KubernetesCluster's version names:
// a patch version as it is (with a leading v); a minor alone, the newest patch of it in
// classVersions (the ClusterClass's spec.kubernetesVersions), or, when the class lists
// none, the one in configgen.TestedKubernetes.
func ResolveVersion(requested string, classVersions []string) (string, error) {
	v, err := parseVersion(requested)
	if err != nil {
		return "", err
	}
	if v.hasPatch {
		return v.String(), nil
	}
	candidates, from := configgen.TestedKubernetes, "the versions Talon is tested with"
	if len(classVersions) > 0 {
		candidates, from = classVersions, "the ClusterClass's spec.kubernetesVersions"
	}
	var newest *kubeVersion
	for _, c := range candidates {
		cv, err := parseVersion(c)
		if err != nil || !cv.hasPatch || !cv.sameMinor(v) {
			continue
		}
		if newest == nil || cv.compare(*newest) > 0 {
			newest = &cv
		}
	}
	if newest == nil {
		return "", fmt.Errorf("no patch version of Kubernetes %s in %s (%s): name a patch version, such as %s.0",
			v, from, strings.Join(candidates, ", "), strings.TrimPrefix(v.String(), "v"))
	}
	return newest.String(), nil
}

// checkVersions refuses versions a cluster cannot run: not a Kubernetes version, outside the
// Kubernetes window of Talon's newest Talos version, a control plane or pool version that is
// not the cluster's, and, on update, a version older than the one before.
func checkVersions(topology *field.Path, version string, controlPlane string, pools []string, old string) field.ErrorList {
	var errs field.ErrorList
	v, err := parseVersion(version)
	if err != nil {
		return append(errs, field.Invalid(topology.Child("version"), version, err.Error()))
	}
	window := v
	if !window.hasPatch {
		window.hasPatch = true // the window is of minors: its .0 stands for the minor
	}
	if err := configgen.CheckKubernetes(configgen.DefaultTalosVersion(), window.String()); err != nil {
		errs = append(errs, field.Invalid(topology.Child("version"), version, strings.Replace(err.Error(), window.String(), v.String(), 1)))
	}
	check := func(path *field.Path, other string) {
		if other == "" {
			return
		}
		ov, err := parseVersion(other)
		if err != nil {
			errs = append(errs, field.Invalid(path, other, err.Error()))
			return
		}
		if !agrees(v, ov) {
			errs = append(errs, field.Invalid(path, other, fmt.Sprintf(
				"must name the cluster's version %s (topology.version), or be left out: the control plane and every pool run one version, the workers upgraded after the control plane", version)))
		}
	}
	check(topology.Child("controlplane", "version"), controlPlane)
	for i, p := range pools {
		check(topology.Child("workers", "nodePools").Index(i).Child("version"), p)
	}
	if old != "" {
		if ov, err := parseVersion(old); err == nil && v.compare(ov) < 0 {
			errs = append(errs, field.Forbidden(topology.Child("version"), fmt.Sprintf(
				"cannot downgrade Kubernetes from %s to %s: a cluster's version only moves forward", old, version)))
		}
	}
	return errs
}
