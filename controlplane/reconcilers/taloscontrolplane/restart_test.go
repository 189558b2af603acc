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
	"math/rand/v2"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	controlplanesetup "github.com/talon-capi/talon/controlplane/setup"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/test/envtest"
)

// TestManagerRestarts stops the control-plane manager at random moments, 20 times, while it
// creates a three-machine control plane and scales it to five: it never bootstraps twice
// (every node reports the same single etcd cluster), leaves no extra Machine, TalosConfig
// or infrastructure machine behind, and converges.
func TestManagerRestarts(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	infra := newSimInfra(t, "127.0.50.")
	// Everything but the control-plane reconciler runs throughout.
	env.StartManager(t, envtest.ManagerOptions{
		CoreReconcilers: true,
		Setup: func(ctx context.Context, mgr ctrl.Manager) error {
			if err := startOthers(ctx, mgr); err != nil {
				return err
			}
			return infra.setup(ctx, mgr)
		},
	})
	controlPlaneManager := func() *envtest.Manager {
		return env.StartManager(t, envtest.ManagerOptions{NoWebhooks: true, Setup: func(ctx context.Context, mgr ctrl.Manager) error {
			return controlplanesetup.Reconcilers(ctx, mgr, manager.NewOptions())
		}})
	}
	ns := env.NewNamespace(t, "restart")
	tcp := newCluster(t, env, infra, ns, "restart", 3)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42)) //nolint:gosec // test timing, not security
	for i := range 20 {
		if i == 10 {
			setReplicas(t, env, tcp, 5)
		}
		m := controlPlaneManager()
		time.Sleep(time.Duration(200+rng.IntN(2800)) * time.Millisecond)
		m.Stop()
	}
	t.Log("20 restarts done; the last manager runs to the end")
	controlPlaneManager()
	waitForMembership(t, env, tcp, 5)

	g.Eventually(func(g Gomega) {
		configs := &bootstrapv1.TalosConfigList{}
		g.Expect(env.Client.List(ctx, configs, client.InNamespace(ns))).To(Succeed())
		g.Expect(configs.Items).To(HaveLen(5), "one TalosConfig per Machine")
		infraMachines := &infrav1.TalosDockerMachineList{}
		g.Expect(env.Client.List(ctx, infraMachines, client.InNamespace(ns))).To(Succeed())
		g.Expect(infraMachines.Items).To(HaveLen(5), "one infrastructure machine per Machine")
		machines := &clusterv1.MachineList{}
		g.Expect(env.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(5))
	}, 2*time.Minute, time.Second).Should(Succeed())
}
