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
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	coreconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"k8s.io/utils/ptr"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// TestSettingsAcrossContracts renders every typed setting for each contract and reads it
// back through machinery's own accessors, as a node of that Talos version reads its config:
// the settings land in the v1alpha1 fields or the documents that version uses.
func TestSettingsAcrossContracts(t *testing.T) {
	const passphrase = "correct-horse-battery-staple"
	for _, version := range []string{"v1.10", "v1.11", "v1.12", "v1.13", "v1.14"} {
		for _, generateType := range []bootstrapv1.GenerateType{bootstrapv1.GenerateTypeControlPlane, bootstrapv1.GenerateTypeWorker} {
			t.Run(version+"/"+string(generateType), func(t *testing.T) {
				g := NewWithT(t)
				spec := bootstrapv1.TalosConfigSpec{
					GenerateType: generateType,
					TalosVersion: version,
					NodeLabels:   map[string]string{"topology.kubernetes.io/zone": "zone-a", "pool": "gpu"},
					NodeTaints: []bootstrapv1.NodeTaint{
						{Key: "dedicated", Value: "gpu", Effect: bootstrapv1.TaintEffectNoSchedule},
						{Key: "example.com/drain", Effect: bootstrapv1.TaintEffectNoExecute},
					},
					RegistryMirrors: []bootstrapv1.RegistryMirror{
						{Registry: "docker.io", Endpoints: []string{"https://mirror.example.com", "http://10.0.0.5:5000"}},
						{Registry: "*", Endpoints: []string{"https://all.example.com"}, SkipFallback: ptr.To(true)},
					},
					CNI:            bootstrapv1.CNINone,
					DiskEncryption: bootstrapv1.DiskEncryptionSpec{Key: bootstrapv1.DiskEncryptionKeyTPM, StaticKeySecretRef: bootstrapv1.SecretKeyReference{Name: "disk-key"}},
				}
				out, err := Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeMetal, InstallDisk: "/dev/vda", StaticKey: passphrase})
				g.Expect(err).NotTo(HaveOccurred())
				cfg, err := configloader.NewFromBytes(out)
				g.Expect(err).NotTo(HaveOccurred())

				node := cfg.K8sNodeConfig()
				g.Expect(node).NotTo(BeNil())
				g.Expect(node.Labels()).To(HaveKeyWithValue("topology.kubernetes.io/zone", "zone-a"))
				g.Expect(node.Labels()).To(HaveKeyWithValue("pool", "gpu"))
				g.Expect(node.Taints()).To(HaveKeyWithValue("dedicated", "gpu:NoSchedule"))
				g.Expect(node.Taints()).To(HaveKeyWithValue("example.com/drain", "NoExecute"))
				if generateType == bootstrapv1.GenerateTypeControlPlane {
					g.Expect(node.Labels()).To(HaveKey("node-role.kubernetes.io/control-plane"), "the generated labels stay")
					g.Expect(node.Taints()).To(HaveKey("node-role.kubernetes.io/control-plane"), "the generated taints stay")
				}

				mirrors := cfg.RegistryMirrorConfigs()
				g.Expect(mirrors).To(HaveLen(2))
				g.Expect(mirrors["docker.io"].Endpoints()).To(HaveLen(2))
				g.Expect(mirrors["docker.io"].Endpoints()[0].Endpoint()).To(Equal("https://mirror.example.com"))
				g.Expect(mirrors["docker.io"].Endpoints()[1].Endpoint()).To(Equal("http://10.0.0.5:5000"))
				g.Expect(mirrors["docker.io"].SkipFallback()).To(BeFalse())
				g.Expect(mirrors["*"].SkipFallback()).To(BeTrue())

				g.Expect(flannel(cfg)).To(BeFalse(), "cni none: Talos deploys no Flannel")

				for _, volume := range []string{"STATE", "EPHEMERAL"} {
					keys := encryptionKeys(g, cfg, volume)
					g.Expect(keys).To(HaveLen(2), volume)
					g.Expect(keys[0].Slot()).To(Equal(0))
					g.Expect(keys[0].TPM()).NotTo(BeNil(), "%s: slot 0 is the TPM", volume)
					g.Expect(keys[1].Slot()).To(Equal(1))
					g.Expect(keys[1].Static()).NotTo(BeNil())
					g.Expect(string(keys[1].Static().Key())).To(Equal(passphrase), "%s: slot 1 is the static key", volume)
				}
			})
		}
	}
}

// flannel says whether a node of cfg runs Talos' Flannel: machinery reads it from the
// KubeFlannelCNIConfig document or, before v1.14, cluster.network.cni.
func flannel(cfg coreconfig.Config) bool {
	return cfg.K8sFlannelCNIConfig() != nil
}

