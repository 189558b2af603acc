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

package quickstart

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/test/envtest"
)

// fixtureScheme knows the fixtures' types and CRDs: Describe finds the API version of a referenced
// object from its CRD's contract label, as Cluster API does.
var fixtureScheme = envtest.NewScheme()

func newCondition(conditionType string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: conditionType, Status: status, Reason: reason, Message: message}
}

func contractCRD(name, version string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"cluster.x-k8s.io/" + clusterv1.GroupVersion.Version: version},
	}}
}

func readyMachine(name, deployment string) *clusterv1.Machine {
	labels := map[string]string{clusterv1.ClusterNameLabel: "demo"}
	if deployment == "" {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	} else {
		labels[clusterv1.MachineDeploymentNameLabel] = deployment
	}
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
		Spec:       clusterv1.MachineSpec{ClusterName: "demo", Version: "v1.36.3"},
		Status: clusterv1.MachineStatus{
			Phase:      string(clusterv1.MachinePhaseRunning),
			NodeRef:    clusterv1.MachineNodeReference{Name: name},
			Addresses:  clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: "172.18.0." + name[len(name)-1:]}},
			Conditions: []metav1.Condition{newCondition(clusterv1.MachineReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason, "")},
		},
	}
}

// readyCluster is a cluster of one control-plane Machine and a MachineDeployment of two
// workers, every object ready.
func readyCluster() []client.Object {
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "172.18.0.2", Port: 6443},
			ControlPlaneRef:      clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "TalosControlPlane", Name: "demo-control-plane"},
			InfrastructureRef:    clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TalosDockerCluster", Name: "demo"},
		},
		Status: clusterv1.ClusterStatus{
			Initialization: clusterv1.ClusterInitializationStatus{InfrastructureProvisioned: ptr.To(true), ControlPlaneInitialized: ptr.To(true)},
			Conditions: []metav1.Condition{
				newCondition(clusterv1.ClusterAvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, ""),
				newCondition(clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason, ""),
				newCondition(clusterv1.ClusterControlPlaneInitializedCondition, metav1.ConditionTrue, clusterv1.ClusterControlPlaneInitializedReason, ""),
				newCondition(clusterv1.ClusterControlPlaneAvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, ""),
				newCondition(clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, ""),
			},
		},
	}
	tcp := &controlplanev1.TalosControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-control-plane"},
		Spec:       controlplanev1.TalosControlPlaneSpec{Replicas: ptr.To[int32](1), Version: "v1.36.3"},
		Status: controlplanev1.TalosControlPlaneStatus{
			Replicas: ptr.To[int32](1), ReadyReplicas: ptr.To[int32](1),
			Initialization: controlplanev1.TalosControlPlaneInitializationStatus{ControlPlaneInitialized: ptr.To(true)},
			Conditions:     []metav1.Condition{newCondition(controlplanev1.AvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, "")},
		},
	}
	infra := &infrav1.TalosDockerCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"},
		Status: infrav1.TalosDockerClusterStatus{
			Initialization: infrav1.ClusterInitializationStatus{Provisioned: ptr.To(true)},
			Conditions:     []metav1.Condition{newCondition(infrav1.ReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason, "")},
		},
	}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-md-0", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "demo", Replicas: ptr.To[int32](2),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: "demo", Version: "v1.36.3"}},
		},
		Status: clusterv1.MachineDeploymentStatus{
			Replicas: ptr.To[int32](2), ReadyReplicas: ptr.To[int32](2),
			Conditions: []metav1.Condition{newCondition(clusterv1.MachineDeploymentAvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, "")},
		},
	}
	// A Machine of another Cluster in the namespace stays out of the tree.
	stranger := readyMachine("other-md-0-xxxxx", "other-md-0")
	stranger.Labels[clusterv1.ClusterNameLabel] = "other"
	return []client.Object{
		contractCRD("taloscontrolplanes.controlplane.cluster.x-k8s.io", "v1beta1"),
		contractCRD("talosdockerclusters.infrastructure.cluster.x-k8s.io", "v1alpha1"),
		cluster, tcp, infra, md,
		readyMachine("demo-control-plane-abcd4", ""),
		readyMachine("demo-md-0-bbbb6", "demo-md-0"),
		readyMachine("demo-md-0-aaaa5", "demo-md-0"),
		stranger,
	}
}

