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

	"github.com/siderolabs/talos/pkg/machinery/config"
	coreconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"go.yaml.in/yaml/v4"
)

// documentKindsSince lists, for each Talos minor version, the config document kinds it
// added: each list is the difference between the kinds registered by that version's
// machinery and the one before it (v1.10.0, v1.11.5, v1.12.6, v1.13.3, v1.14.1). Kinds in no
// list, v1alpha1 among them, are known to every version Talon renders for.
var documentKindsSince = map[string][]string{
	"v1.11": {"ExistingVolumeConfig", "RawVolumeConfig", "SwapVolumeConfig", "ZswapConfig"},
	"v1.12": {
		"BondConfig", "BridgeConfig", "DHCPv4Config", "DHCPv6Config", "DummyLinkConfig", "HCloudVIPConfig",
		"HostnameConfig", "Layer2VIPConfig", "LinkAliasConfig", "LinkConfig", "OOMConfig", "RegistryAuthConfig",
		"RegistryMirrorConfig", "RegistryTLSConfig", "ResolverConfig", "StaticHostConfig", "TimeSyncConfig",
		"VLANConfig", "WireguardConfig",
	},
	"v1.13": {
		"BlackholeRouteConfig", "EnvironmentConfig", "ExternalVolumeConfig", "ImageVerificationConfig",
		"KubeSpanConfig", "RoutingRuleConfig", "TCPProbeConfig", "VRFConfig",
	},
	"v1.14": {
		"BGPInstanceConfig", "CRIBaseRuntimeSpecConfig", "CRICustomizationConfig", "ContainerConfig",
		"DiscoveryIdentityConfig", "DiscoveryServiceConfig", "EtcFileConfig", "FilesystemScrubConfig",
		"FilesystemTrimConfig", "HTTPProbeConfig", "ImageCacheConfig", "KernelModuleConfig",
		"KubeAPIServerCAConfig", "KubeAPIServerConfig", "KubeAdmissionControlConfig", "KubeAggregatorCAConfig",
		"KubeAuditPolicyConfig", "KubeAuthenticationConfig", "KubeAuthorizerConfig", "KubeClusterConfig",
		"KubeControllerManagerConfig", "KubeCoreDNSConfig", "KubeCredentialProviderConfig",
		"KubeEtcdEncryptionConfig", "KubeExternalManifestConfig", "KubeFlannelCNIConfig",
		"KubeInlineManifestConfig", "KubeNetworkConfig", "KubeNodeConfig", "KubePrismConfig", "KubeProxyConfig",
		"KubeSchedulerConfig", "KubeServiceAccountConfig", "KubeStaticPodConfig", "KubeTalosAPIAccessConfig",
		"KubeletConfig", "LVMLogicalVolumeConfig", "LVMVolumeGroupConfig", "RAIDArrayConfig",
		"SecurityProfileConfig", "SysctlConfig", "SysfsConfig", "UdevRulesConfig", "UnattendedInstallConfig",
		"VethConfig",
	},
}

// kindSince maps a document kind to the contract of the Talos version that added it.
var kindSince = func() map[string]*config.VersionContract {
	out := map[string]*config.VersionContract{}
	for version, kinds := range documentKindsSince {
		contract, err := config.ParseContractFromVersion(version)
		if err != nil {
			panic(err)
		}
		for _, kind := range kinds {
			out[kind] = contract
		}
	}
	return out
}()

// UnknownDocumentError is a config document a Talos version does not know: that version's
// nodes refuse the whole config when they load it.
type UnknownDocumentError struct {
	// Kind and Name identify the document.
	Kind, Name string
	// Since is the first Talos version that knows the kind.
	Since *config.VersionContract
}

// Error reads as Talos' config loader reports a kind it has not registered.
func (e *UnknownDocumentError) Error() string {
	return fmt.Sprintf("error decoding document v1alpha1/%s/%s: %q %q: not registered", e.Kind, e.Name, e.Kind, "v1alpha1")
}

// UnknownDocument reports the first document of cfg that nodes running the contract's Talos
// version would not load, or nil.
func UnknownDocument(cfg config.Provider, contract *config.VersionContract) *UnknownDocumentError {
	for _, doc := range cfg.Documents() {
		since, ok := kindSince[doc.Kind()]
		if !ok || !since.Greater(contract) {
			continue
		}
		name := ""
		if named, ok := doc.(coreconfig.NamedDocument); ok {
			name = named.Name()
		}
		return &UnknownDocumentError{Kind: doc.Kind(), Name: name, Since: since}
	}
	return nil
}

// NewestKind is the contract of the Talos version that added the newest document kind cfg
// holds: cfg is a config for that version or a later one. nil when every kind is known to
// every version Talon renders for.
func NewestKind(cfg config.Provider) *config.VersionContract {
	var newest *config.VersionContract
	for _, doc := range cfg.Documents() {
		if since, ok := kindSince[doc.Kind()]; ok && (newest == nil || since.Greater(newest)) {
			newest = since
		}
	}
	return newest
}

// legacyFields are the v1alpha1 fields whose settings the v1.14 contract writes into
// documents of their own (KubeletConfig, UnattendedInstallConfig, SysctlConfig, the Kube*
// documents, DiscoveryServiceConfig and DiscoveryIdentityConfig).
var legacyFields = map[string][]string{
	"machine": {"kubelet", "install", "sysctls"},
	"cluster": {
		"id", "secret", "clusterName", "controlPlane", "network", "apiServer", "controllerManager", "proxy",
		"scheduler", "discovery", "ca", "aggregatorCA", "serviceAccount", "coreDNS", "externalCloudProvider",
		"adminKubeconfig", "allowSchedulingOnControlPlanes", "inlineManifests", "extraManifests",
	},
}

// LegacyFields lists the v1alpha1 fields set in cfg (".machine.kubelet", ...) whose
// settings have documents of their own under the v1.14 contract. A config Talon renders for
// v1.14 has none.
func LegacyFields(cfg config.Provider) ([]string, error) {
	raw := cfg.RawV1Alpha1()
	if raw == nil {
		return nil, nil
	}
	data, err := encodeDocument(raw)
	if err != nil {
		return nil, err
	}
	var sections map[string]any
	if err := yaml.Unmarshal(data, &sections); err != nil {
		return nil, fmt.Errorf("failed to read the v1alpha1 document: %w", err)
	}
	var found []string
	for _, section := range []string{"machine", "cluster"} {
		fields, _ := sections[section].(map[string]any)
		for _, field := range legacyFields[section] {
			if _, ok := fields[field]; ok {
				found = append(found, "."+section+"."+field)
			}
		}
	}
	return found, nil
}
