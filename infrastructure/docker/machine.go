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

package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	capicontrollerutil "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/infrastructure/internal/infra"
	"github.com/talon-capi/talon/internal/record"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=talosdockermachines;talosdockermachines/status;talosdockermachines/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=talosdockerclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// machineFinalizer holds a TalosDockerMachine until its node is gone.
const machineFinalizer = "talosdockermachine.infrastructure.cluster.x-k8s.io"

// ProviderIDPrefix starts the providerID of every Docker node:
// talos-docker://<namespace>/<cluster>/<machine>.
const ProviderIDPrefix = "talos-docker://"

// ProviderID is the providerID of a Machine's node.
func ProviderID(cluster runtime.Cluster, machine string) string {
	return ProviderIDPrefix + cluster.Namespace + "/" + cluster.Name + "/" + machine
}

// TalosImage is the image a TalosDockerMachine runs unless it names one: the Talos
// release of the machinery library Talon renders configs with.
const TalosImage = "ghcr.io/siderolabs/talos:v1.14.1"

// MachineReconciler runs each TalosDockerMachine's node and links it to its workload Node.
type MachineReconciler struct {
	Client  client.Client
	Runtime runtime.Runtime
	// ClusterCache reaches the workload clusters, to set the Nodes' providerID.
	ClusterCache clustercache.ClusterCache
	// WatchFilterValue limits reconciliation to objects labelled with it.
	WatchFilterValue string
	// Events records the nodes created and deleted; optional.
	Events events.EventRecorder

	linker *infra.NodeLinker
	// allocating serializes, per cluster, picking an address and creating the node on it.
	allocating sync.Map // runtime.Cluster → *sync.Mutex
}

// clusterLock is the lock that serializes address picking in cluster.
func (r *MachineReconciler) clusterLock(cluster runtime.Cluster) *sync.Mutex {
	lock, _ := r.allocating.LoadOrStore(cluster, &sync.Mutex{})
	return lock.(*sync.Mutex)
}

// SetupWithManager registers the reconciler with mgr.
func (r *MachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.Runtime == nil || r.ClusterCache == nil {
		return errors.New("talosdockermachine reconciler needs a Client, a Runtime and a ClusterCache")
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "talosdockermachine")
	c, err := capicontrollerutil.NewControllerManagedBy(mgr, log).
		For(&infrav1.TalosDockerMachine{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{},
			handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("TalosDockerMachine")))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToMachines),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		WatchesRawSource(r.ClusterCache.GetClusterSource("talosdockermachine", r.clusterToMachines)).
		Build(ctx, r)
	if err != nil {
		return fmt.Errorf("failed to set up the talosdockermachine controller: %w", err)
	}
	r.linker = &infra.NodeLinker{ClusterCache: r.ClusterCache, Controller: c, Name: "talosdockermachine", MapNode: r.nodeToMachine}
	return nil
}

// clusterToMachines maps a Cluster to its TalosDockerMachines.
func (r *MachineReconciler) clusterToMachines(ctx context.Context, o client.Object) []ctrl.Request {
	machines := &infrav1.TalosDockerMachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		return nil
	}
	requests := make([]ctrl.Request, 0, len(machines.Items))
	for _, m := range machines.Items {
		requests = append(requests, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
	}
	return requests
}

// Reconcile brings one TalosDockerMachine closer to its spec.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	dm := &infrav1.TalosDockerMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, dm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, dm.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if machine == nil {
		if !dm.DeletionTimestamp.IsZero() {
			return r.deleteOrphan(ctx, dm)
		}
		ctrl.LoggerFrom(ctx).V(4).Info("Waiting for the Machine to own the TalosDockerMachine")
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to get the Cluster of Machine %s: %w", machine.Name, err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster), "Machine", klog.KObj(machine)))
	patchHelper, err := patch.NewHelper(dm, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, dm); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	defer func() {
		dm.Status.ObservedGeneration = dm.Generation
		reterr = errors.Join(reterr, infra.PatchReady(ctx, patchHelper, "TalosDockerMachine", dm,
			infrav1.ContainerProvisionedCondition, infrav1.NodeProviderIDSetCondition))
	}()

	key := runtime.Cluster{Namespace: cluster.Namespace, Name: cluster.Name}
	if !dm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, key, machine, dm)
	}
	if controllerutil.AddFinalizer(dm, machineFinalizer) {
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, key, cluster, machine, dm)
}