// comingUp is readyCluster while its workers come up: one worker is still provisioning
// and the Machine it replaces is being drained.
func comingUp() []client.Object {
	objs := readyCluster()
	for _, o := range objs {
		switch o := o.(type) {
		case *clusterv1.Cluster:
			o.Status.Conditions[0] = newCondition(clusterv1.ClusterAvailableCondition, metav1.ConditionFalse, clusterv1.NotAvailableReason,
				"* WorkersAvailable: 1 available replicas, at least 2 required")
			o.Status.Conditions[4] = newCondition(clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionFalse, clusterv1.NotAvailableReason,
				"* MachineDeployment demo-md-0: 1 available replicas, at least 2 required")
		case *clusterv1.MachineDeployment:
			o.Status.ReadyReplicas = ptr.To[int32](1)
			o.Status.Conditions[0] = newCondition(clusterv1.MachineDeploymentAvailableCondition, metav1.ConditionFalse, clusterv1.NotAvailableReason,
				"1 available replicas, at least 2 required")
		case *clusterv1.Machine:
			if o.Name == "demo-md-0-bbbb6" {
				o.Status = clusterv1.MachineStatus{
					Phase: string(clusterv1.MachinePhaseProvisioning),
					Conditions: []metav1.Condition{
						newCondition(clusterv1.MachineReadyCondition, metav1.ConditionFalse, clusterv1.NotReadyReason, "* InfrastructureReady: waiting"),
						newCondition(clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason, ""),
						newCondition(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, clusterv1.NotReadyReason,
							"* ContainerProvisioned: Waiting for the container\n* NodeProviderIDSet: no provider ID yet"),
					},
				}
			}
		}
	}
	draining := readyMachine("demo-md-0-old00", "demo-md-0")
	draining.Finalizers = []string{clusterv1.MachineFinalizer}
	draining.DeletionTimestamp = ptr.To(metav1.Now())
	draining.Status.Conditions = append(draining.Status.Conditions,
		newCondition(clusterv1.MachineDeletingCondition, metav1.ConditionTrue, clusterv1.MachineDeletingDrainingNodeReason, "Drain not completed yet:\n* Pod default/web: deletionTimestamp set"))
	return append(objs, draining)
}

func describeObjects(t *testing.T, objs ...client.Object) *Tree {
	t.Helper()
	return describeWith(t, fake.NewClientBuilder().WithScheme(fixtureScheme).WithObjects(objs...).Build())
}