// encryptionKeys are the keys of a system volume, from its VolumeConfig document or, before
// Talos 1.11, machine.systemDiskEncryption.
func encryptionKeys(g Gomega, cfg coreconfig.Config, volume string) []coreconfig.EncryptionKey {
	if v, ok := cfg.Volumes().ByName(volume); ok && v.Encryption() != nil {
		return v.Encryption().Keys()
	}
	encryption := cfg.Machine().SystemDiskEncryption().Get(volume)
	g.Expect(encryption).NotTo(BeNil(), "%s is encrypted", volume)
	return encryption.Keys()
}

func TestSettingsDefaultsLeaveTheConfigAlone(t *testing.T) {
	g := NewWithT(t)
	spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: "v1.14"}
	plain, err := Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeContainer})
	g.Expect(err).NotTo(HaveOccurred())
	spec.CNI = bootstrapv1.CNIFlannel
	flannelSet, err := Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeContainer})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(flannelSet)).To(Equal(string(plain)), "cni flannel is the default")
	cfg, err := configloader.NewFromBytes(plain)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(flannel(cfg)).To(BeTrue())
}

func TestStaticKeyIsNeededAndNeverInAnError(t *testing.T) {
	g := NewWithT(t)
	spec := bootstrapv1.TalosConfigSpec{
		GenerateType:   bootstrapv1.GenerateTypeWorker,
		TalosVersion:   "v1.14",
		DiskEncryption: bootstrapv1.DiskEncryptionSpec{StaticKeySecretRef: bootstrapv1.SecretKeyReference{Name: "disk-key"}},
	}
	_, err := Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeMetal})
	g.Expect(err).To(MatchError(ErrStaticKeyMissing))

	// Specs whose encryption Talos refuses: their errors do not carry the key.
	for _, patch := range []string{
		"apiVersion: v1alpha1\nkind: VolumeConfig\nname: STATE\nencryption:\n  provider: rot13\n",
		"apiVersion: v1alpha1\nkind: VolumeConfig\nname: EPHEMERAL\nencryption:\n  keys:\n    - slot: 0\n      static:\n        passphrase: other\n",
	} {
		spec.StrategicPatches = []string{patch}
		_, err = Render(testBundle(), testCluster, Machine{Spec: spec, Mode: ModeMetal, StaticKey: "s3cr3t-passphrase"})
		g.Expect(err).To(HaveOccurred(), patch)
		g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t-passphrase"))
	}
}

func TestCheckSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec bootstrapv1.TalosConfigSpec
		want string
	}{
		{"label key", bootstrapv1.TalosConfigSpec{NodeLabels: map[string]string{"bad key!": "x"}}, "nodeLabels:"},
		{"label value", bootstrapv1.TalosConfigSpec{NodeLabels: map[string]string{"ok": strings.Repeat("v", 64)}}, "nodeLabels:"},
		{"taint key", bootstrapv1.TalosConfigSpec{NodeTaints: []bootstrapv1.NodeTaint{{Key: "-x", Effect: bootstrapv1.TaintEffectNoSchedule}}}, "nodeTaints[0]:"},
		{"taint effect", bootstrapv1.TalosConfigSpec{NodeTaints: []bootstrapv1.NodeTaint{{Key: "x", Effect: "Sometimes"}}}, "nodeTaints[0]:"},
		{"duplicate taint", bootstrapv1.TalosConfigSpec{NodeTaints: []bootstrapv1.NodeTaint{
			{Key: "x", Effect: bootstrapv1.TaintEffectNoSchedule}, {Key: "x", Effect: bootstrapv1.TaintEffectNoExecute}}}, "nodeTaints[1]: the key x is listed twice"},
		{"duplicate mirror", bootstrapv1.TalosConfigSpec{RegistryMirrors: []bootstrapv1.RegistryMirror{
			{Registry: "docker.io", Endpoints: []string{"https://a"}}, {Registry: "docker.io", Endpoints: []string{"https://b"}}}}, "registryMirrors[1]: the registry docker.io is listed twice"},
		{"mirror without endpoint", bootstrapv1.TalosConfigSpec{RegistryMirrors: []bootstrapv1.RegistryMirror{{Registry: "docker.io"}}}, "registryMirrors[0] (docker.io)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.spec.GenerateType = bootstrapv1.GenerateTypeWorker
			g.Expect(Check(tc.spec)).To(MatchError(ContainSubstring(tc.want)))
		})
	}
	g := NewWithT(t)
	g.Expect(Check(bootstrapv1.TalosConfigSpec{
		GenerateType: bootstrapv1.GenerateTypeWorker,
		NodeLabels:   map[string]string{"example.com/pool": "a"},
		DiskEncryption: bootstrapv1.DiskEncryptionSpec{
			Key: bootstrapv1.DiskEncryptionKeyNodeID, StaticKeySecretRef: bootstrapv1.SecretKeyReference{Name: "k"},
		},
	})).To(Succeed(), "a static key is checked without reading its Secret")
}