func (r *MachineReconciler) reconcileNormal(ctx context.Context, key runtime.Cluster, cluster *clusterv1.Cluster, machine *clusterv1.Machine, dm *infrav1.TalosDockerMachine) (ctrl.Result, error) {
	node, err := runtime.FindNode(ctx, r.Runtime, key, machine.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if node == nil {
		created, result, err := r.createNode(ctx, key, cluster, machine, dm)
		if err != nil || !created {
			// Waiting for the cluster or the bootstrap data: their events come back here.
			return result, err
		}
		if node, err = runtime.FindNode(ctx, r.Runtime, key, machine.Name); err != nil || node == nil {
			return ctrl.Result{RequeueAfter: converging}, err
		}
	}
	if !node.Running {
		// A stopped container (the Docker host restarted, say) starts again on its volumes,
		// as the node it was: CreateNode starts an existing one, of the role it has.
		ctrl.LoggerFrom(ctx).Info("Starting stopped node", "node", node.Name)
		spec := runtime.NodeSpec{Cluster: key, Machine: machine.Name, Name: node.Name, Role: node.Role, Address: node.Address}
		if _, err := r.Runtime.CreateNode(ctx, spec); err != nil {
			return failed(dm, infrav1.ContainerProvisionedCondition, "Cannot start stopped node "+node.Name, err)
		}
	}
	infra.SetTruef(dm, infrav1.ContainerProvisionedCondition, "Node %s runs at %s on the %s runtime", node.Name, node.Address, r.Runtime.Name())
	dm.Spec.ProviderID = ProviderID(key, machine.Name)
	dm.Status.Addresses = []clusterv1.MachineAddress{
		{Type: clusterv1.MachineInternalIP, Address: node.Address.String()},
		{Type: clusterv1.MachineHostName, Address: node.Name},
	}
	dm.Status.FailureDomain = machine.Spec.FailureDomain
	dm.Status.Initialization.Provisioned = ptr.To(true)
	return r.linker.Link(ctx, cluster, dm, node.Name, node.Address.String(), dm.Spec.ProviderID)
}

// createNode starts the Machine's node once the cluster network exists and the Machine has
// its bootstrap data; created says whether it did.
func (r *MachineReconciler) createNode(ctx context.Context, key runtime.Cluster, cluster *clusterv1.Cluster, machine *clusterv1.Machine, dm *infrav1.TalosDockerMachine) (created bool, _ ctrl.Result, _ error) {
	dc := &infrav1.TalosDockerCluster{}
	if cluster.Spec.InfrastructureRef.Kind == "TalosDockerCluster" {
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Spec.InfrastructureRef.Name}, dc); err != nil && !apierrors.IsNotFound(err) {
			return false, ctrl.Result{}, err
		}
	}
	subnet, err := netip.ParsePrefix(dc.Status.Network.Subnet)
	if err != nil || !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		infra.SetFalsef(dm, infrav1.ContainerProvisionedCondition, infrav1.WaitingForClusterInfrastructureReason,
			"Waiting for the network and load balancer of Cluster %s (TalosDockerCluster %s)", cluster.Name, cluster.Spec.InfrastructureRef.Name)
		return false, ctrl.Result{}, nil
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		infra.SetFalsef(dm, infrav1.ContainerProvisionedCondition, infrav1.WaitingForBootstrapDataReason,
			"Waiting for the bootstrap provider to render the machine config of Machine %s", machine.Name)
		return false, ctrl.Result{}, nil
	}
	data := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: *machine.Spec.Bootstrap.DataSecretName}, data); err != nil {
		return false, ctrl.Result{}, fmt.Errorf("failed to read the bootstrap data of Machine %s: %w", machine.Name, err)
	}
	spec, err := nodeSpec(key, machine, dm)
	if err != nil {
		infra.SetFalsef(dm, infrav1.ContainerProvisionedCondition, infrav1.ProvisioningFailedReason, "%v", err)
		return false, ctrl.Result{}, nil
	}
	spec.Network = dc.Status.Network.Name
	spec.UserData = data.Data["value"]

	lock := r.clusterLock(key)
	lock.Lock()
	defer lock.Unlock()
	nodes, err := r.Runtime.Nodes(ctx, key)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	taken := []netip.Addr{runtime.LoadBalancerAddress(subnet)}
	for _, n := range nodes {
		taken = append(taken, n.Address)
	}
	if spec.Address, err = runtime.NextAddress(subnet, taken); err != nil {
		result, err := failed(dm, infrav1.ContainerProvisionedCondition, "Cannot place node "+spec.Name, err)
		return false, result, err
	}
	if _, err := r.Runtime.CreateNode(ctx, spec); err != nil {
		result, err := failed(dm, infrav1.ContainerProvisionedCondition, "Cannot create node "+spec.Name, err)
		return false, result, err
	}
	ctrl.LoggerFrom(ctx).Info("Created node", "node", spec.Name, "address", spec.Address, "runtime", r.Runtime.Name())
	record.Event(r.Events, dm, corev1.EventTypeNormal, "NodeCreated", "CreateNode", "Created node %s at %s (%s runtime, image %s)", spec.Name, spec.Address, r.Runtime.Name(), spec.Image)
	return false, ctrl.Result{}, nil
}

