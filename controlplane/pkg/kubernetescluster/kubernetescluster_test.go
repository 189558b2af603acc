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

package kubernetescluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
)

// TestResolveVersion: a patch is used as written; a minor resolves to the newest patch of it
// the class lists, else to the tested one; a minor with none is an error that says what to
// write.
func TestResolveVersion(t *testing.T) {
	class := []string{"v1.35.4", "v1.36.1", "v1.36.10", "v1.36.2"}
	for _, c := range []struct {
		requested string
		class     []string
		want      string
		err       string
	}{
		{"1.36.3", nil, "v1.36.3", ""},
		{"v1.36.3", class, "v1.36.3", ""},
		{"1.36", nil, "v1.36.3", ""},
		{"v1.37", nil, "v1.37.2", ""},
		{"1.36", class, "v1.36.10", ""},
		{"1.37", class, "", "no patch version of Kubernetes v1.37 in the ClusterClass's spec.kubernetesVersions (v1.35.4, v1.36.1, v1.36.10, v1.36.2): name a patch version, such as 1.37.0"},
		{"1.33", nil, "", "no patch version of Kubernetes v1.33 in the versions Talon is tested with"},
		{"1.36.x", nil, "", `"1.36.x" is not a Kubernetes version`},
	} {
		got, err := ResolveVersion(c.requested, c.class)
		if c.err != "" {
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(c.err)), c.requested)
			continue
		}
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), c.requested)
		NewWithT(t).Expect(got).To(Equal(c.want), c.requested)
	}
}

// TestSetStatus: a cluster is Provisioning until every group is ready at the version and
// the Cluster is Available, then Running; a change after that is Updating, not
// Provisioning; lastUpdated moves only when the status changes.
func TestSetStatus(t *testing.T) {
	g := NewWithT(t)
	kc := &vitiv1.KubernetesCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 2},
		Spec: vitiv1.KubernetesClusterSpec{Topology: vitiv1.Topology{Version: "1.36", ControlPlane: vitiv1.ControlPlane{Replicas: 3},
			Workers: vitiv1.Workers{NodePools: []vitiv1.NodePool{{Name: "a", Replicas: 2}}}}},
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	cluster.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}
	cluster.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{Replicas: ptr.To[int32](3), ReadyReplicas: ptr.To[int32](2), UpToDateReplicas: ptr.To[int32](3),
		Versions: []clusterv1.StatusVersion{{Version: "v1.36.3", Replicas: 3}}}
	md := clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "c-a-x", Labels: map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "a"}}}
	md.Status = clusterv1.MachineDeploymentStatus{Replicas: ptr.To[int32](2), ReadyReplicas: ptr.To[int32](2), UpToDateReplicas: ptr.To[int32](2)}
	machine := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: "c-a-x"}}}
	machine.Status.NodeRef = clusterv1.MachineNodeReference{Name: "node-a"}
	o := Observed{Cluster: cluster, MachineDeployments: []clusterv1.MachineDeployment{md}, Machines: []clusterv1.Machine{machine}, Version: "v1.36.3"}
	t1 := metav1.NewTime(metav1.Now().Add(-time.Minute))

	SetStatus(kc, o, t1, "test")
	g.Expect(kc.Status.Phase).To(Equal(vitiv1.PhaseProvisioning))
	g.Expect(kc.Status.Message).To(ContainSubstring("control plane: 2 of 3 nodes ready, 3 up to date, 3 in all"))
	g.Expect(kc.Status.Message).To(ContainSubstring("Cluster c is not Available yet"))
	g.Expect(kc.Status.State.Cluster.NodePools).To(ConsistOf(vitiv1.NodeGroupStatus{Name: "a", Status: vitiv1.StatusOK, Scale: 2, Nodes: []string{"node-a"}}))
	g.Expect(kc.Status.State.Endpoints).To(ConsistOf(vitiv1.Endpoint{Name: "kubernetes", Address: "https://10.0.0.1:6443"}))
	g.Expect(kc.Status.ObservedGeneration).To(BeEquivalentTo(2))

	cluster.Status.ControlPlane.ReadyReplicas = ptr.To[int32](3)
	cluster.Status.Conditions = []metav1.Condition{{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue}}
	t2 := metav1.Now()
	SetStatus(kc, o, t2, "test")
	g.Expect(kc.Status.Phase).To(Equal(vitiv1.PhaseRunning))
	g.Expect(kc.Status.Message).To(Equal("Kubernetes v1.36.3 on 3 control-plane and 2 worker nodes"))
	g.Expect(meta.IsStatusConditionTrue(kc.Status.Conditions, vitiv1.ReadyCondition)).To(BeTrue())
	g.Expect(kc.Status.State.Versions).To(Equal([]vitiv1.Version{{Name: "kubernetes", Version: "v1.36.3"}}))
	g.Expect(kc.Status.State.LastUpdated).To(Equal(t2))

	SetStatus(kc, o, metav1.NewTime(t2.Add(time.Minute)), "test")
	g.Expect(kc.Status.State.LastUpdated).To(Equal(t2), "nothing changed")

	o.Version = "v1.37.2"
	SetStatus(kc, o, metav1.Now(), "test")
	g.Expect(kc.Status.Phase).To(Equal(vitiv1.PhaseUpdating), "a running cluster changing version updates")
	g.Expect(kc.Status.Message).To(ContainSubstring("the control plane runs v1.36.3, not yet v1.37.2"))
	g.Expect(meta.FindStatusCondition(kc.Status.Conditions, vitiv1.ReadyCondition).Reason).To(Equal(ReasonUpdating))

	o.Paused = true
	SetStatus(kc, o, metav1.Now(), "test")
	g.Expect(kc.Status.Message).To(ContainSubstring("Cluster c is paused (spec.paused): the KubernetesCluster's changes reach it once it is resumed"))
}

// TestSetVariables: the variables a KubernetesCluster asks for replace theirs, those it asked
// for before and no longer does go, and the others (the class's stored defaults) stay.
func TestSetVariables(t *testing.T) {
	g := NewWithT(t)
	v := func(name, value string) clusterv1.ClusterVariable {
		return clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: []byte(value)}}
	}
	c := &clusterv1.Cluster{}
	c.Spec.Topology.Variables = []clusterv1.ClusterVariable{v("cni", `"flannel"`), v("talosImage", `"a"`)}
	setVariables(c, []clusterv1.ClusterVariable{v("dockerSubnet", `"127.0.9.0/24"`), v("cni", `"none"`)})
	g.Expect(c.Spec.Topology.Variables).To(Equal([]clusterv1.ClusterVariable{v("cni", `"none"`), v("talosImage", `"a"`), v("dockerSubnet", `"127.0.9.0/24"`)}))
	g.Expect(c.Annotations).To(HaveKeyWithValue(vitiv1.ManagedVariablesAnnotation, "dockerSubnet,cni"))

	setVariables(c, []clusterv1.ClusterVariable{v("cni", `"none"`)})
	g.Expect(c.Spec.Topology.Variables).To(Equal([]clusterv1.ClusterVariable{v("cni", `"none"`), v("talosImage", `"a"`)}), "dockerSubnet is no longer asked for")
	setVariables(c, nil)
	g.Expect(c.Spec.Topology.Variables).To(Equal([]clusterv1.ClusterVariable{v("talosImage", `"a"`)}))
	g.Expect(c.Annotations).NotTo(HaveKey(vitiv1.ManagedVariablesAnnotation))
}
