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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// Cluster is what every machine config of one cluster shares.
type Cluster struct {
	// Name is the Cluster's name.
	Name string
	// Endpoint is the control-plane endpoint as host and port.
	Endpoint Endpoint
	// KubernetesVersion is the version of the node's Kubernetes components, e.g. v1.36.3.
	KubernetesVersion string
	// PodCIDRs and ServiceCIDRs are the cluster's networks; empty means Talos' defaults.
	PodCIDRs []string
	// ServiceCIDRs are the networks of Kubernetes Services.
	ServiceCIDRs []string
	// DNSDomain is the cluster's DNS domain; empty means cluster.local.
	DNSDomain string
}

// ClusterFrom describes a Cluster API Cluster, whose machines run kubernetesVersion.
func ClusterFrom(cluster *clusterv1.Cluster, kubernetesVersion string) Cluster {
	network := cluster.Spec.ClusterNetwork
	return Cluster{
		Name:              cluster.Name,
		Endpoint:          Endpoint{Host: cluster.Spec.ControlPlaneEndpoint.Host, Port: cluster.Spec.ControlPlaneEndpoint.Port},
		KubernetesVersion: kubernetesVersion,
		PodCIDRs:          network.Pods.CIDRBlocks,
		ServiceCIDRs:      network.Services.CIDRBlocks,
		DNSDomain:         network.ServiceDomain,
	}
}

// Hostname picks a node's hostname as spec.hostname.source asks: the Machine's name, the
// infrastructure machine's name, or none.
func Hostname(source bootstrapv1.HostnameSource, machineName, infrastructureName string) string {
	switch source {
	case bootstrapv1.HostnameSourceMachineName:
		return machineName
	case bootstrapv1.HostnameSourceInfrastructureName:
		return infrastructureName
	default:
		return ""
	}
}

// Endpoint is a control-plane endpoint.
type Endpoint struct {
	Host string
	Port int32
}

// URL returns the endpoint as Talos expects it, https://host:port.
func (e Endpoint) URL() string {
	return "https://" + net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// Machine is what is particular to one machine's config.
type Machine struct {
	// Spec is the TalosConfig spec to render.
	Spec bootstrapv1.TalosConfigSpec
	// Hostname is the node's hostname; empty leaves it to Talos.
	Hostname string
	// Mode is the runtime the node runs in, for validation.
	Mode Mode
	// InstallDisk is the disk a metal node installs Talos to, e.g. /dev/sda. Empty leaves it
	// to the spec's patches and the metal boot service, which writes the host's disk when it
	// serves the config; before the v1.14 contract, whose machine.install always names a
	// disk, a metal config then says DefaultInstallDisk until one of them changes it.
	InstallDisk string
	// Installer is the installer image a metal node installs and upgrades from, e.g. an Image
	// Factory installer (ImageFactory); empty keeps what generation and patches give.
	Installer string
	// StaticKey is the passphrase read from the Secret spec.diskEncryption.staticKeySecretRef
	// names. It goes into the rendered config only, never into an error.
	StaticKey string
}

// DefaultInstallDisk is the install disk of a metal config rendered before the v1.14
// contract when nothing names one, as talosctl gen config writes it.
const DefaultInstallDisk = "/dev/sda"

// Render renders and validates the machine config of one machine of cluster from the
// cluster's secrets bundle: generate for the requested contract, then the JSON patches,
// the strategic patches and the hostname. It returns the config as the node receives it.
func Render(bundle *secrets.Bundle, cluster Cluster, m Machine) ([]byte, error) {
	if m.Spec.GenerateType == bootstrapv1.GenerateTypeNone {
		return renderData(m)
	}
	contract, err := ParseContract(m.Spec.TalosVersion)
	if err != nil {
		return nil, err
	}
	cfg, err := generateConfig(bundle, cluster, m, contract)
	if err != nil {
		return nil, err
	}
	patches, err := loadPatches(m.Spec)
	if err != nil {
		return nil, err
	}
	settings, err := settingsPatch(m.Spec, m.StaticKey, contract)
	if err != nil {
		return nil, err
	}
	if settings != nil {
		patches = append([]configpatcher.Patch{settings}, patches...)
	}
	if m.Hostname != "" {
		hostnamePatch, err := hostnamePatch(m.Hostname, contract)
		if err != nil {
			return nil, err
		}
		patches = append(patches, hostnamePatch)
	}
	patched, err := applyPatches(cfg, patches)
	if err != nil {
		return nil, err
	}
	if m.Installer != "" {
		if patched, err = setInstaller(patched, m.Installer); err != nil {
			return nil, err
		}
	}
	data, err := patched.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return nil, fmt.Errorf("failed to encode the patched config: %w", err)
	}
	return Validate(data, m.Mode, contract)
}

