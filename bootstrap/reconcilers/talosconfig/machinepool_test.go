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
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/test/envtest"
)

// TestMachinePoolOwner renders the one config a MachinePool's nodes share. Cluster API's
// MachinePool reconciler sets the owner reference; the test sets it as that reconciler would.
func TestMachinePoolOwner(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	startBootstrapProvider(t, env)
	ns := env.NewNamespace(t, "pool")
	ctx := t.Context()
	cluster := newProvisionedCluster(t, env, ns, "pool", nil)

	pool := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-workers", Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name}},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: cluster.Name,
			Replicas:    ptr.To[int32](3),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: cluster.Name,
				Version:     "v1.35.1",
				Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: bootstrapv1.GroupVersion.Group, Kind: "TalosConfig", Name: "pool-workers"}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerMachine", Name: "pool-workers"},
			}},
		},
	}
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	config := &bootstrapv1.TalosConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-workers", Namespace: ns,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: pool.Name, UID: pool.UID}}},
		Spec: bootstrapv1.TalosConfigSpec{
			GenerateType: bootstrapv1.GenerateTypeWorker,
			Hostname:     bootstrapv1.HostnameSpec{Source: bootstrapv1.HostnameSourceMachineName},
		},
	}
	g.Expect(env.Client.Create(ctx, config)).To(Succeed())

	_, cfg := dataSecret(t, env, config)
	g.Expect(cfg.Machine().Type().String()).To(Equal("worker"))
	g.Expect(cfg.K8sKubeletConfig().Image()).To(HaveSuffix(":v1.35.1"), "the pool's Kubernetes version")
	g.Expect(cfg.NetworkHostnameConfig().Hostname()).To(BeEmpty(), "nodes of a pool cannot share one hostname")
}
