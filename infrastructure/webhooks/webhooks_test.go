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

package webhooks_test

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(m))
}

// TestDockerBadInputIsRejected: every Docker spec that could only fail later, on the host,
// is refused at admission with the field and what to write instead.
func TestDockerBadInputIsRejected(t *testing.T) {
	env := envtest.Get(t)
	env.StartManager(t, envtest.ManagerOptions{})
	ns := env.NewNamespace(t, "docker-webhooks")
	ctx := t.Context()
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }

	machine := func(name string, spec infrav1.TalosDockerMachineSpec) error {
		return env.Client.Create(ctx, &infrav1.TalosDockerMachine{ObjectMeta: meta(name), Spec: spec})
	}
	cluster := func(name string, spec infrav1.TalosDockerClusterSpec) error {
		return env.Client.Create(ctx, &infrav1.TalosDockerCluster{ObjectMeta: meta(name), Spec: spec})
	}

	t.Run("valid specs are accepted", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(machine("valid", infrav1.TalosDockerMachineSpec{
			CPUs: "1500m", Memory: "2Gi",
			ExtraMounts:       []infrav1.DockerMount{{HostPath: "/srv", ContainerPath: "/var/mnt/srv", ReadOnly: ptr.To(true)}},
			ExtraPortMappings: []infrav1.DockerPortMapping{{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 53, HostPort: 8080, Protocol: "UDP"}},
			ExtraEnv:          []infrav1.DockerEnvVar{{Name: "HTTP_PROXY", Value: "http://proxy:3128"}},
		})).To(Succeed())
		g.Expect(cluster("valid", infrav1.TalosDockerClusterSpec{Network: infrav1.DockerNetwork{Subnet: "172.31.10.0/24", MTU: 1400}})).To(Succeed())
	})
	t.Run("invalid memory string", func(t *testing.T) {
		err := machine("memory", infrav1.TalosDockerMachineSpec{Memory: "2 gigs"})
		NewWithT(t).Expect(err).To(MatchError(And(ContainSubstring("spec.memory"), ContainSubstring(`"2Gi" or "2048Mi"`))))
	})
	t.Run("too little memory", func(t *testing.T) {
		err := machine("little", infrav1.TalosDockerMachineSpec{Memory: "64Mi"})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("at least 512Mi")))
	})
	t.Run("invalid CPU quantity", func(t *testing.T) {
		err := machine("cpus", infrav1.TalosDockerMachineSpec{CPUs: "two"})
		NewWithT(t).Expect(err).To(MatchError(And(ContainSubstring("spec.cpus"), ContainSubstring(`"2" or "1500m"`))))
	})
	t.Run("the same host port twice", func(t *testing.T) {
		err := machine("ports", infrav1.TalosDockerMachineSpec{ExtraPortMappings: []infrav1.DockerPortMapping{
			{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 81, HostPort: 8080, Protocol: "TCP"},
		}})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("host port TCP/8080 is already published by extraPortMappings[0]")))
	})
	t.Run("a host IP that is no address", func(t *testing.T) {
		err := machine("hostip", infrav1.TalosDockerMachineSpec{ExtraPortMappings: []infrav1.DockerPortMapping{{ContainerPort: 80, HostPort: 8081, HostIP: "localhost"}}})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("spec.extraPortMappings[0].hostIP")))
	})
	t.Run("a relative mount", func(t *testing.T) {
		err := machine("mount", infrav1.TalosDockerMachineSpec{ExtraMounts: []infrav1.DockerMount{{HostPath: "data", ContainerPath: "/var/data"}}})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("spec.extraMounts[0].hostPath")))
	})
	t.Run("overriding the Talos environment", func(t *testing.T) {
		err := machine("env", infrav1.TalosDockerMachineSpec{ExtraEnv: []infrav1.DockerEnvVar{{Name: "USERDATA", Value: "x"}}})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("USERDATA is set by the provider")))
	})
	t.Run("changing a machine", func(t *testing.T) {
		g := NewWithT(t)
		m := &infrav1.TalosDockerMachine{ObjectMeta: meta("change")}
		g.Expect(env.Client.Create(ctx, m)).To(Succeed())
		m.Spec.ProviderID = "talos-docker://ns/c/m"
		g.Expect(env.Client.Update(ctx, m)).To(Succeed(), "the providerID is set once")
		m.Spec.Memory = "4Gi"
		g.Expect(env.Client.Update(ctx, m)).To(MatchError(ContainSubstring("change the machine template to roll out new Machines")))
	})
	t.Run("a subnet that is no CIDR", func(t *testing.T) {
		err := cluster("subnet", infrav1.TalosDockerClusterSpec{Network: infrav1.DockerNetwork{Subnet: "172.31.10.0/33"}})
		NewWithT(t).Expect(err).To(MatchError(And(ContainSubstring("spec.network.subnet"), ContainSubstring("CIDR notation"))))
	})
	t.Run("a subnet with host bits", func(t *testing.T) {
		err := cluster("hostbits", infrav1.TalosDockerClusterSpec{Network: infrav1.DockerNetwork{Subnet: "172.31.10.7/24"}})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("did you mean 172.31.10.0/24?")))
	})
	t.Run("changing the network of a cluster", func(t *testing.T) {
		g := NewWithT(t)
		c := &infrav1.TalosDockerCluster{ObjectMeta: meta("renet"), Spec: infrav1.TalosDockerClusterSpec{Network: infrav1.DockerNetwork{Subnet: "172.31.11.0/24"}}}
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
		c.Spec.Network.Subnet = "172.31.12.0/24"
		g.Expect(env.Client.Update(ctx, c)).To(MatchError(ContainSubstring("the network of a cluster cannot change")))
	})
	t.Run("templates: invalid specs are refused, a ClusterClass dry run passes", func(t *testing.T) {
		g := NewWithT(t)
		template := func(name string, annotations map[string]string) *infrav1.TalosDockerMachineTemplate {
			tmpl := &infrav1.TalosDockerMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations}}
			tmpl.Spec.Template.Spec.Memory = "lots"
			return tmpl
		}
		g.Expect(env.Client.Create(ctx, template("bad", nil))).To(MatchError(ContainSubstring("spec.template.spec.memory")))
		g.Expect(env.Client.Create(ctx, template("dry-run", map[string]string{clusterv1.TopologyDryRunAnnotation: ""}), client.DryRunAll)).To(Succeed())
		clusterTemplate := &infrav1.TalosDockerClusterTemplate{ObjectMeta: meta("bad")}
		clusterTemplate.Spec.Template.Spec.Network.Subnet = "fd00::/64"
		g.Expect(env.Client.Create(ctx, clusterTemplate)).To(MatchError(ContainSubstring("must be an IPv4 subnet")))
	})
}
