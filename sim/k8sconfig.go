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

package sim

import (
	"fmt"
	"net/netip"
	"net/url"

	"github.com/siderolabs/crypto/x509"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/config"
	configv1alpha1 "github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/constants"
)

// The Kubernetes settings of a machine config. Talos 1.14's machinery reads them from
// documents of their own (K8sClusterConfig, K8sAPIServerConfig and so on), which the v1alpha1
// document provides for its cluster and machine sections: these read them with the defaults
// the v1alpha1 sections have.

// clusterEndpoint is the cluster's endpoint (cluster.controlPlane.endpoint); nil when the
// config has none.
func clusterEndpoint(cfg talosconfig.Provider) *url.URL {
	if c := cfg.K8sClusterConfig(); c != nil {
		return c.ClusterEndpoint()
	}
	return nil
}

// clusterName is the cluster's name (cluster.clusterName).
func clusterName(cfg talosconfig.Provider) string {
	if c := cfg.K8sClusterConfig(); c != nil {
		return c.ClusterName()
	}
	return ""
}

// kubernetesCA is the cluster's Kubernetes CA (cluster.ca): with its key on a control-plane
// node, its certificate only on a worker; nil when the config has none.
func kubernetesCA(cfg talosconfig.Provider) *x509.PEMEncodedCertificateAndKey {
	ca := cfg.K8sAPIServerCAConfig()
	if ca == nil {
		return nil
	}
	if issuing := ca.IssuingCA(); issuing != nil {
		return issuing
	}
	// The accepted CAs begin with the issuing CA's certificate.
	if accepted := ca.AcceptedCAs(); len(accepted) > 0 && accepted[0] != nil {
		return &x509.PEMEncodedCertificateAndKey{Crt: accepted[0].Crt}
	}
	return nil
}

// aggregatorCA is the cluster's front-proxy CA (cluster.aggregatorCA); nil when the config
// has none.
func aggregatorCA(cfg talosconfig.Provider) *x509.PEMEncodedCertificateAndKey {
	if ca := cfg.K8sAggregatorCAConfig(); ca != nil {
		return ca.IssuingCA()
	}
	return nil
}

// serviceAccountKey is the key that signs service-account tokens (cluster.serviceAccount);
// nil when the config has none.
func serviceAccountKey(cfg talosconfig.Provider) *x509.PEMEncodedKey {
	if sa := cfg.K8sServiceAccountConfig(); sa != nil {
		return sa.IssuingKey()
	}
	return nil
}

// k8sNetwork is the cluster's network (cluster.network), Talos' defaults when the config
// has no such section.
func k8sNetwork(cfg talosconfig.Provider) config.K8sNetworkConfig {
	if network := cfg.K8sNetworkConfig(); network != nil {
		return network
	}
	return &configv1alpha1.ClusterConfig{}
}

// kubeletConfig is the kubelet's settings (machine.kubelet), Talos' defaults when the
// config has no such section.
func kubeletConfig(cfg talosconfig.Provider) config.K8sKubeletConfig {
	if kubelet := cfg.K8sKubeletConfig(); kubelet != nil {
		return kubelet
	}
	return &configv1alpha1.KubeletConfig{}
}

// registerWithFQDN reports whether the kubelet registers its Node with the machine's FQDN
// (machine.kubelet.registerWithFQDN).
func registerWithFQDN(cfg talosconfig.Provider) bool {
	node := cfg.K8sNodeConfig()
	return node != nil && node.RegisterWithFQDN()
}

// cniName is the name of the CNI Talos deploys (cluster.network.cni.name): flannel, custom
// or none.
func cniName(cfg talosconfig.Provider) string {
	if raw := cfg.RawV1Alpha1(); raw != nil {
		cluster := raw.ClusterConfig
		if cluster == nil {
			cluster = &configv1alpha1.ClusterConfig{}
		}
		return cluster.CNI().Name()
	}
	// Without a v1alpha1 document, as Talos tells them apart: Flannel or none.
	if cfg.K8sFlannelCNIConfig() != nil {
		return constants.FlannelCNI
	}
	return constants.NoneCNI
}

// prefixStrings is prefixes in their text form, e.g. 10.96.0.0/12.
func prefixStrings(prefixes []netip.Prefix) []string {
	out := make([]string, 0, len(prefixes))
	for _, prefix := range prefixes {
		out = append(out, prefix.String())
	}
	return out
}

// apiServerServiceIPs is the kubernetes Service's address in each of the service CIDRs: the
// first after the network's; an error when a CIDR has no room for one.
func apiServerServiceIPs(cidrs []netip.Prefix) ([]netip.Addr, error) {
	out := make([]netip.Addr, 0, len(cidrs))
	for _, cidr := range cidrs {
		cidr = cidr.Masked()
		addr := cidr.Addr().Next()
		if !cidr.Contains(addr) {
			return nil, fmt.Errorf("service CIDR %s has no address for the kubernetes Service", cidr)
		}
		out = append(out, addr)
	}
	return out, nil
}
