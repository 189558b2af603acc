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
	"net/netip"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// testBundle is one bundle per test binary: creating one costs about a second of CPU.
var testBundle = sync.OnceValue(func() *secrets.Bundle {
	b, err := NewBundle("", time.Now())
	if err != nil {
		panic(err)
	}
	return b
})

var testCluster = Cluster{
	Name:              "demo",
	Endpoint:          Endpoint{Host: "10.5.0.2", Port: 6443},
	KubernetesVersion: "v1.36.3",
	PodCIDRs:          []string{"10.244.0.0/16"},
	ServiceCIDRs:      []string{"10.96.0.0/12"},
	DNSDomain:         "demo.local",
}

// prefixStrings is prefixes in their text form, as the config has them.
func prefixStrings(prefixes []netip.Prefix) []string {
	out := make([]string, 0, len(prefixes))
	for _, prefix := range prefixes {
		out = append(out, prefix.String())
	}
	return out
}

func jsonValue(s string) *apiextensionsv1.JSON {
	return &apiextensionsv1.JSON{Raw: []byte(s)}
}

// contractPatches are patches that set the same settings in the form each contract uses:
// the v1alpha1 fields up to v1.13, the v1.14 documents from v1.14 on.
func contractPatches(version string) ([]bootstrapv1.ConfigPatch, []string) {
	timeAndResolver := "machine:\n  time:\n    servers: [time.cloudflare.com]\n---\napiVersion: v1alpha1\nkind: ResolverConfig\nnameservers:\n  - address: 1.1.1.1\n"
	if version == "v1.11" {
		// ResolverConfig came with Talos 1.12: a 1.11 node would refuse the whole config.
		timeAndResolver = "machine:\n  time:\n    servers: [time.cloudflare.com]\n  network:\n    nameservers: [1.1.1.1]\n"
	}
	if version != "v1.14" {
		return []bootstrapv1.ConfigPatch{
				{Op: "add", Path: "/machine/sysctls", Value: jsonValue(`{"vm.max_map_count":"262144"}`)},
			}, []string{
				"machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"150\"\n",
				// Several documents in one patch: a v1alpha1 change and a new document.
				timeAndResolver,
			}
	}
	return []bootstrapv1.ConfigPatch{
			// JSON patches address the 1.14 documents by kind, and by name where it has one.
			{Op: "add", Path: "/extraArgs", Value: jsonValue(`{"max-pods":"150"}`), Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeletConfig"}},
			{Op: "add", Path: "/clusterDNS", Value: jsonValue(`["169.254.2.53"]`), Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeletConfig"}},
			{Op: "replace", Path: "/endpoint", Value: jsonValue(`"https://discovery.example.com/"`), Document: bootstrapv1.ConfigDocumentRef{Kind: "DiscoveryServiceConfig", Name: "default"}},
		}, []string{
			"apiVersion: v1alpha1\nkind: SysctlConfig\nparams:\n  vm.max_map_count: \"262144\"\n",
			timeAndResolver,
		}
}

func TestRenderAcrossContracts(t *testing.T) {
	for _, version := range []string{"v1.11", "v1.12", "v1.13", "v1.14"} {
		for _, generateType := range []bootstrapv1.GenerateType{bootstrapv1.GenerateTypeControlPlane, bootstrapv1.GenerateTypeWorker} {
			for _, mode := range []Mode{ModeMetal, ModeContainer} {
				t.Run(version+"/"+string(generateType)+"/"+string(mode), func(t *testing.T) {
					g := NewWithT(t)
					jsonPatches, strategicPatches := contractPatches(version)
					spec := bootstrapv1.TalosConfigSpec{
						GenerateType:     generateType,
						TalosVersion:     version,
						ConfigPatches:    jsonPatches,
						StrategicPatches: strategicPatches,
					}
					out, err := Render(testBundle(), testCluster, Machine{Spec: spec, Hostname: "demo-cp-0", Mode: mode, InstallDisk: "/dev/vda"})
					g.Expect(err).NotTo(HaveOccurred())

					contract, err := ParseContract(version)
					g.Expect(err).NotTo(HaveOccurred())
					_, err = Validate(out, mode, contract)
					g.Expect(err).NotTo(HaveOccurred(), "the stored config validates for its own contract")

					cfg, err := configloader.NewFromBytes(out)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(cfg.Machine().Type().String()).To(Equal(string(generateType)))
					g.Expect(cfg.K8sClusterConfig().ClusterEndpoint().String()).To(Equal("https://10.5.0.2:6443"))
					g.Expect(prefixStrings(cfg.K8sNetworkConfig().PodCIDRs())).To(Equal(testCluster.PodCIDRs))
					g.Expect(prefixStrings(cfg.K8sNetworkConfig().ServiceCIDRs())).To(Equal(testCluster.ServiceCIDRs))
					g.Expect(cfg.K8sNetworkConfig().DNSDomain()).To(Equal("demo.local"))
					g.Expect(cfg.K8sKubeletConfig().Image()).To(HaveSuffix(":v1.36.3"))
					g.Expect(cfg.SysctlConfig()).To(HaveKeyWithValue("vm.max_map_count", "262144"))
					g.Expect(cfg.K8sKubeletConfig().ExtraArgs()).To(HaveKeyWithValue("max-pods", []string{"150"}))
					g.Expect(cfg.NetworkTimeSyncConfig().Servers()).To(ConsistOf("time.cloudflare.com"))
					g.Expect(cfg.NetworkHostnameConfig()).NotTo(BeNil())
					g.Expect(cfg.NetworkHostnameConfig().Hostname()).To(Equal("demo-cp-0"))
					g.Expect(cfg.Machine().Security().IssuingCA().Crt).To(Equal(testBundle().Certs.OS.Crt))

					if version != "v1.14" {
						g.Expect(UnknownDocument(cfg, contract)).To(BeNil())
						g.Expect(LegacyFields(cfg)).To(ContainElements(".machine.kubelet", ".cluster.network"), "contracts before v1.14 use the v1alpha1 fields")
						return
					}
					g.Expect(cfg.K8sKubeletConfig().ClusterDNS()).To(ConsistOf("169.254.2.53"))
					g.Expect(cfg.DiscoveryServiceConfigs()).To(HaveLen(1))
					g.Expect(cfg.DiscoveryServiceConfigs()[0].Endpoint().String()).To(Equal("https://discovery.example.com/"))
					kinds := map[string]bool{}
					for _, doc := range cfg.Documents() {
						kinds[doc.Kind()] = true
					}
					for _, kind := range []string{"KubeClusterConfig", "KubeNodeConfig", "KubeletConfig", "KubeNetworkConfig", "DiscoveryServiceConfig", "SysctlConfig"} {
						g.Expect(kinds).To(HaveKey(kind))
					}
					if mode == ModeMetal {
						g.Expect(kinds).To(HaveKey("UnattendedInstallConfig"))
					}
					g.Expect(LegacyFields(cfg)).To(BeEmpty(), "the v1.14 documents replace these v1alpha1 fields")
				})
			}
		}
	}
}

// TestInstallerGoesWhereTheContractInstallsFrom: the installer image lands in the
// UnattendedInstallConfig document under the v1.14 contract and in machine.install before.
func TestInstallerGoesWhereTheContractInstallsFrom(t *testing.T) {
	const installer = "factory.example.com/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.14.1"
	for _, version := range []string{"v1.13", "v1.14"} {
		t.Run(version, func(t *testing.T) {
			g := NewWithT(t)
			spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: version}
			out, err := Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeMetal, InstallDisk: "/dev/vda", Installer: installer})
			g.Expect(err).NotTo(HaveOccurred())
			cfg, err := configloader.NewFromBytes(out)
			g.Expect(err).NotTo(HaveOccurred())
			if version == "v1.14" {
				g.Expect(cfg.UnattendedInstallConfig()).NotTo(BeNil())
				g.Expect(cfg.UnattendedInstallConfig().InstallerImage()).To(Equal(installer))
				g.Expect(LegacyFields(cfg)).To(BeEmpty())
			} else {
				g.Expect(cfg.Machine().Install().Image()).To(Equal(installer))
			}
		})
	}
}

