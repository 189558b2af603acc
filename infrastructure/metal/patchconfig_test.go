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
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
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

			served, err := patchConfig(rendered, servedPatch{providerID: "talon-metal://ns/host-1", disk: "/dev/nvme0n1", installer: installer})
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
		served, err := patchConfig(render(g), servedPatch{providerID: "talon-metal://ns/host-1", disk: "", installer: installer})
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
		served, err := patchConfig(rendered, servedPatch{providerID: "talon-metal://ns/host-1", disk: "/dev/nvme0n1", installer: installer})
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

// TestServedConfigHasTheHostNetwork: a host's static network and the cluster's VIP reach the
// config served to a control-plane host in the form its Talos version reads (documents from
// v1.12, machine.network before), the result is a config such a node accepts, and a VIP the
// config already shares is not added twice.
func TestServedConfigHasTheHostNetwork(t *testing.T) {
	network := &infrav1.HostNetwork{
		Interfaces: []infrav1.HostInterface{
			{Name: "lan", MACAddress: "02:42:10:99:07:01", Addresses: []string{"10.99.7.21/24"}, Gateway: "10.99.7.1"},
			{Name: "storage", MACAddress: "02:42:10:99:07:81", Addresses: []string{"10.98.0.21/16", "fd00::21/64"}},
		},
		Nameservers: []string{"10.99.7.53", "fd00::53"},
	}
	host := &infrav1.MetalHost{Spec: infrav1.MetalHostSpec{Network: network}}
	vip := &infrav1.ControlPlaneVIP{Address: "10.99.7.50"}
	link, err := vipLink(host, vip)
	if err != nil || link != "lan" {
		t.Fatalf("the VIP is on %q (%v), want the interface on its network, lan", link, err)
	}
	if got := staticAddress(host); got != "10.99.7.21" {
		t.Fatalf("the host's address is %q, want its first static address", got)
	}
	for _, version := range []string{"v1.11", "v1.12", "v1.14"} {
		t.Run(version, func(t *testing.T) {
			g := NewWithT(t)
			contract, err := configgen.ParseContract(version)
			g.Expect(err).NotTo(HaveOccurred())
			rendered, err := configgen.Render(simtest.Bundle(), configgen.Cluster{
				Name: "metal", Endpoint: configgen.Endpoint{Host: vip.Address, Port: 6443}, KubernetesVersion: simtest.KubernetesVersion,
			}, configgen.Machine{Spec: bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: version}, Mode: configgen.ModeMetal})
			g.Expect(err).NotTo(HaveOccurred())
			p := servedPatch{providerID: "talon-metal://ns/cp-1", network: network, vip: vip, vipLink: link}
			served, err := patchConfig(rendered, p)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = configgen.Validate(served, configgen.ModeMetal, contract)
			g.Expect(err).NotTo(HaveOccurred(), "%s", served)
			cfg, err := configloader.NewFromBytes(served)
			g.Expect(err).NotTo(HaveOccurred())

			type iface struct {
				selector, gateway string
				addresses         []string
			}
			var got []iface
			var vips []string
			nameservers := make([]string, 0, len(network.Nameservers))
			if contract.MultidocNetworkConfigSupported() {
				aliases := map[string]string{}
				for _, a := range cfg.NetworkLinkAliasConfigs() {
					aliases[a.Name()] = a.LinkSelector().String()
				}
				for _, l := range cfg.NetworkCommonLinkConfigs() {
					i := iface{selector: aliases[l.Name()]}
					for _, a := range l.Addresses() {
						i.addresses = append(i.addresses, a.Address().String())
					}
					for _, r := range l.Routes() {
						if gw, ok := r.Gateway().Get(); ok {
							i.gateway = gw.String()
						}
					}
					g.Expect(l.Up().ValueOr(false)).To(BeTrue())
					got = append(got, i)
				}
				for _, v := range cfg.NetworkVirtualIPConfigs() {
					vips = append(vips, v.Link()+" "+v.VIP().String())
				}
			} else {
				g.Expect(configgen.NewestKind(cfg)).To(BeNil(), "no document a %s node does not know:\n%s", version, served)
				for _, d := range cfg.Machine().Network().Devices() {
					i := iface{selector: d.Selector().HardwareAddress(), addresses: d.Addresses()}
					for _, r := range d.Routes() {
						i.gateway = r.Gateway()
					}
					got = append(got, i)
					if d.VIPConfig() != nil {
						vips = append(vips, d.Selector().HardwareAddress()+" "+d.VIPConfig().IP())
					}
				}
			}
			want := []iface{
				{selector: "02:42:10:99:07:01", addresses: []string{"10.99.7.21/24"}, gateway: "10.99.7.1"},
				{selector: "02:42:10:99:07:81", addresses: []string{"10.98.0.21/16", "fd00::21/64"}},
			}
			wantVIP := "02:42:10:99:07:01 10.99.7.50"
			if contract.MultidocNetworkConfigSupported() {
				want[0].selector = `mac(link.permanent_addr) == "02:42:10:99:07:01"`
				want[1].selector = `mac(link.permanent_addr) == "02:42:10:99:07:81"`
				wantVIP = "lan 10.99.7.50"
			}
			for _, ns := range cfg.NetworkResolverConfig().Resolvers() {
				nameservers = append(nameservers, ns.Addr.String())
			}
			g.Expect(got).To(Equal(want), "%s", served)
			g.Expect(vips).To(Equal([]string{wantVIP}))
			g.Expect(nameservers).To(Equal(network.Nameservers))
		})
	}

	// The config served to a host is valid whatever the Machine's own patches set: its own
	// VIP (the talos-metal ClusterClass's), resolver settings in machine.network (refused
	// beside a ResolverConfig), or a VIP on a link that is not a static interface (which then
	// keeps DHCP: a config with a LinkConfig runs none on the links it does not name).
	for _, tc := range []struct {
		name, version, patch string
		vip                  *infrav1.ControlPlaneVIP
		check                func(g Gomega, cfg talosconfig.Provider)
	}{
		{
			name: "the config's own VIP", version: "v1.14", vip: vip,
			patch: "apiVersion: v1alpha1\nkind: Layer2VIPConfig\nname: 10.99.7.50\nlink: lan\n",
			check: func(g Gomega, cfg talosconfig.Provider) { g.Expect(cfg.NetworkVirtualIPConfigs()).To(HaveLen(1)) },
		},
		{
			name: "name servers in machine.network", version: "v1.12", vip: vip,
			patch: "machine:\n  network:\n    nameservers: [192.0.2.53]\n",
			check: func(g Gomega, cfg talosconfig.Provider) {
				got := make([]string, 0, 3)
				for _, ns := range cfg.NetworkResolverConfig().Resolvers() {
					got = append(got, ns.Addr.String())
				}
				g.Expect(got).To(ConsistOf("192.0.2.53", "10.99.7.53", "fd00::53"))
			},
		},
		{
			name: "a VIP on a DHCP link", version: "v1.14", vip: &infrav1.ControlPlaneVIP{Address: "192.168.1.50", Link: "eth1"},
			check: func(g Gomega, cfg talosconfig.Provider) {
				dhcp := make([]string, 0, 1)
				for _, d := range cfg.NetworkDHCPConfigs() {
					dhcp = append(dhcp, d.Name())
				}
				g.Expect(dhcp).To(ConsistOf("eth1"))
				g.Expect(cfg.NetworkVirtualIPConfigs()[0].Link()).To(Equal("eth1"))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			contract, err := configgen.ParseContract(tc.version)
			g.Expect(err).NotTo(HaveOccurred())
			spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: tc.version}
			if tc.patch != "" {
				spec.StrategicPatches = []string{tc.patch}
			}
			rendered, err := configgen.Render(simtest.Bundle(), configgen.Cluster{
				Name: "metal", Endpoint: configgen.Endpoint{Host: tc.vip.Address, Port: 6443}, KubernetesVersion: simtest.KubernetesVersion,
			}, configgen.Machine{Spec: spec, Mode: configgen.ModeMetal})
			g.Expect(err).NotTo(HaveOccurred())
			link, err := vipLink(host, tc.vip)
			g.Expect(err).NotTo(HaveOccurred())
			served, err := patchConfig(rendered, servedPatch{providerID: "talon-metal://ns/cp-1", network: network, vip: tc.vip, vipLink: link})
			g.Expect(err).NotTo(HaveOccurred())
			_, err = configgen.Validate(served, configgen.ModeMetal, contract)
			g.Expect(err).NotTo(HaveOccurred(), "%s", served)
			cfg, err := configloader.NewFromBytes(served)
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, cfg)
		})
	}

	t.Run("a VIP on no static network", func(t *testing.T) {
		g := NewWithT(t)
		_, err := vipLink(host, &infrav1.ControlPlaneVIP{Address: "192.168.1.50"})
		g.Expect(err).To(MatchError(ContainSubstring("set controlPlaneVIP.link")))
		link, err := vipLink(host, &infrav1.ControlPlaneVIP{Address: "192.168.1.50", Link: "eth1"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(link).To(Equal("eth1"))
	})
}