func describeWith(t *testing.T, c client.Reader) *Tree {
	t.Helper()
	tree, err := Describe(t.Context(), c, "default", "demo")
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestDescribe draws a cluster whose workers come up, then the same cluster once they are up.
func TestDescribe(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithScheme(fixtureScheme).WithObjects(comingUp()...).Build()
	tree := describeWith(t, c)
	g.Expect(strings.Split(strings.TrimSuffix(tree.String(), "\n"), "\n")).To(Equal([]string{
		"Cluster/demo                                           WaitingForWorkers  MachineDeployment demo-md-0: 1 available repl…",
		"├─ClusterInfrastructure - TalosDockerCluster/demo      Ready",
		"├─ControlPlane - TalosControlPlane/demo-control-plane  1/1 ready  v1.36.3",
		"│ └─Machine/demo-control-plane-abcd4                   Running  Ready  node demo-control-plane-abcd4",
		"└─Workers",
		"  └─MachineDeployment/demo-md-0                        1/2 ready  v1.36.3  1 available replicas, at least 2 required",
		"    ├─Machine/demo-md-0-aaaa5                          Running  Ready  node demo-md-0-aaaa5",
		"    ├─Machine/demo-md-0-bbbb6                          Provisioning  NotReady: ContainerProvisioned: Waiting for the co…",
		"    └─Machine/demo-md-0-old00                          Deleting  Drain not completed yet: Pod default/web: deletionTime…",
	}))
	g.Expect(tree.Ready()).To(BeFalse())
	g.Expect(tree.Problems()).To(Equal([]string{
		"Cluster/demo: WorkersAvailable False (NotAvailable): MachineDeployment demo-md-0: 1 available replicas, at least 2 required",
		"MachineDeployment/demo-md-0: Available False (NotAvailable): 1 available replicas, at least 2 required",
		"Machine/demo-md-0-bbbb6: InfrastructureReady False (NotReady): ContainerProvisioned: Waiting for the container; NodeProviderIDSet: no provider ID yet",
		"Machine/demo-md-0-old00: Deleting True (DrainingNode): Drain not completed yet: Pod default/web: deletionTimestamp set",
	}))
	for _, line := range strings.Split(tree.String(), "\n") {
		g.Expect(utf8.RuneCountInString(line)).To(BeNumerically("<=", 120), line)
	}

	t.Log("The new worker runs, the old one is gone")
	for _, o := range readyCluster() {
		current := o.DeepCopyObject().(client.Object)
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(o), current); err == nil {
			o.SetResourceVersion(current.GetResourceVersion())
			g.Expect(c.Update(t.Context(), o)).To(Succeed())
		}
	}
	old := &clusterv1.Machine{}
	g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "demo-md-0-old00"}, old)).To(Succeed())
	old.Finalizers = nil
	g.Expect(c.Update(t.Context(), old)).To(Succeed())
	tree = describeWith(t, c)
	g.Expect(tree.Ready()).To(BeTrue())
	g.Expect(tree.Problems()).To(BeEmpty())
	g.Expect(tree.String()).To(HavePrefix("Cluster/demo                                           Ready\n"))
	g.Expect(tree.String()).To(ContainSubstring("2/2 ready"))
}