// TestMetalConfigWithoutDisk: a metal config whose spec names no install disk (the metal
// boot service adds the host's) renders for every contract: before v1.14, machine.install
// names DefaultInstallDisk, as talosctl gen config does; under v1.14 the config has no install
// section at all.
func TestMetalConfigWithoutDisk(t *testing.T) {
	for _, version := range []string{"v1.11", "v1.12", "v1.13", "v1.14"} {
		t.Run(version, func(t *testing.T) {
			g := NewWithT(t)
			spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: version}
			out, err := Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeMetal})
			g.Expect(err).NotTo(HaveOccurred())
			cfg, err := configloader.NewFromBytes(out)
			g.Expect(err).NotTo(HaveOccurred())
			if version == "v1.14" {
				g.Expect(cfg.UnattendedInstallConfig()).To(BeNil())
				g.Expect(LegacyFields(cfg)).To(BeEmpty())
			} else {
				g.Expect(cfg.Machine().Install().Disk()).To(Equal(DefaultInstallDisk))
			}
		})
	}
}

// TestJSONPatchOnHostnameConfig: from v1.12 the hostname lives in a HostnameConfig document,
// which JSON patches address by kind.
func TestJSONPatchOnHostnameConfig(t *testing.T) {
	for _, version := range []string{"v1.12", "v1.13", "v1.14"} {
		t.Run(version, func(t *testing.T) {
			g := NewWithT(t)
			hostname := bootstrapv1.ConfigDocumentRef{Kind: "HostnameConfig"}
			spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: version, ConfigPatches: []bootstrapv1.ConfigPatch{
				{Op: "replace", Path: "/auto", Value: jsonValue(`"off"`), Document: hostname},
				{Op: "add", Path: "/hostname", Value: jsonValue(`"storage-1"`), Document: hostname},
			}}
			out, err := Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeContainer})
			g.Expect(err).NotTo(HaveOccurred())
			cfg, err := configloader.NewFromBytes(out)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.NetworkHostnameConfig().Hostname()).To(Equal("storage-1"))
		})
	}
}
