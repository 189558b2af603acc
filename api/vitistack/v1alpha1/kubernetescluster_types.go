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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterClassAnnotation on a KubernetesCluster names the ClusterClass its Cluster uses
// ("name" in the KubernetesCluster's namespace, or "namespace/name"), in place of the
// control-plane manager's --kubernetes-cluster-class.
const ClusterClassAnnotation = "talon.dev/cluster-class"

// VariablesAnnotation on a KubernetesCluster holds more ClusterClass variables for its
// Cluster, as a JSON object of variable names to values ({"dockerSubnet": "127.0.80.0/24"}).
const VariablesAnnotation = "talon.dev/cluster-variables"

// ClusterCreatedAnnotation on a KubernetesCluster records, as the time (RFC 3339), that the
// control-plane manager created its Cluster. It is written before the Cluster is created and
// moves with the KubernetesCluster under clusterctl move, where the KubernetesCluster arrives
// before its Cluster: while it is there and the Cluster is not, the KubernetesCluster waits
// for its Cluster rather than making a new one. The manager removes it when a person deletes
// the Cluster, so that the KubernetesCluster makes a new one once the old one is gone.
const ClusterCreatedAnnotation = "talon.dev/cluster-created"

// ManagedVariablesAnnotation on the Cluster made for a KubernetesCluster names the topology
// variables the KubernetesCluster set (VariablesAnnotation), comma-separated; the others,
// such as the class's defaults, are left as they are.
const ManagedVariablesAnnotation = "vitistack.io/managed-variables"

// KubernetesClusterLabel is on the Cluster made for a KubernetesCluster, naming it.
const KubernetesClusterLabel = "vitistack.io/kubernetescluster"

// ClusterIDLabel is on the Cluster made for a KubernetesCluster, holding its spec.data.clusterId.
const ClusterIDLabel = "vitistack.io/clusterid"

// Finalizer holds a KubernetesCluster until its Cluster, and with it every node, is deleted.
const Finalizer = "vitistack.io/kubernetescluster"

// ReadyCondition is True when the cluster runs: every control-plane and worker node the
// spec asks for is ready and runs the requested version.
const ReadyCondition = "Ready"

// Phases of a KubernetesCluster, in status.phase.
const (
	PhaseProvisioning = "Provisioning"
	PhaseRunning      = "Running"
	PhaseUpdating     = "Updating"
	PhaseDeleting     = "Deleting"
	PhaseFailed       = "Failed"
)

// Statuses of the control plane and of each node pool, in status.state.cluster.
const (
	StatusOK      = "ok"
	StatusWorking = "working"
)

