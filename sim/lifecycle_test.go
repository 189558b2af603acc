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
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosclient "github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
)

// nodeReady is the status of the Node's Ready condition ("" while there is none).
func nodeReady(ctx context.Context, kube *kubernetes.Clientset, name string) func() corev1.ConditionStatus {
	return func() corev1.ConditionStatus {
		node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status
			}
		}
		return ""
	}
}

// version is the Talos version a node reports, or the error.
func version(ctx context.Context, c *talosclient.Client) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := c.Version(ctx)
	if err != nil {
		return "", err
	}
	return v.Messages[0].Version.Tag, nil
}

// TestLifecycleAndFaults drives a worker of a one-control-plane cluster through an upgrade,
// a staged config activated by a reboot, a graceful shutdown, a power cut and a partition,
// and crashes the control plane's etcd; each shows where a user would see it: the Talos
// API and the Node in the workload cluster.
func TestLifecycleAndFaults(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	const cpAddress, workerAddress = "127.0.42.10", "127.0.42.11"
	nodes := startNodes(t, cpAddress, workerAddress)
	cp, worker := nodes[0], nodes[1]
	// A Node whose kubelet went silent is marked NotReady after this grace period.
	grace := bootstrapv1.ConfigPatch{Op: "add", Path: "/cluster/controllerManager/extraArgs",
		Value: &apiextensionsv1.JSON{Raw: []byte(`{"node-monitor-grace-period":"8s"}`)}}
	cluster := simtest.Scenario(t, []string{cpAddress}, []string{workerAddress}, grace)
	kube := cluster.Kube
	talos := simtest.Client(t, simtest.Bundle(), workerAddress)
	workerReady := nodeReady(ctx, kube, "worker-0")

	t.Log("Upgrade: the node reboots into the installer image's version and rejoins")
	// MachineService.Upgrade: deprecated in favour of LifecycleService, still served by Talos
	// 1.13 and called by today's Talos providers.
	_, err := talos.MachineClient.Upgrade(
		ctx, &machine.UpgradeRequest{Image: "factory.talos.dev/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.14.2"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (string, error) { return version(ctx, talos) }, time.Minute, 500*time.Millisecond).Should(Equal("v1.14.2"))
	g.Eventually(func() (string, error) {
		node, err := kube.CoreV1().Nodes().Get(ctx, "worker-0", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return node.Status.NodeInfo.OSImage, nil
	}, time.Minute, time.Second).Should(ContainSubstring("v1.14.2"))

	t.Log("A staged config takes effect at the next reboot, not before")
	staged := simtest.Render(t, bootstrapv1.GenerateTypeWorker, "worker-0", cpAddress, bootstrapv1.ConfigPatch{
		Op: "add", Path: "/machine/nodeLabels", Value: &apiextensionsv1.JSON{Raw: []byte(`{"talon.dev/staged":"yes"}`)},
	})
	_, err = talos.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: staged, Mode: machine.ApplyConfigurationRequest_STAGED})
	g.Expect(err).NotTo(HaveOccurred())
	labels := func() map[string]string {
		node, err := kube.CoreV1().Nodes().Get(ctx, "worker-0", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return node.Labels
	}
	g.Consistently(labels, 2*time.Second, 500*time.Millisecond).ShouldNot(HaveKey("talon.dev/staged"))
	g.Expect(talos.Reboot(ctx)).To(Succeed())
	g.Eventually(labels, time.Minute, time.Second).Should(HaveKeyWithValue("talon.dev/staged", "yes"))

	t.Log("A graceful shutdown reports the Node NotReady at once; power on brings it back")
	g.Expect(talos.Shutdown(ctx)).To(Succeed())
	g.Eventually(workerReady, 30*time.Second, 500*time.Millisecond).Should(Equal(corev1.ConditionFalse))
	_, err = version(ctx, talos)
	g.Expect(err).To(HaveOccurred(), "a node that is shut down does not answer")
	g.Expect(worker.PowerOn(ctx)).To(Succeed())
	g.Eventually(workerReady, time.Minute, 500*time.Millisecond).Should(Equal(corev1.ConditionTrue))

	t.Log("A power cut says nothing: kube-controller-manager marks the Node NotReady once it is overdue")
	worker.PowerOff()
	g.Eventually(workerReady, time.Minute, time.Second).Should(Equal(corev1.ConditionUnknown))
	g.Expect(worker.PowerOn(ctx)).To(Succeed())
	g.Eventually(workerReady, time.Minute, 500*time.Millisecond).Should(Equal(corev1.ConditionTrue))

	t.Log("A partitioned node answers nothing until it is healed")
	g.Eventually(func() error { _, err := version(ctx, talos); return err }, 30*time.Second, 500*time.Millisecond).Should(Succeed())
	worker.Partition()
	_, err = version(ctx, talos)
	g.Expect(code(err)).To(Equal(codes.DeadlineExceeded))
	g.Eventually(workerReady, time.Minute, time.Second).Should(Equal(corev1.ConditionUnknown))
	worker.Heal()
	g.Eventually(func() error { _, err := version(ctx, talos); return err }, 30*time.Second, 500*time.Millisecond).Should(Succeed())
	g.Eventually(workerReady, time.Minute, 500*time.Millisecond).Should(Equal(corev1.ConditionTrue))

	t.Log("A kube-controller-manager killed with SIGKILL is started again, as the kubelet restarts a static pod: its mirror Pod is Ready with one restart")
	killed := componentPID(t, "kube-controller-manager", cpAddress)
	g.Expect(syscall.Kill(killed, syscall.SIGKILL)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods, err := kube.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		var mirror *corev1.Pod
		for i := range pods.Items {
			if strings.HasPrefix(pods.Items[i].Name, "kube-controller-manager-") {
				mirror = &pods.Items[i]
			}
		}
		g.Expect(mirror).NotTo(BeNil(), "the mirror Pod of kube-controller-manager")
		g.Expect(mirror.Status.ContainerStatuses).To(ConsistOf(And(HaveField("Ready", true), HaveField("RestartCount", BeEquivalentTo(1)))))
	}, time.Minute, time.Second).Should(Succeed())
	g.Expect(componentPID(t, "kube-controller-manager", cpAddress)).NotTo(Equal(killed), "a new process")

	t.Log("A crashed etcd stays down and the node says so")
	g.Expect(cp.CrashEtcd()).To(Succeed())
	_, err = cluster.Talos.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	g.Expect(code(err)).To(Equal(codes.FailedPrecondition))
	services, err := cluster.Talos.ServiceList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(services.Messages[0].Services).To(ContainElement(And(
		HaveField("Id", "etcd"), HaveField("State", "Failed"), HaveField("Health.Unknown", true))), "the etcd service failed")
}