// renderData checks a complete config given as spec.data.
func renderData(m Machine) ([]byte, error) {
	if m.Spec.Data == "" {
		return nil, errors.New("generateType none needs the complete machine config in spec.data")
	}
	contract, err := ParseContract(m.Spec.TalosVersion)
	if err != nil {
		return nil, err
	}
	return Validate([]byte(m.Spec.Data), m.Mode, contract)
}

func generateConfig(bundle *secrets.Bundle, cluster Cluster, m Machine, contract *config.VersionContract) (config.Provider, error) {
	generateType := m.Spec.GenerateType
	var machineType machine.Type
	switch generateType {
	case bootstrapv1.GenerateTypeControlPlane:
		machineType = machine.TypeControlPlane
	case bootstrapv1.GenerateTypeWorker:
		machineType = machine.TypeWorker
	default:
		return nil, fmt.Errorf("unknown generateType %q: use controlplane, worker or none", generateType)
	}
	if cluster.Endpoint.Host == "" || cluster.Endpoint.Port == 0 {
		return nil, errors.New("the cluster has no control-plane endpoint")
	}
	if err := checkCIDRs(cluster); err != nil {
		return nil, err
	}

	opts := []generate.Option{
		generate.WithSecretsBundle(bundle),
		generate.WithVersionContract(contract),
		// Like talosctl cluster create: the endpoint is also in the machine certificates'
		// SANs, so that workers reach trustd on the control plane through the endpoint.
		generate.WithAdditionalSubjectAltNames([]string{cluster.Endpoint.Host}),
	}
	if cluster.DNSDomain != "" {
		opts = append(opts, generate.WithDNSDomain(cluster.DNSDomain))
	}
	disk := m.InstallDisk
	if disk == "" && m.Mode == ModeMetal && !contract.UnattendedInstallConfig() {
		disk = DefaultInstallDisk
	}
	if disk != "" {
		opts = append(opts, generate.WithInstallDisk(disk))
	}
	input, err := generate.NewInput(cluster.Name, cluster.Endpoint.URL(), strings.TrimPrefix(cluster.KubernetesVersion, "v"), opts...)
	if err != nil {
		return nil, fmt.Errorf("invalid generation input: %w", err)
	}
	if len(cluster.PodCIDRs) > 0 {
		input.PodNet = cluster.PodCIDRs
	}
	if len(cluster.ServiceCIDRs) > 0 {
		input.ServiceNet = cluster.ServiceCIDRs
	}
	cfg, err := input.Config(machineType)
	if err != nil {
		return nil, fmt.Errorf("failed to generate %s config: %w", generateType, err)
	}
	return cfg, nil
}

func checkCIDRs(cluster Cluster) error {
	var errs []error
	for _, cidr := range append(append([]string{}, cluster.PodCIDRs...), cluster.ServiceCIDRs...) {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			errs = append(errs, fmt.Errorf("the Cluster's network %q is not a CIDR like 10.244.0.0/16", cidr))
		}
	}
	return errors.Join(errs...)
}

// Validate loads a machine config the way a node of the contract's Talos version does and
// validates it for mode; it returns the config re-encoded in Talos' canonical form. A
// document that version does not know is refused, as its nodes would refuse the config.
func Validate(data []byte, mode Mode, contract *config.VersionContract) ([]byte, error) {
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("the machine config does not load: %w", err)
	}
	if unknown := UnknownDocument(cfg, contract); unknown != nil {
		return nil, fmt.Errorf("the machine config is for Talos %s, which does not know the %s document (Talos %s added it): %w",
			contract, unknown.Kind, unknown.Since, unknown)
	}
	if _, err := cfg.ValidateAsClient(mode, validation.WithLocal()); err != nil {
		if mode == modeAny {
			return nil, fmt.Errorf("the machine config is not valid: %s", oneLine(err))
		}
		return nil, fmt.Errorf("the machine config is not valid for a %s node: %s", mode, oneLine(err))
	}
	out, err := cfg.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return nil, fmt.Errorf("failed to encode the machine config: %w", err)
	}
	return out, nil
}

// RenderedFor identifies what a config is rendered from: the TalosConfig spec and the
// Kubernetes version. Two renders with the same RenderedFor give the same config.
func RenderedFor(spec bootstrapv1.TalosConfigSpec, kubernetesVersion string) string {
	data, _ := json.Marshal(struct { //nolint:errchkjson // plain structs always marshal
		Spec    bootstrapv1.TalosConfigSpec `json:"spec"`
		Version string                      `json:"version"`
	}{spec, kubernetesVersion})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}