// KubernetesCluster is a whole Kubernetes cluster declared as one object: its identity, its
// Kubernetes version, its control-plane size and its worker pools.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=kubernetesclusters,scope=Namespaced,shortName=kc
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.topology.version`
// +kubebuilder:printcolumn:name="ControlPlaneReplicas",type=integer,JSONPath=`.spec.topology.controlplane.replicas`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KubernetesCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the cluster as declared.
	// +required
	Spec KubernetesClusterSpec `json:"spec,omitempty,omitzero"`

	// status is the cluster as it is.
	// +optional
	Status KubernetesClusterStatus `json:"status,omitempty,omitzero"`
}

// KubernetesClusterList is a list of KubernetesClusters.
// +kubebuilder:object:root=true
type KubernetesClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubernetesCluster `json:"items"`
}

// KubernetesClusterSpec is a cluster's identity and topology.
type KubernetesClusterSpec struct {
	// data identifies the cluster. Talon copies clusterId into a label of the Cluster; the
	// other fields are kept for the tools that read them.
	// +optional
	Data ClusterData `json:"data,omitempty,omitzero"`

	// topology is the cluster's Kubernetes version, control plane and worker pools.
	// +required
	Topology Topology `json:"topology,omitempty,omitzero"`
}

// ClusterData are a cluster's identity fields.
type ClusterData struct {
	// clusterUid is a unique identifier of the cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ClusterUID string `json:"clusterUid,omitempty"`
	// clusterId names the cluster for people and tools; it becomes the Cluster's
	// vitistack.io/clusterid label, so it must be a label value.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	ClusterID string `json:"clusterId,omitempty"`
	// provider is the Kubernetes provider: talos, the only one Talon builds.
	// +optional
	// +kubebuilder:validation:Enum=talos
	Provider string `json:"provider,omitempty"`
	// datacenter, region, zone, project, workspace, workorder, environment and
	// networkNamespaceName are kept as given.
	// +optional
	Datacenter string `json:"datacenter,omitempty"`
	// +optional
	Region string `json:"region,omitempty"`
	// +optional
	Zone string `json:"zone,omitempty"`
	// +optional
	Project string `json:"project,omitempty"`
	// +optional
	Workspace string `json:"workspace,omitempty"`
	// +optional
	Workorder string `json:"workorder,omitempty"`
	// +optional
	Environment string `json:"environment,omitempty"`
	// +optional
	NetworkNamespaceName string `json:"networkNamespaceName,omitempty"`
}

// Topology is a cluster's version and shape.
type Topology struct {
	// version is the cluster's Kubernetes version: a patch version ("1.36.3", "v1.36.3"), or a
	// minor ("1.36") that Talon resolves to the newest patch of it the ClusterClass lists, or
	// else to the patch Talon is tested with (docs/kubernetescluster.md).
	// +required
	// +kubebuilder:validation:Pattern=`^v?[0-9]+\.[0-9]+(\.[0-9]+)?$`
	Version string `json:"version,omitempty"`

	// controlplane is the control plane's size.
	// +required
	ControlPlane ControlPlane `json:"controlplane,omitempty,omitzero"`

	// workers are the worker node pools.
	// +optional
	Workers Workers `json:"workers,omitempty,omitzero"`
}

// ControlPlane is a cluster's control plane.
type ControlPlane struct {
	// replicas is the number of control-plane nodes: odd, so that etcd keeps quorum.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self % 2 == 1",message="controlplane replicas must be odd (1, 3, 5) so that etcd keeps quorum"
	Replicas int32 `json:"replicas,omitempty"`
	// version, when set, must name the cluster's version (topology.version): the control
	// plane and the workers run one version.
	// +optional
	// +kubebuilder:validation:Pattern=`^v?[0-9]+\.[0-9]+(\.[0-9]+)?$`
	Version string `json:"version,omitempty"`
	// metadata are labels and annotations for the control-plane Machines; the labels are
	// also set on their Kubernetes Nodes.
	// +optional
	Metadata Metadata `json:"metadata,omitempty,omitzero"`

	// provider, machineClass, storage and architecture are accepted for the shape's sake
	// and not used: the ClusterClass decides the machines.
	// +optional
	// +kubebuilder:validation:Enum=talos
	Provider string `json:"provider,omitempty"`
	// +optional
	MachineClass string `json:"machineClass,omitempty"`
	// +optional
	// +listType=atomic
	Storage []Storage `json:"storage,omitempty"`
	// +optional
	// +kubebuilder:validation:Enum=amd64;arm64;x86_64
	Architecture string `json:"architecture,omitempty"`
}

// Workers are a cluster's worker node pools.
type Workers struct {
	// nodePools each become a MachineDeployment of the Cluster, named after the pool.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	NodePools []NodePool `json:"nodePools,omitempty"`
}

// NodePool is a pool of worker nodes.
type NodePool struct {
	// name is the pool's name, and its MachineDeployment's topology name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
	// replicas is the number of nodes in the pool.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// version, when set, must name the cluster's version (topology.version).
	// +optional
	// +kubebuilder:validation:Pattern=`^v?[0-9]+\.[0-9]+(\.[0-9]+)?$`
	Version string `json:"version,omitempty"`
	// metadata are labels and annotations for the pool's Machines; the labels are also set on
	// their Kubernetes Nodes.
	// +optional
	Metadata Metadata `json:"metadata,omitempty,omitzero"`
	// taint are taints of the pool's Kubernetes Nodes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Taint []Taint `json:"taint,omitempty"`
	// autoscaling, when enabled, gives the pool's MachineDeployment the Cluster Autoscaler's
	// minimum and maximum size annotations; the autoscaler then owns replicas.
	// +optional
	Autoscaling Autoscaling `json:"autoscaling,omitempty,omitzero"`

	// provider, machineClass, storage and architecture are accepted for the shape's sake
	// and not used: the ClusterClass decides the machines.
	// +optional
	// +kubebuilder:validation:Enum=talos
	Provider string `json:"provider,omitempty"`
	// +optional
	MachineClass string `json:"machineClass,omitempty"`
	// +optional
	// +listType=atomic
	Storage []Storage `json:"storage,omitempty"`
	// +optional
	// +kubebuilder:validation:Enum=amd64;arm64;x86_64
	Architecture string `json:"architecture,omitempty"`
}

// Metadata are labels and annotations.
type Metadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Taint is a Kubernetes Node taint.
type Taint struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Key string `json:"key,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`
	// +required
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	Effect string `json:"effect,omitempty"`
}