// nodeSpec turns a TalosDockerMachine into the runtime's node spec.
func nodeSpec(key runtime.Cluster, machine *clusterv1.Machine, dm *infrav1.TalosDockerMachine) (runtime.NodeSpec, error) {
	spec := runtime.NodeSpec{
		Cluster: key, Machine: machine.Name, Name: machine.Name, Role: runtime.RoleWorker,
		Image: dm.Spec.Image, Env: map[string]string{},
	}
	if _, ok := machine.Labels[clusterv1.MachineControlPlaneLabel]; ok {
		spec.Role = runtime.RoleControlPlane
	}
	if spec.Image == "" {
		spec.Image = TalosImage
	}
	spec.TalosVersion = ImageTalosVersion(spec.Image)
	if dm.Spec.CPUs != "" {
		q, err := resource.ParseQuantity(dm.Spec.CPUs)
		if err != nil {
			return spec, fmt.Errorf("spec.cpus %q is not a quantity such as 2 or 1500m: %w", dm.Spec.CPUs, err)
		}
		spec.NanoCPUs = q.MilliValue() * 1_000_000
	}
	if dm.Spec.Memory != "" {
		q, err := resource.ParseQuantity(dm.Spec.Memory)
		if err != nil {
			return spec, fmt.Errorf("spec.memory %q is not a quantity such as 2Gi or 2048Mi: %w", dm.Spec.Memory, err)
		}
		spec.MemoryBytes = q.Value()
	}
	for _, e := range dm.Spec.ExtraEnv {
		spec.Env[e.Name] = e.Value
	}
	for _, m := range dm.Spec.ExtraMounts {
		spec.Mounts = append(spec.Mounts, runtime.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: ptr.Deref(m.ReadOnly, false)})
	}
	for _, p := range dm.Spec.ExtraPortMappings {
		protocol := strings.ToLower(p.Protocol)
		if protocol == "" {
			protocol = "tcp"
		}
		spec.Ports = append(spec.Ports, runtime.PortMapping{ContainerPort: int(p.ContainerPort), HostPort: int(p.HostPort), Protocol: protocol, HostIP: p.HostIP})
	}
	return spec, nil
}

// ImageTalosVersion is the Talos version in an image's tag (ghcr.io/siderolabs/talos:v1.13.3
// → v1.13.3), or "" when the tag is no version.
func ImageTalosVersion(image string) string {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return ""
	}
	tag := image[i+1:]
	if _, err := configgen.ParseContract(tag); err != nil {
		return ""
	}
	return tag
}

// nodeToMachine maps a workload Node of a cluster in namespace to its TalosDockerMachine:
// nodes are named after their Machines.
func (r *MachineReconciler) nodeToMachine(namespace string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		machine := &clusterv1.Machine{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.GetName()}, machine); err != nil {
			return nil
		}
		ref := machine.Spec.InfrastructureRef
		if ref.Kind != "TalosDockerMachine" || ref.APIGroup != infrav1.GroupVersion.Group {
			return nil
		}
		return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: namespace, Name: ref.Name}}}
	}
}

// deleteOrphan removes the node of a TalosDockerMachine whose Machine is gone, found
// through its providerID.
func (r *MachineReconciler) deleteOrphan(ctx context.Context, dm *infrav1.TalosDockerMachine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(dm, machineFinalizer) {
		return ctrl.Result{}, nil
	}
	if parts := strings.Split(strings.TrimPrefix(dm.Spec.ProviderID, ProviderIDPrefix), "/"); len(parts) == 3 {
		if err := r.Runtime.DeleteNode(ctx, runtime.Cluster{Namespace: parts[0], Name: parts[1]}, parts[2]); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to delete node %s: %w", parts[2], err)
		}
	}
	patch := client.MergeFrom(dm.DeepCopy())
	controllerutil.RemoveFinalizer(dm, machineFinalizer)
	return ctrl.Result{}, r.Client.Patch(ctx, dm, patch)
}

// reconcileDelete stops and removes the Machine's node with its volumes.
func (r *MachineReconciler) reconcileDelete(ctx context.Context, key runtime.Cluster, machine *clusterv1.Machine, dm *infrav1.TalosDockerMachine) (ctrl.Result, error) {
	infra.SetFalsef(dm, infrav1.ContainerProvisionedCondition, infrav1.DeletingReason, "Deleting node %s", machine.Name)
	if err := r.Runtime.DeleteNode(ctx, key, machine.Name); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to delete node %s: %w", machine.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted node", "node", machine.Name)
	record.Event(r.Events, dm, corev1.EventTypeNormal, "NodeDeleted", "DeleteNode", "Deleted node %s with its volumes", machine.Name)
	controllerutil.RemoveFinalizer(dm, machineFinalizer)
	return ctrl.Result{}, nil
}
