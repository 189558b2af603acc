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

package controlplane_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
)

// TestRebootDigest: the changes Talos reads only at boot change the digest; the ones it
// applies at once do not.
func TestRebootDigest(t *testing.T) {
	g := NewWithT(t)
	bundle, err := configgen.NewBundle("v1.14", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	cluster := configgen.Cluster{
		Name: "demo", Endpoint: configgen.Endpoint{Host: "10.5.0.2", Port: 6443}, KubernetesVersion: "v1.36.3",
		PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"}, DNSDomain: "demo.local",
	}
	render := func(version string, patches ...string) []byte {
		c := cluster
		c.KubernetesVersion = version
		spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: "v1.14", StrategicPatches: patches}
		data, err := configgen.Render(bundle, c, configgen.Machine{Spec: spec, Mode: configgen.ModeContainer})
		g.Expect(err).NotTo(HaveOccurred())
		return data
	}
	digest := func(data []byte) string {
		d, err := controlplane.RebootDigest(data)
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}
	base := digest(render("v1.36.3"))
	for _, tc := range []struct {
		name   string
		data   []byte
		reboot bool
	}{
		{"a new Kubernetes version", render("v1.37.2"), false},
		{"a sysctl", render("v1.36.3", "apiVersion: v1alpha1\nkind: SysctlConfig\nparams:\n  vm.max_map_count: \"262144\"\n"), false},
		{"machine.env", render("v1.36.3", "machine:\n  env:\n    HTTP_PROXY: http://proxy:3128\n"), true},
		{"an etcd argument", render("v1.36.3", "cluster:\n  etcd:\n    extraArgs:\n      election-timeout: \"5000\"\n"), true},
		{"a kernel module", render("v1.36.3", "machine:\n  kernel:\n    modules:\n      - name: br_netfilter\n"), true},
		{"an EnvironmentConfig", render("v1.36.3", "apiVersion: v1alpha1\nkind: EnvironmentConfig\nvariables:\n  HTTPS_PROXY: http://proxy:3128\n"), true},
	} {
		g.Expect(digest(tc.data) != base).To(Equal(tc.reboot), "%s: needs a reboot = %t", tc.name, tc.reboot)
	}
}

// TestKubeletPinned: the config with the old kubelet image differs from the new one only
// there, whichever document holds the kubelet.
func TestKubeletPinned(t *testing.T) {
	g := NewWithT(t)
	bundle, err := configgen.NewBundle("v1.14", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	for _, contract := range []string{"v1.13", "v1.14"} {
		cluster := configgen.Cluster{
			Name: "demo", Endpoint: configgen.Endpoint{Host: "10.5.0.2", Port: 6443}, KubernetesVersion: "v1.37.2",
			PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"}, DNSDomain: "demo.local",
		}
		spec := bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane, TalosVersion: contract}
		data, err := configgen.Render(bundle, cluster, configgen.Machine{Spec: spec, Mode: configgen.ModeContainer})
		g.Expect(err).NotTo(HaveOccurred())
		kubelet, err := controlplane.KubeletImage(data)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kubelet).To(HaveSuffix(":v1.37.2"), contract)

		old := strings.Replace(kubelet, "v1.37.2", "v1.36.3", 1)
		pinned, err := controlplane.WithKubeletImage(data, old)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(controlplane.KubeletImage(pinned)).To(Equal(old), contract)
		g.Expect(string(pinned)).To(ContainSubstring("kube-apiserver:v1.37.2"), "%s: the control-plane components stay new", contract)
		same, err := controlplane.SameConfig(pinned, data)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(same).To(BeFalse(), contract)
		back, err := controlplane.WithKubeletImage(pinned, kubelet)
		g.Expect(err).NotTo(HaveOccurred())
		same, err = controlplane.SameConfig(back, data)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(same).To(BeTrue(), "%s: only the kubelet image differed", contract)
	}
}
