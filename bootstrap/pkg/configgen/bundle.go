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
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"go.yaml.in/yaml/v4"
)

// NewBundle creates the secrets of a new cluster (every CA and key, the bootstrap token,
// the encryption secret) for the given talosVersion. A cluster has exactly one bundle for
// its whole life: callers store it and never create another.
func NewBundle(talosVersion string, now time.Time) (*secrets.Bundle, error) {
	contract, err := ParseContract(talosVersion)
	if err != nil {
		return nil, err
	}
	bundle, err := secrets.NewBundle(secrets.NewFixedClock(now), contract)
	if err != nil {
		return nil, fmt.Errorf("failed to generate secrets bundle: %w", err)
	}
	return bundle, nil
}

// MarshalBundle encodes a bundle as YAML, in the format of "talosctl gen secrets".
func MarshalBundle(bundle *secrets.Bundle) ([]byte, error) {
	out, err := yaml.Marshal(bundle)
	if err != nil {
		return nil, fmt.Errorf("failed to encode secrets bundle: %w", err)
	}
	return out, nil
}

// UnmarshalBundle decodes and checks a bundle written by MarshalBundle or "talosctl gen secrets".
func UnmarshalBundle(data []byte) (*secrets.Bundle, error) {
	bundle := &secrets.Bundle{}
	if err := yaml.Unmarshal(data, bundle); err != nil {
		return nil, fmt.Errorf("failed to decode secrets bundle: %w", err)
	}
	bundle.Clock = secrets.NewClock()
	// Every Talon cluster runs Kubernetes: the bundle must hold its secrets whatever the
	// contract (nil: the current one, which has Kubernetes enabled).
	if err := bundle.Validate(config.TalosVersionCurrent); err != nil {
		return nil, fmt.Errorf("invalid secrets bundle: %w", err)
	}
	return bundle, nil
}
