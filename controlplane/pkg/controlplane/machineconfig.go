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

package controlplane

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/stdpatches"
)

// rebootKinds are the config documents whose changes take effect only at boot: the
// environment of Talos' services, kernel modules, and volumes, which are provisioned (and
// encrypted) while the node boots.
var rebootKinds = []string{
	"EnvironmentConfig", "KernelModuleConfig",
	"VolumeConfig", "UserVolumeConfig", "RawVolumeConfig", "ExistingVolumeConfig", "SwapVolumeConfig", "ZswapConfig",
}

// RebootDigest identifies the parts of a machine config that Talos reads only while the node
// boots, so that a change to them needs a reboot: etcd's settings (.cluster.etcd), the
// environment of Talos' services (.machine.env, EnvironmentConfig), kernel modules
// (.machine.kernel, KernelModuleConfig), files
// written at boot (.machine.files), system disk encryption and volume documents. Talos 1.14
// applies every change at once and leaves the reboot to the client (its documentation lists
// these); two configs with the same digest need no reboot to go from one to the other.
func RebootDigest(data []byte) (string, error) {
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return "", fmt.Errorf("failed to load the machine config: %w", err)
	}
	var parts []any
	if v1 := cfg.RawV1Alpha1(); v1 != nil {
		if c := v1.ClusterConfig; c != nil {
			parts = append(parts, c.EtcdConfig)
		}
		if m := v1.MachineConfig; m != nil {
			//nolint:staticcheck // configs still carry the v1alpha1 fields their documents replace
			parts = append(parts, m.MachineEnv, m.MachineKernel, m.MachineFiles, m.MachineSystemDiskEncryption)
		}
	}
	for _, doc := range cfg.Documents() {
		if slices.Contains(rebootKinds, doc.Kind()) {
			parts = append(parts, doc.Kind(), doc)
		}
	}
	encoded, err := json.Marshal(parts)
	if err != nil {
		return "", fmt.Errorf("failed to encode the machine config: %w", err)
	}
	sum := sha256.Sum256(encoded)
	return hex.EncodeToString(sum[:12]), nil
}

// KubeletImage is the kubelet image a machine config names.
func KubeletImage(data []byte) (string, error) {
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return "", fmt.Errorf("failed to load the machine config: %w", err)
	}
	return cfg.K8sKubeletConfig().Image(), nil
}

// WithKubeletImage is the machine config data with its kubelet image replaced by image, in
// the document that holds it (a KubeletConfig under the v1.14 contract, machine.kubelet
// before), as talosctl upgrade-k8s patches it.
func WithKubeletImage(data []byte, image string) ([]byte, error) {
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("failed to load the machine config: %w", err)
	}
	raw, err := stdpatches.WithKubeletImage(stdpatches.GuessVersionContractKubelet(cfg), image)
	if err != nil {
		return nil, fmt.Errorf("failed to make the kubelet image patch: %w", err)
	}
	patch, err := configpatcher.LoadPatch(raw)
	if err != nil {
		return nil, fmt.Errorf("failed to load the kubelet image patch: %w", err)
	}
	out, err := configpatcher.Apply(configpatcher.WithConfig(cfg), []configpatcher.Patch{patch})
	if err != nil {
		return nil, fmt.Errorf("failed to set the kubelet image: %w", err)
	}
	return out.Bytes()
}

// SameConfig reports whether two machine configs hold the same documents, however they are
// encoded (Talos keeps the config it was given in its own encoding).
func SameConfig(a, b []byte) (bool, error) {
	ca, err := canonical(a)
	if err != nil {
		return false, err
	}
	cb, err := canonical(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

func canonical(data []byte) ([]byte, error) {
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("failed to load the machine config: %w", err)
	}
	return cfg.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
}