// Autoscaling are a pool's Cluster Autoscaler bounds.
// +kubebuilder:validation:XValidation:rule="!self.enabled || self.minReplicas <= self.maxReplicas",message="autoscaling minReplicas must not exceed maxReplicas"
type Autoscaling struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReplicas int32 `json:"minReplicas,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
	// scalingRules are accepted and not used.
	// +optional
	// +listType=atomic
	ScalingRules []string `json:"scalingRules,omitempty"`
}

// Storage is accepted for the shape's sake and not used.
type Storage struct {
	// +optional
	Class string `json:"class,omitempty"`
	// +optional
	Path string `json:"path,omitempty"`
	// +optional
	Size string `json:"size,omitempty"`
}

// KubernetesClusterStatus is the cluster as it is.
type KubernetesClusterStatus struct {
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase is Provisioning, Running, Updating, Deleting or Failed.
	// +optional
	Phase string `json:"phase,omitempty"`
	// message says what is happening, or what a person must do.
	// +optional
	Message string `json:"message,omitempty"`
	// state are the cluster's nodes, versions and endpoints.
	// +optional
	State ClusterState `json:"state,omitempty,omitzero"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterState are a cluster's nodes, versions and endpoints.
type ClusterState struct {
	// cluster are the control plane's and each pool's nodes.
	// +optional
	Cluster ClusterDetails `json:"cluster,omitempty,omitzero"`
	// versions are what the cluster runs: kubernetes, the version every control-plane node
	// runs (absent while they run different versions).
	// +optional
	// +listType=atomic
	Versions []Version `json:"versions,omitempty"`
	// endpoints: kubernetes, the API server's address.
	// +optional
	// +listType=atomic
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// created is when the Cluster was created.
	// +optional
	Created metav1.Time `json:"created,omitempty,omitzero"`
	// lastUpdated is when the status last changed, and lastUpdatedBy who changed it.
	// +optional
	LastUpdated metav1.Time `json:"lastUpdated,omitempty,omitzero"`
	// +optional
	LastUpdatedBy string `json:"lastUpdatedBy,omitempty"`
}

// ClusterDetails are the control plane's and each pool's nodes.
type ClusterDetails struct {
	// +optional
	ControlPlane NodeGroupStatus `json:"controlplane,omitempty,omitzero"`
	// +optional
	// +listType=atomic
	NodePools []NodeGroupStatus `json:"nodepools,omitempty"`
}

// NodeGroupStatus is the control plane's or a pool's state.
type NodeGroupStatus struct {
	// name is the pool's name; empty for the control plane.
	// +optional
	Name string `json:"name,omitempty"`
	// status is ok (every node ready and up to date) or working.
	// +optional
	Status string `json:"status,omitempty"`
	// message says what the group waits for.
	// +optional
	Message string `json:"message,omitempty"`
	// scale is the number of ready nodes.
	// +optional
	Scale int32 `json:"scale"`
	// nodes are the names of the group's Kubernetes Nodes.
	// +optional
	// +listType=atomic
	Nodes []string `json:"nodes,omitempty"`
}

// Version is a component's version.
type Version struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Branch string `json:"branch,omitempty"`
}

// Endpoint is an address of the cluster.
type Endpoint struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Address string `json:"address,omitempty"`
}
