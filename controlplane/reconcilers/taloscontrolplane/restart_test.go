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

package taloscontrolplane_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// killSeedEnv replays TestManagerSurvivesSIGKILL with the seed a failed run printed.
const killSeedEnv = "TALON_KILL_SEED"

// controlPlaneManagerBinary builds cmd/controlplane-manager once per test binary.
var controlPlaneManagerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "talon-controlplane-manager-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "controlplane-manager")
	cmd := exec.CommandContext(context.Background(), "go", "build", "-o", path, "./cmd/controlplane-manager")
	cmd.Dir = envtest.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/controlplane-manager failed: %w\n%s", err, out)
	}
	return path, nil
})

// managerProcess runs the control-plane manager binary against the test API server.
type managerProcess struct {
	t          testing.TB
	binary     string
	kubeconfig string
	certDir    string
	logs       string
	started    int
}

// start runs a new manager process; it returns at once.
func (p *managerProcess) start() *exec.Cmd {
	p.started++
	log, err := os.Create(filepath.Join(p.logs, fmt.Sprintf("manager-%02d.log", p.started)))
	if err != nil {
		p.t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	cmd := exec.CommandContext(context.Background(), p.binary,
		"--kubeconfig="+p.kubeconfig,
		"--health-addr=127.0.0.1:"+strconv.Itoa(freeTCPPort(p.t)),
		"--diagnostics-address=127.0.0.1:"+strconv.Itoa(freeTCPPort(p.t)),
		"--insecure-diagnostics",
		"--webhook-port="+strconv.Itoa(freeTCPPort(p.t)),
		"--webhook-cert-dir="+p.certDir,
		"--runtime-extension-port="+strconv.Itoa(freeTCPPort(p.t)),
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { kill(cmd) })
	return cmd
}

// kill sends SIGKILL to the process and reaps it.
func kill(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

func freeTCPPort(tb testing.TB) int {
	tb.Helper()
	l, err := (&net.ListenConfig{}).Listen(tb.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// TestManagerSurvivesSIGKILL runs the control-plane manager as its own process, as in
// production, and kills it with SIGKILL at random moments, 30 times, while it creates a
// three-machine control plane, scales it to five, and rolls it out at three with a new
// config. A new process starts after each kill. At the end every node reports one and the
// same etcd cluster (never two bootstraps), etcd's members are exactly the Machines, no
// TalosConfig or infrastructure machine is left without its Machine, and every Machine is up
// to date. The seed is logged; TALON_KILL_SEED replays it.
func TestManagerSurvivesSIGKILL(t *testing.T) {
	surviveKills(t, 30)
}

// BenchmarkManagerSIGKILL is TestManagerSurvivesSIGKILL with 90 kills; it reports how long
// the control plane took to converge after the last one (s-converge).
func BenchmarkManagerSIGKILL(b *testing.B) {
	for b.Loop() {
		start := surviveKills(b, 90)
		b.ReportMetric(time.Since(start).Seconds(), "s-converge")
	}
}

// killHarness prepares a test that kills the control-plane manager: a random source from the
// logged seed (TALON_KILL_SEED replays it; stream tells tests apart), everything but the
// control-plane provider running in this process throughout, and the manager binary ready
// to start as a process.
func killHarness(tb testing.TB, env *envtest.Environment, infra *simInfra, stream uint64) (*rand.Rand, *managerProcess) {
	tb.Helper()
	g := NewWithT(tb)
	binary, err := controlPlaneManagerBinary()
	g.Expect(err).NotTo(HaveOccurred())
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(killSeedEnv); s != "" {
		seed, err = strconv.ParseUint(s, 10, 64)
		g.Expect(err).NotTo(HaveOccurred())
	}
	tb.Logf("Seed %d (replay with %s=%d)", seed, killSeedEnv, seed)
	env.StartManager(tb, envtest.ManagerOptions{
		CoreReconcilers: true,
		Setup: func(ctx context.Context, mgr ctrl.Manager) error {
			if err := startOthers(ctx, mgr, manager.NewOptions()); err != nil {
				return err
			}
			return infra.setup(ctx, mgr)
		},
	})
	kubeconfig, err := env.AdminKubeconfig("talon-controlplane-manager")
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfigPath := filepath.Join(tb.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kubeconfigPath, kubeconfig, 0o600)).To(Succeed())
	_, _, certDir := env.WebhookServing()
	return rand.New(rand.NewPCG(seed, stream)), //nolint:gosec // test timing, not security
		&managerProcess{t: tb, binary: binary, kubeconfig: kubeconfigPath, certDir: certDir, logs: tb.TempDir()}
}

// surviveKills runs the SIGKILL scenario, the given number of kills spread over create,
// scale and rollout; it returns when the last manager was started.
func surviveKills(tb testing.TB, kills int) (lastStart time.Time) {
	tb.Helper()
	t := tb
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.50.")
	rng, managers := killHarness(t, env, infra, 42)

	ns := env.NewNamespace(t, "restart")
	tcp := newCluster(t, env, infra, ns, "restart", 3)
	for i := range kills {
		switch i {
		case kills / 3:
			setReplicas(t, env, tcp, 5)
		case 2 * kills / 3:
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
			before := tcp.DeepCopy()
			tcp.Spec.Replicas = ptr.To(int32(3))
			tcp.Spec.ControlPlaneConfig.StrategicPatches = []string{"apiVersion: v1alpha1\nkind: SysctlConfig\nparams:\n  vm.max_map_count: \"262144\"\n"}
			g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(before))).To(Succeed())
		}
		cmd := managers.start()
		time.Sleep(time.Duration(500+rng.IntN(3500)) * time.Millisecond)
		kill(cmd)
	}
	t.Logf("%d SIGKILLs done; the last manager runs to the end (logs in %s)", kills, managers.logs)
	managers.start()
	lastStart = time.Now()
	waitForMembership(t, env, tcp, 3)

	g.Eventually(func(g Gomega) {
		machines, err := controlPlaneMachines(ctx, env, tcp)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(machines).To(HaveLen(3))
		var first map[uint64]string
		for _, m := range machines {
			members := memberIDs(ctx, g, env, tcp, &m)
			if first == nil {
				first = members
			}
			g.Expect(members).To(Equal(first), "every node reports the same single etcd cluster")
		}
		configs := &bootstrapv1.TalosConfigList{}
		g.Expect(env.Client.List(ctx, configs, client.InNamespace(ns))).To(Succeed())
		g.Expect(configs.Items).To(HaveLen(3), "one TalosConfig per Machine")
		infraMachines := &infrav1.TalosDockerMachineList{}
		g.Expect(env.Client.List(ctx, infraMachines, client.InNamespace(ns))).To(Succeed())
		g.Expect(infraMachines.Items).To(HaveLen(3), "one infrastructure machine per Machine")
		all := &clusterv1.MachineList{}
		g.Expect(env.Client.List(ctx, all, client.InNamespace(ns))).To(Succeed())
		g.Expect(all.Items).To(HaveLen(3))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(tcp.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(3)), "the rollout finished")
		g.Expect(tcp.Annotations).To(HaveKey(controlplanev1.BootstrapMachineAnnotation))
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(infra.bootstraps()).To(Equal(1), "etcd was bootstrapped exactly once, on one node")
	return lastStart
}

// TestInPlaceUpdateSurvivesSIGKILL runs the control-plane manager as its own process and
// kills it with SIGKILL at random moments while it updates a three-node control plane in
// place to a new Kubernetes version and a config that needs a reboot. After the last
// manager has finished, every node rebooted exactly once (none updated twice, none skipped),
// runs the new version and config, and no Machine was replaced. The seed is logged;
// TALON_KILL_SEED replays it.
func TestInPlaceUpdateSurvivesSIGKILL(t *testing.T) {
	_, err := envtest.Binary(filepath.Join("v1.37", "kube-apiserver"))
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.58.")
	rng, managers := killHarness(t, env, infra, 43)

	ns := env.NewNamespace(t, "inplace-kill")
	tcp := newCluster(t, env, infra, ns, "inplace-kill", 3, func(tcp *controlplanev1.TalosControlPlane) {
		tcp.Spec.Rollout.Strategy.Type = controlplanev1.InPlaceStrategyType
	})
	first := managers.start()
	waitForMembership(t, env, tcp, 3)
	kill(first)
	machines, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	boots := map[string]int{}
	for _, m := range machines {
		boots[m.Name] = infra.node(m.Spec.InfrastructureRef.Name).Boots()
	}

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
	before := tcp.DeepCopy()
	tcp.Spec.Version = nextKubernetesVersion
	tcp.Spec.ControlPlaneConfig.StrategicPatches = []string{"machine:\n  env:\n    TALON_KILL_TEST: rebooted\n"}
	g.Expect(env.Client.Patch(ctx, tcp, client.MergeFrom(before))).To(Succeed())
	const kills = 12
	for range kills {
		cmd := managers.start()
		time.Sleep(time.Duration(2000+rng.IntN(6000)) * time.Millisecond)
		kill(cmd)
	}
	t.Logf("%d SIGKILLs done during the update; the last manager runs to the end (logs in %s)", kills, managers.logs)
	managers.start()
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tcp), tcp)).To(Succeed())
		g.Expect(tcp.Status.ObservedGeneration).To(Equal(tcp.Generation))
		g.Expect(tcp.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(3)), "%s", conditions.GetMessage(tcp, controlplanev1.RollingOutCondition))
	}, 8*time.Minute, time.Second).Should(Succeed())
	waitForMembership(t, env, tcp, 3)

	now, err := controlPlaneMachines(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now).To(HaveLen(3))
	views, err := viewNodes(ctx, env, tcp)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range now {
		g.Expect(boots).To(HaveKey(m.Name), "Machine %s is one of the original three", m.Name)
		g.Expect(infra.node(m.Spec.InfrastructureRef.Name).Boots()-boots[m.Name]).To(Equal(1), "the node of %s rebooted exactly once", m.Name)
		g.Expect(m.Spec.Version).To(Equal(nextKubernetesVersion))
		g.Expect(views[m.Name].apiServer).To(Equal(nextKubernetesVersion), "kube-apiserver of %s", m.Name)
		g.Expect(views[m.Name].config).To(ContainSubstring("TALON_KILL_TEST"), "node of %s runs the new config", m.Name)
	}
}