// TestReady: one thing not ready keeps the Cluster from being ready, and Problems says which.
func TestReady(t *testing.T) {
	notInitialized := bothChanges(
		changeFixture("", func(c *clusterv1.Cluster) { c.Status.Initialization.ControlPlaneInitialized = nil }),
		changeFixture("", func(tcp *controlplanev1.TalosControlPlane) { tcp.Status.Initialization.ControlPlaneInitialized = nil }))
	tests := []struct {
		name     string
		modify   func(objs []client.Object) []client.Object
		problems []string
	}{
		{
			name:   "ready",
			modify: func(objs []client.Object) []client.Object { return objs },
		},
		{
			name: "Cluster not Available",
			modify: changeFixture("", func(c *clusterv1.Cluster) {
				c.Status.Conditions[0] = newCondition(clusterv1.ClusterAvailableCondition, metav1.ConditionFalse, clusterv1.NotAvailableReason, "not yet")
			}),
			problems: []string{"Cluster/demo: Available False (NotAvailable): not yet"},
		},
		{
			name: "control plane not initialized",
			modify: bothChanges(notInitialized, bothChanges(
				changeFixture("", func(c *clusterv1.Cluster) {
					c.Status.Conditions[0] = newCondition(clusterv1.ClusterAvailableCondition, metav1.ConditionFalse, clusterv1.NotAvailableReason, "")
					c.Status.Conditions[2] = newCondition(clusterv1.ClusterControlPlaneInitializedCondition, metav1.ConditionFalse,
						clusterv1.ClusterControlPlaneNotInitializedReason, "Control plane not yet initialized")
				}),
				changeFixture("", func(tcp *controlplanev1.TalosControlPlane) {
					tcp.Status.Conditions = []metav1.Condition{
						newCondition(controlplanev1.AvailableCondition, metav1.ConditionFalse, clusterv1.NotAvailableReason, "Waiting for initialization"),
						newCondition(controlplanev1.InitializedCondition, metav1.ConditionFalse, "WaitingForTalosAPI",
							"Waiting for the Talos API of Machine demo-control-plane-abcd4"),
					}
				}))),
			problems: []string{
				"Cluster/demo: ControlPlaneInitialized False (NotInitialized): Control plane not yet initialized",
				"TalosControlPlane/demo-control-plane: Initialized False (WaitingForTalosAPI): Waiting for the Talos API of Machine demo-control-plane-abcd4",
			},
		},
		{
			name:     "Cluster Available before the control plane says it is initialized",
			modify:   notInitialized,
			problems: []string{"Cluster/demo: the control plane is not initialized yet"},
		},
		{
			name:     "Machine without a Node",
			modify:   changeFixture("demo-md-0-aaaa5", func(m *clusterv1.Machine) { m.Status.NodeRef = clusterv1.MachineNodeReference{} }),
			problems: []string{"Machine/demo-md-0-aaaa5: Ready but Running, node -"},
		},
		{
			name: "Machine not Ready",
			modify: changeFixture("demo-control-plane-abcd4", func(m *clusterv1.Machine) {
				m.Status.Conditions = []metav1.Condition{
					newCondition(clusterv1.MachineReadyCondition, metav1.ConditionFalse, clusterv1.NotReadyReason, "* NodeHealthy: Node not ready"),
					newCondition(clusterv1.MachineNodeHealthyCondition, metav1.ConditionFalse, "NodeNotReady", "Node not ready"),
				}
			}),
			problems: []string{"Machine/demo-control-plane-abcd4: NodeHealthy False (NodeNotReady): Node not ready"},
		},
		{
			name: "control plane short of Machines",
			modify: changeFixture("", func(tcp *controlplanev1.TalosControlPlane) {
				tcp.Spec.Replicas = ptr.To[int32](3)
				tcp.Status.Conditions = append(tcp.Status.Conditions, newCondition(controlplanev1.ScalingUpCondition, metav1.ConditionTrue,
					"ScalingUp", "Scaling up from 1 to 3 replicas is blocked: etcd member demo-control-plane-abcd4 is a learner"))
			}),
			problems: []string{"TalosControlPlane/demo-control-plane: ScalingUp True (ScalingUp): " +
				"Scaling up from 1 to 3 replicas is blocked: etcd member demo-control-plane-abcd4 is a learner"},
		},
		{
			name:     "MachineDeployment short of a Machine",
			modify:   changeFixture("", func(md *clusterv1.MachineDeployment) { md.Spec.Replicas = ptr.To[int32](3) }),
			problems: []string{"MachineDeployment/demo-md-0: has 2 Machines, wants 3"},
		},
		{
			name: "control plane missing",
			modify: func(objs []client.Object) []client.Object {
				return slices.DeleteFunc(objs, func(o client.Object) bool { _, ok := o.(*controlplanev1.TalosControlPlane); return ok })
			},
			problems: []string{"TalosControlPlane/demo-control-plane: not found"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tree := describeObjects(t, tt.modify(readyCluster())...)
			g.Expect(tree.Ready()).To(Equal(tt.problems == nil))
			g.Expect(tree.Problems()).To(Equal(tt.problems))
		})
	}
}

// changeFixture is a change to the objects of type T in a fixture (only the one named name, unless
// name is empty).
func changeFixture[T client.Object](name string, fn func(T)) func([]client.Object) []client.Object {
	return func(objs []client.Object) []client.Object {
		for _, o := range objs {
			if o, ok := o.(T); ok && (name == "" || o.GetName() == name) {
				fn(o)
			}
		}
		return objs
	}
}

// bothChanges makes one change of two.
func bothChanges(a, b func([]client.Object) []client.Object) func([]client.Object) []client.Object {
	return func(objs []client.Object) []client.Object { return b(a(objs)) }
}
