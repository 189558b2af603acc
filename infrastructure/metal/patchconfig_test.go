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

package metal

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/sim/simtest"
)

// TestServedConfigKeepsItsContract: the provider ID and install disk the boot service adds
// to a served config go where the config's contract keeps them, and the result is a config
// a metal node of that version accepts.
func TestServedConfigKeepsItsContract(t *testing.T) {
	for _, version := range []string{"v1.13", "v1.14"} {
		t.Run(version, func(t *testing.T) {
			g := NewWithT(t)
			const installer = "factory.example.com/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.14.1"
			contract, err := configgen.ParseContract(version)
			g.Expect(err).NotTo(HaveOccurred())
			spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: version}
			if version == "v1.13" {
				spec.StrategicPatches = []string{"machine:\n  install:\n    disk: /dev/sda\n"}
			}
			rendered, err := configgen.Render(simtest.Bundle(), configgen.Cluster{
				Name: "metal", Endpoint: configgen.Endpoint{Host: "10.0.0.1", Port: 6443}, KubernetesVersion: simtest.KubernetesVersion,
			}, configgen.Machine{Spec: spec, Mode: configgen.ModeMetal})
			g.Expect(err).NotTo(HaveOccurred())

			served, err := patchConfig(rendered, "talon-metal://ns/host-1", "/dev/nvme0n1", installer)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = configgen.Validate(served, configgen.ModeMetal, contract)
			g.Expect(err).NotTo(HaveOccurred())
			cfg, err := configloader.NewFromBytes(served)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.K8sKubeletConfig().ExtraArgs()).To(HaveKeyWithValue("provider-id", []string{"talon-metal://ns/host-1"}))
			g.Expect(cfg.K8sKubeletConfig().Image()).To(HaveSuffix(simtest.KubernetesVersion), "the rest of the kubelet's settings are kept")
			if version == "v1.14" {
				g.Expect(configgen.LegacyFields(cfg)).To(BeEmpty(), "%s", served)
				g.Expect(cfg.UnattendedInstallConfig().VolumeSelector().String()).To(ContainSubstring(`"/dev/nvme0n1"`))
				g.Expect(cfg.UnattendedInstallConfig().InstallerImage()).To(Equal(installer))
				g.Expect(cfg.UnattendedInstallConfig().VolumeWipe()).To(BeFalse(), "the disk is not wiped, as machinery's own generation has it")
			} else {
				g.Expect(cfg.Machine().Install().Disk()).To(Equal("/dev/nvme0n1"))
			}
		})
	}
}

// TestServedV114ConfigAlwaysInstalls: under the v1.14 contract a config served to a host
// that names no disk still installs Talos (to the default disk), and an UnattendedInstallConfig
// the config brings keeps its own wipe and installer when the host's disk is written into it.
func TestServedV114ConfigAlwaysInstalls(t *testing.T) {
	const installer = "factory.example.com/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.14.1"
	render := func(g Gomega, patches ...string) []byte {
		rendered, err := configgen.Render(simtest.Bundle(), configgen.Cluster{
			Name: "metal", Endpoint: configgen.Endpoint{Host: "10.0.0.1", Port: 6443}, KubernetesVersion: simtest.KubernetesVersion,
		}, configgen.Machine{Spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeWorker, TalosVersion: "v1.14", StrategicPatches: patches}, Mode: configgen.ModeMetal})
		g.Expect(err).NotTo(HaveOccurred())
		return rendered
	}
	t.Run("no disk anywhere", func(t *testing.T) {
		g := NewWithT(t)
		served, err := patchConfig(render(g), "talon-metal://ns/host-1", "", installer)
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := configloader.NewFromBytes(served)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.UnattendedInstallConfig()).NotTo(BeNil(), "the node installs Talos:\n%s", served)
		g.Expect(cfg.UnattendedInstallConfig().VolumeSelector().String()).To(ContainSubstring(`"` + configgen.DefaultInstallDisk + `"`))
		g.Expect(cfg.UnattendedInstallConfig().InstallerImage()).To(Equal(installer))
	})
	t.Run("the config's own install document", func(t *testing.T) {
		g := NewWithT(t)
		const own = "registry.example.com/talos/installer:v1.14.1"
		rendered := render(g, "apiVersion: v1alpha1\nkind: UnattendedInstallConfig\nprovisioning:\n  diskSelector:\n    match: disk.size > 1u * TB\n  wipe: true\ninstaller:\n  image: "+own+"\n")
		served, err := patchConfig(rendered, "talon-metal://ns/host-1", "/dev/nvme0n1", installer)
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := configloader.NewFromBytes(served)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.UnattendedInstallConfig().VolumeSelector().String()).To(ContainSubstring(`"/dev/nvme0n1"`), "the host's disk wins")
		g.Expect(cfg.UnattendedInstallConfig().VolumeWipe()).To(BeTrue(), "the config's wipe is kept:\n%s", served)
		g.Expect(cfg.UnattendedInstallConfig().InstallerImage()).To(Equal(own), "the config's installer is kept")
	})
}

// TestInstallDiskPrecedence: a MetalHost's own install disk wins over its TalosMetalMachine's
// (the template's default), which serves hosts that name none.
func TestInstallDiskPrecedence(t *testing.T) {
	for _, tc := range []struct{ host, machine, want string }{
		{"/dev/nvme0n1", "/dev/vdb", "/dev/nvme0n1"},
		{"", "/dev/vdb", "/dev/vdb"},
		{"/dev/nvme0n1", "", "/dev/nvme0n1"},
		{"", "", ""},
	} {
		h := &infrav1.MetalHost{Spec: infrav1.MetalHostSpec{InstallDisk: tc.host}}
		m := &infrav1.TalosMetalMachine{Spec: infrav1.TalosMetalMachineSpec{InstallDisk: tc.machine}}
		if got := installDisk(h, m); got != tc.want {
			t.Errorf("host %q, machine %q: installs to %q, want %q", tc.host, tc.machine, got, tc.want)
		}
	}
}
