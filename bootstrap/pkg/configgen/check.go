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
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// checkBundle is a throwaway bundle for Check: creating one takes about a second, and the
// patches a spec carries apply the same way whatever the cluster's keys are.
var checkBundle = sync.OnceValues(func() (*secrets.Bundle, error) {
	return NewBundle("", time.Now())
})

// checkCluster stands in for the cluster when a spec is checked before any cluster exists.
var checkCluster = Cluster{
	Name:              "check",
	Endpoint:          Endpoint{Host: "check.invalid", Port: 6443},
	KubernetesVersion: "v1.36.3",
}

// Check renders spec for a stand-in cluster and reports why a node would not get a valid
// config from it: an unknown version, a patch that does not parse or does not apply, data
// that is not a config. Webhooks use it to refuse such specs at admission. It applies no
// runtime-specific rule (an install disk for metal, host DNS for containers): those, and
// checks that depend on the real cluster, happen when the config is rendered.
func Check(spec bootstrapv1.TalosConfigSpec) error {
	bundle, err := checkBundle()
	if err != nil {
		return err
	}
	if err := CheckSettings(spec); err != nil {
		return err
	}
	m := Machine{Spec: spec, Mode: modeAny}
	if spec.DiskEncryption.StaticKeySecretRef.Name != "" {
		// The Secret is read when a config is rendered for a node; any passphrase checks
		// the rest.
		m.StaticKey = "check"
	}
	_, err = Render(bundle, checkCluster, m)
	return err
}
