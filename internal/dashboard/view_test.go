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

package dashboard

import (
	"cmp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func condition(t, status, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(now.Add(-90 * time.Second))}
}

// testCluster is a 3 + 2 cluster whose objects all say they are fine.
func testCluster() *snapshot {
	c := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"}}
	c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{Kind: "TalosControlPlane", Name: "prod-cp", APIGroup: controlplanev1.GroupVersion.Group}
	c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{Kind: "TalosDockerCluster", Name: "prod", APIGroup: "infrastructure.cluster.x-k8s.io"}
	c.Status.Phase = "Provisioned"
	c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	c.Status.Conditions = []metav1.Condition{
		condition(clusterv1.AvailableCondition, "True", "Available", ""),
		condition(clusterv1.InfrastructureReadyCondition, "True", "Ready", ""),
	}
	tcp := controlplanev1.TalosControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod-cp"}}
	tcp.Spec.Replicas = ptr.To[int32](3)
	tcp.Spec.Version = "v1.35.2"
	tcp.Spec.ControlPlaneConfig.TalosVersion = "v1.14"
	tcp.Status.Replicas, tcp.Status.ReadyReplicas, tcp.Status.UpToDateReplicas = ptr.To[int32](3), ptr.To[int32](3), ptr.To[int32](3)
	md := clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod-workers"}}
	md.Spec.ClusterName = "prod"
	md.Spec.Replicas = ptr.To[int32](2)
	md.Spec.Template.Spec.Version = "v1.35.2"
	md.Status.Replicas, md.Status.ReadyReplicas, md.Status.UpToDateReplicas = ptr.To[int32](2), ptr.To[int32](2), ptr.To[int32](2)
	s := &snapshot{Clusters: []clusterv1.Cluster{c}, ControlPlanes: []controlplanev1.TalosControlPlane{tcp}, MachineDeployments: []clusterv1.MachineDeployment{md}}
	for i, name := range []string{"prod-cp-a", "prod-cp-b", "prod-cp-c", "prod-workers-a", "prod-workers-b"} {
		m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}}
		m.Spec.ClusterName = "prod"
		m.Spec.Version = "v1.35.2"
		m.Status.Phase = "Running"
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: name}
		m.Status.NodeInfo = &corev1.NodeSystemInfo{OSImage: "Talos (v1.14.1)", KubeletVersion: "v1.35.2"}
		m.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: "10.5.0." + string(rune('2'+i))}}
		m.Status.Conditions = []metav1.Condition{condition(clusterv1.ReadyCondition, "True", "Ready", "")}
		if i < 3 {
			m.Labels[clusterv1.MachineControlPlaneLabel] = ""
			m.Annotations[controlplanev1.EtcdMemberIDAnnotation] = "abc" + name
			m.Status.Conditions = append(m.Status.Conditions, condition(controlplanev1.MachineEtcdMemberHealthyCondition, "True", "EtcdMemberHealthy", ""))
		} else {
			m.Labels[clusterv1.MachineDeploymentNameLabel] = "prod-workers"
		}
		s.Machines = append(s.Machines, m)
	}
	return s
}

