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

package docker_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/require"
)

// TestSimImage runs the simulator image the way the Docker provider runs the Talos image:
// a container on a network of its own with a fixed address, PLATFORM=container and the
// machine config in USERDATA. It answers Version over mTLS with the configured hostname,
// bootstraps, and serves the workload cluster's Kubernetes API from inside the container.
func TestSimImage(t *testing.T) {
	ctx := t.Context()
	require.Layer(t, docker.Layer, docker.Available(ctx))
	g := NewWithT(t)
	const network, subnet, address = "talon-sim-image-test", "172.30.99.0/24", "172.30.99.10"
	container := "talon-sim-image-test-cp"
	cleanup := func() {
		// Leftovers of an interrupted run: nothing to report if there are none.
		_, _ = docker.Docker(context.WithoutCancel(ctx), "rm", "--force", container)
		_, _ = docker.Docker(context.WithoutCancel(ctx), "network", "rm", network)
	}
	cleanup()
	t.Cleanup(cleanup)
	_, err := docker.Docker(ctx, "network", "create", "--subnet", subnet, network)
	g.Expect(err).NotTo(HaveOccurred())

	config := simtest.Render(t, bootstrapv1.GenerateTypeControlPlane, "image-cp", address)
	_, err = docker.Docker(ctx, "run", "--detach", "--name", container, "--hostname", "image-cp",
		"--network", network, "--ip", address,
		"--env", "PLATFORM=container", "--env", "USERDATA="+base64.StdEncoding.EncodeToString(config),
		docker.SimImage())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := docker.Docker(context.WithoutCancel(ctx), "logs", container)
			t.Logf("Logs of %s:\n%s", container, logs)
		}
	})

	talos := simtest.Client(t, simtest.Bundle(), address)
	g.Eventually(func(g Gomega) {
		v, err := talos.Version(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(simtest.ServedNames(ctx, address)).To(ContainElement("image-cp"))
		g.Expect(v.Messages[0].Version.Tag).To(Equal(sim.DefaultTalosVersion))
		g.Expect(v.Messages[0].Platform.Mode).To(Equal("container"))
	}, time.Minute, 500*time.Millisecond).Should(Succeed())

	g.Expect(talos.Bootstrap(ctx, &machine.BootstrapRequest{})).To(Succeed())
	kubeconfig, err := talos.Kubeconfig(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	restConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	kube, err := kubernetes.NewForConfig(restConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		node, err := kube.CoreV1().Nodes().Get(ctx, "image-cp", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(node.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
	}, 2*time.Minute, time.Second).Should(Succeed())
}