// componentPID is the process ID of the Kubernetes component (kube-controller-manager) of
// the node at address, found as ps would: by its command line.
func componentPID(t *testing.T, component, address string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue // it exited meanwhile
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == component && slices.Contains(args, "--bind-address="+address) {
			return pid
		}
	}
	t.Fatalf("no %s process of the node at %s", component, address)
	return 0
}

// TestConfigFromURL boots a node with a talos.config= URL that the server does not answer
// at first: the node retries, with ${uuid} and ${mac} replaced by its own, and comes up
// configured. A slow boot keeps it silent for its boot delay.
func TestConfigFromURL(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	const address = "127.0.42.12"
	var requests atomic.Int32
	var gotUUID, gotMAC atomic.Value
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) < 3 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		gotUUID.Store(r.URL.Query().Get("uuid"))
		gotMAC.Store(r.URL.Query().Get("mac"))
		_, _ = w.Write(renderControlPlane(t, "from-url", address))
	}))
	t.Cleanup(server.Close)

	n, err := sim.NewNode(sim.Options{
		Address: address, StateDir: t.TempDir(), BootDelay: time.Second,
		ConfigURL: server.URL + "/config?uuid=${uuid}&mac=${mac}", UUID: "4c4c4544-0042-3010-8057-b4c04f4e3432",
	})
	g.Expect(err).NotTo(HaveOccurred())
	booted := make(chan error, 1)
	go func() { booted <- n.Start(ctx, nil) }()
	t.Cleanup(n.Stop)
	_, err = version(ctx, simtest.MaintenanceClient(t, address))
	g.Expect(err).To(HaveOccurred(), "a node still booting does not answer")
	g.Eventually(booted, 10*time.Second).Should(Receive(BeNil()))

	admin := simtest.Client(t, simtest.Bundle(), address)
	g.Eventually(func() ([]string, error) {
		if _, err := admin.Version(ctx); err != nil {
			return nil, err
		}
		return simtest.ServedNames(ctx, address)
	}, 30*time.Second, 200*time.Millisecond).Should(ContainElement("from-url"))
	g.Expect(requests.Load()).To(BeNumerically(">=", 3), "the node retried")
	g.Expect(gotUUID.Load()).To(Equal("4c4c4544-0042-3010-8057-b4c04f4e3432"))
	g.Expect(gotMAC.Load()).To(Equal(n.MAC()))
}
