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

package talosconfig_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/setup"
	"github.com/talon-capi/talon/internal/manager"
	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(funcr.New(managerLog.write, funcr.Options{Verbosity: 5}))
	os.Exit(envtest.Run(m))
}

// managerLog keeps what the managers of this package's tests log while a test records it.
var managerLog logRecorder

type logRecorder struct {
	mu        sync.Mutex
	recording bool
	lines     []string
}

func (r *logRecorder) write(prefix, args string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recording {
		r.lines = append(r.lines, prefix+" "+args)
	}
}

// record keeps the managers' log lines until the test ends, and returns them so far.
func (r *logRecorder) record(t *testing.T) func() []string {
	t.Helper()
	r.mu.Lock()
	r.recording, r.lines = true, nil
	r.mu.Unlock()
	t.Cleanup(func() {
		r.mu.Lock()
		r.recording, r.lines = false, nil
		r.mu.Unlock()
	})
	return func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Clone(r.lines)
	}
}

// startBootstrapProvider runs Cluster API's core reconcilers and the bootstrap provider's
// reconcilers and webhooks, wired as the bootstrap manager wires them.
func startBootstrapProvider(t *testing.T, env *envtest.Environment, mutate ...func(*manager.Options)) {
	t.Helper()
	env.StartManager(t, envtest.ManagerOptions{CoreReconcilers: true, Setup: bootstrapReconcilers(mutate...)})
}

// bootstrapReconcilers sets the bootstrap provider's reconcilers up, with options changed by
// mutate.
func bootstrapReconcilers(mutate ...func(*manager.Options)) func(ctx context.Context, mgr ctrl.Manager) error {
	opts := manager.NewOptions()
	for _, m := range mutate {
		m(opts)
	}
	return func(ctx context.Context, mgr ctrl.Manager) error {
		return setup.Reconcilers(ctx, mgr, opts)
	}
}

// newProvisionedCluster creates a Cluster whose TalosDockerCluster is provisioned with an
// endpoint, as the infrastructure provider would leave it.
func newProvisionedCluster(t *testing.T, env *envtest.Environment, ns, name string, mutate func(*clusterv1.Cluster)) *clusterv1.Cluster {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	infra := &infrav1.TalosDockerCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       infrav1.TalosDockerClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "172.20.0.10", Port: 6443}},
	}
	g.Expect(env.Client.Create(ctx, infra)).To(Succeed())
	infra.Status.Initialization.Provisioned = ptr.To(true)
	g.Expect(env.Client.Status().Update(ctx, infra)).To(Succeed())

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerCluster", Name: name,
			},
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:          clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
				Services:      clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
				ServiceDomain: "talon.local",
			},
		},
	}
	if mutate != nil {
		mutate(cluster)
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	return cluster
}

// newMachine creates a Machine of cluster with its TalosConfig and TalosDockerMachine.
func newMachine(t *testing.T, env *envtest.Environment, cluster *clusterv1.Cluster, name string, spec bootstrapv1.TalosConfigSpec) *bootstrapv1.TalosConfig {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	config := &bootstrapv1.TalosConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name}},
		Spec: spec,
	}
	g.Expect(env.Client.Create(ctx, config)).To(Succeed())
	infra := &infrav1.TalosDockerMachine{ObjectMeta: metav1.ObjectMeta{Name: name + "-infra", Namespace: cluster.Namespace}}
	g.Expect(env.Client.Create(ctx, infra)).To(Succeed())
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
	if spec.GenerateType == bootstrapv1.GenerateTypeControlPlane {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster.Name,
			Version:     "v1.36.3",
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "TalosConfig", Name: name,
			}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerMachine", Name: infra.Name,
			},
		},
	}
	g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
	return config
}

// dataSecret waits for the data Secret of config and returns the machine config in it.
func dataSecret(t *testing.T, env *envtest.Environment, config *bootstrapv1.TalosConfig) (*corev1.Secret, talosconfig.Provider) {
	t.Helper()
	g := NewWithT(t)
	s := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(config), config)).To(Succeed())
		g.Expect(config.Status.DataSecretName).NotTo(BeNil(), "conditions: %v", config.Status.Conditions)
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: config.Namespace, Name: *config.Status.DataSecretName}, s)).To(Succeed())
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
	cfg, err := configloader.NewFromBytes(s.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	return s, cfg
}

// condition waits for config's DataSecretAvailable condition to have reason, and returns it.
func condition(t *testing.T, env *envtest.Environment, config *bootstrapv1.TalosConfig, reason string) metav1.Condition {
	t.Helper()
	var found metav1.Condition
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(config), config)).To(Succeed())
		for _, c := range config.Status.Conditions {
			if c.Type == bootstrapv1.TalosConfigDataSecretAvailableCondition {
				found = c
			}
		}
		g.Expect(found.Reason).To(Equal(reason), fmt.Sprintf("condition: %+v", found))
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
	return found
}

// prefixStrings is prefixes in their text form, as the config has them.
func prefixStrings(prefixes []netip.Prefix) []string {
	out := make([]string, 0, len(prefixes))
	for _, prefix := range prefixes {
		out = append(out, prefix.String())
	}
	return out
}