func TestFleetStates(t *testing.T) {
	tests := []struct {
		name       string
		change     func(s *snapshot)
		wantState  string
		wantHeldBy string
		wantDoing  string
		// wantWorkers is "2/2" when empty.
		wantWorkers string
	}{
		{name: "all fine", change: func(*snapshot) {}, wantState: StateReady},
		{
			name: "a rollout of the control plane",
			change: func(s *snapshot) {
				s.ControlPlanes[0].Spec.Version = "v1.36.0"
				s.ControlPlanes[0].Status.UpToDateReplicas = ptr.To[int32](1)
			},
			wantState: StateUpdating, wantDoing: "control plane 1 of 3 at v1.36.0",
		},
		{
			name: "workers scaling",
			change: func(s *snapshot) {
				s.MachineDeployments[0].Spec.Replicas = ptr.To[int32](4)
			},
			wantState: StateUpdating, wantDoing: "prod-workers scaling 2 to 4", wantWorkers: "2/4",
		},
		{
			name: "a Machine's etcd member is unhealthy: the Machine's condition holds the cluster",
			change: func(s *snapshot) {
				s.Clusters[0].Status.Conditions[0] = condition(clusterv1.AvailableCondition, "False", "NotAvailable", "ControlPlaneAvailable: etcd is degraded")
				s.Machines[1].Status.Conditions[1] = condition(controlplanev1.MachineEtcdMemberHealthyCondition, "False", "EtcdMemberUnhealthy", "member abc is not answering")
			},
			wantState: StateDegraded, wantHeldBy: "Machine prod-cp-b EtcdMemberHealthy: member abc is not answering",
		},
		{
			name: "infrastructure not ready comes first",
			change: func(s *snapshot) {
				s.Clusters[0].Status.Initialization.ControlPlaneInitialized = nil
				s.Clusters[0].Status.Conditions = []metav1.Condition{
					condition(clusterv1.AvailableCondition, "False", "NotAvailable", ""),
					condition(clusterv1.InfrastructureReadyCondition, "False", "NotReady", "waiting for the load balancer"),
				}
				s.Machines[0].Status.Conditions[0] = condition(clusterv1.ReadyCondition, "False", "NotReady", "no node")
			},
			wantState: StateProvisioning, wantHeldBy: "Cluster prod InfrastructureReady: waiting for the load balancer",
		},
		{
			name: "deleting",
			change: func(s *snapshot) {
				s.Clusters[0].DeletionTimestamp = ptr.To(metav1.NewTime(now))
				s.Clusters[0].Status.Conditions = append(s.Clusters[0].Status.Conditions, condition(clusterv1.DeletingCondition, "True", "Deleting", "deleting 5 Machines"))
			},
			wantState: StateDeleting, wantHeldBy: "Cluster prod Deleting: deleting 5 Machines",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := testCluster()
			tt.change(s)
			f := s.fleet(now)
			g.Expect(f.Clusters).To(HaveLen(1))
			row := f.Clusters[0]
			g.Expect(row.State).To(Equal(tt.wantState))
			g.Expect(row.HeldBy).To(Equal(tt.wantHeldBy))
			g.Expect(row.Progress).To(Equal(tt.wantDoing))
			g.Expect(row.ControlPlaneReady).To(Equal("3/3"))
			g.Expect(row.WorkersReady).To(Equal(cmp.Or(tt.wantWorkers, "2/2")))
			g.Expect(row.Talos).To(Equal("v1.14.1"))
			for _, c := range f.Counts {
				if c.State == tt.wantState {
					g.Expect(c.Count).To(Equal(1))
				} else {
					g.Expect(c.Count).To(BeZero(), c.State)
				}
			}
		})
	}
}

func TestClusterView(t *testing.T) {
	g := NewWithT(t)
	s := testCluster()
	s.Events = []corev1.Event{
		{InvolvedObject: corev1.ObjectReference{Namespace: "ns", Kind: "Machine", Name: "prod-cp-a"}, Reason: "Old", Message: "older",
			LastTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		{InvolvedObject: corev1.ObjectReference{Namespace: "ns", Kind: "TalosControlPlane", Name: "prod-cp"}, Reason: "New", Message: "newer", Type: "Warning",
			LastTimestamp: metav1.NewTime(now.Add(-time.Minute)), Count: 3},
		{InvolvedObject: corev1.ObjectReference{Namespace: "ns", Kind: "Machine", Name: "other-cluster-machine"}, Reason: "Elsewhere"},
	}
	s.Backups = []controlplanev1.TalosEtcdBackup{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod-1", CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour))},
		Spec: controlplanev1.TalosEtcdBackupSpec{ClusterName: "prod"}, Status: controlplanev1.TalosEtcdBackupStatus{Phase: controlplanev1.EtcdBackupSucceeded}}}

	v := s.cluster("ns", "prod", now)
	g.Expect(v).NotTo(BeNil())
	g.Expect(v.Stuck).To(BeNil())
	g.Expect(v.LastBackup).To(Equal("Succeeded 2h ago"))
	g.Expect(v.ControlPlane.Machines).To(HaveLen(3))
	g.Expect(v.ControlPlane.Machines[0]).To(HaveField("Etcd", "abcprod-cp-a"))
	g.Expect(v.ControlPlane.Machines[0]).To(HaveField("EtcdHealth", "healthy voter"))
	g.Expect(v.Deployments).To(HaveLen(1))
	g.Expect(v.Deployments[0].Machines).To(HaveLen(2))
	g.Expect(v.Machines).To(BeEmpty())
	g.Expect(v.Events).To(HaveLen(2))
	g.Expect(v.Events[0]).To(HaveField("Reason", "New"))
	g.Expect(v.Events[0]).To(HaveField("Count", int32(3)))
	g.Expect(v.Events[1]).To(HaveField("Reason", "Old"))

	g.Expect(s.cluster("ns", "absent", now)).To(BeNil())
}
