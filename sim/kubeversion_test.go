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

package sim_test

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// nextKubernetesVersion is the second Kubernetes minor built into bin/v1.37 (make tools).
const nextKubernetesVersion = "v1.37.2"

// TestKubernetesVersionFollowsConfig shows that a control-plane node runs the Kubernetes
// version its config names: the pinned v1.36 binaries at boot and, once a config naming
// v1.37.2 is applied without a reboot (as talosctl upgrade-k8s does), kube-apiserver and
// kube-controller-manager v1.37.2, which the API server's /version (what kubectl version
// prints) and the mirror Pods report.
func TestKubernetesVersionFollowsConfig(t *testing.T) {
	_, err := envtest.Binary(filepath.Join("v1.37", "kube-apiserver"))
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	g := NewWithT(t)
	ctx := t.Context()
	const address = "127.0.45.1"
	startNodes(t, address)
	render := func(version string) []byte {
		data, err := configgen.Render(simtest.Bundle(), configgen.Cluster{
			Name: "sim", Endpoint: configgen.Endpoint{Host: address, Port: 6443}, KubernetesVersion: version,
		}, configgen.Machine{
			Spec:     bootstrapv1.TalosConfigSpec{GenerateType: bootstrapv1.GenerateTypeControlPlane},
			Hostname: "cp-0", Mode: configgen.ModeContainer,
		})
		g.Expect(err).NotTo(HaveOccurred())
		return data
	}
	talos := simtest.MaintenanceClient(t, address)
	_, err = talos.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: render(simtest.KubernetesVersion)})
	g.Expect(err).NotTo(HaveOccurred())
	admin := simtest.Client(t, simtest.Bundle(), address)
	g.Eventually(func() error { return admin.Bootstrap(ctx, &machine.BootstrapRequest{}) }, 30*time.Second, time.Second).Should(Succeed())
	kubeconfig, err := admin.Kubeconfig(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	restConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	kube, err := kubernetes.NewForConfig(restConfig)
	g.Expect(err).NotTo(HaveOccurred())
	serverVersion := func() string {
		v, err := kube.Discovery().ServerVersion()
		if err != nil {
			return err.Error()
		}
		return v.GitVersion
	}
	mirrorImage := func(component string) func() string {
		return func() string {
			pod, err := kube.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, component+"-cp-0", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			return pod.Spec.Containers[0].Image
		}
	}
	g.Eventually(serverVersion, 2*time.Minute, time.Second).Should(Equal(simtest.KubernetesVersion))

	t.Log("The config names v1.37.2: the node runs kube-apiserver and kube-controller-manager v1.37.2")
	resp, err := admin.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{
		Data: render(nextKubernetesVersion), Mode: machine.ApplyConfigurationRequest_NO_REBOOT,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Messages[0].ModeDetails).To(Equal("Applied configuration without a reboot"))
	g.Eventually(serverVersion, 2*time.Minute, time.Second).Should(Equal(nextKubernetesVersion))
	g.Eventually(mirrorImage("kube-apiserver"), time.Minute, time.Second).Should(HaveSuffix(":" + nextKubernetesVersion))
	g.Eventually(mirrorImage("kube-controller-manager"), time.Minute, time.Second).Should(HaveSuffix(":" + nextKubernetesVersion))
}
