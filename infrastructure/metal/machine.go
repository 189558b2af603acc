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

package metal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	capicontrollerutil "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/infrastructure/internal/infra"
	"github.com/talon-capi/talon/infrastructure/metal/power"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=talosmetalmachines;talosmetalmachines/status;talosmetalmachines/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=talosmetalclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status;clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=talosconfigs,verbs=get

// machineFinalizer holds a TalosMetalMachine until its host is reset or marked for a wipe.
const machineFinalizer = "talosmetalmachine.infrastructure.cluster.x-k8s.io"

// ProviderIDPrefix starts the providerID of every bare-metal node: talos-metal://<ns>/<host>.
const ProviderIDPrefix = "talos-metal://"

// ProviderID is the providerID of the node on a MetalHost.
func ProviderID(namespace, host string) string {
	return ProviderIDPrefix + namespace + "/" + host
}

// DefaultResetTimeout is how long a node may take to wipe itself and power off after a
// Talos reset before Talon powers it off and wipes it by network boot instead.
const DefaultResetTimeout = 10 * time.Minute

// MachineReconciler gives each TalosMetalMachine a MetalHost: it claims an Available host
// matching the selector, network-boots it through its BMC into Talos with the Machine's
// config, links the workload Node, and on deletion resets the node or marks the host for a
// wipe.
type MachineReconciler struct {
	Client client.Client
	// APIReader reads MetalHosts from the API server where the cache may lag behind a claim;
	// Client when nil.
	APIReader client.Reader
	// ClusterCache reaches the workload clusters, to set the Nodes' providerID.
	ClusterCache clustercache.ClusterCache
	// Assets downloads and verifies the boot assets into the boot service's directory.
	Assets *AssetCache
	// BMC makes BMC clients; NewBMC when nil.
	BMC BMCFactory
	// TalosClients reach the nodes to reset them; talosclient.NewFactory() when nil.
	TalosClients talosclient.Factory
	// BootTimeout: see DefaultBootTimeout.
	BootTimeout time.Duration
	// ResetTimeout: see DefaultResetTimeout.
	ResetTimeout time.Duration
	// WatchFilterValue limits reconciliation to objects labelled with it.
	WatchFilterValue string

	linker *infra.NodeLinker
}

// SetupWithManager registers the reconciler with mgr.
func (r *MachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.ClusterCache == nil || r.Assets == nil {
		return errors.New("talosmetalmachine reconciler needs a Client, a ClusterCache and an AssetCache")
	}
	if r.BMC == nil {
		r.BMC = NewBMC
	}
	if r.APIReader == nil {
		r.APIReader = r.Client
	}
	if r.TalosClients == nil {
		r.TalosClients = talosclient.NewFactory()
	}
	if r.BootTimeout == 0 {
		r.BootTimeout = DefaultBootTimeout
	}
	if r.ResetTimeout == 0 {
		r.ResetTimeout = DefaultResetTimeout
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "talosmetalmachine")
	c, err := capicontrollerutil.NewControllerManagedBy(mgr, log).
		For(&infrav1.TalosMetalMachine{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{},
			handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("TalosMetalMachine")))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToMachines),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&infrav1.MetalHost{}, handler.EnqueueRequestsFromMapFunc(r.hostToMachines)).
		// A changed controlPlaneVIP lets control-plane Machines waiting on it (VIPLinkUnknown) boot.
		Watches(&infrav1.TalosMetalCluster{}, handler.EnqueueRequestsFromMapFunc(r.infraClusterToMachines),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		WatchesRawSource(r.ClusterCache.GetClusterSource("talosmetalmachine", r.clusterToMachines)).
		Build(ctx, r)
	if err != nil {
		return fmt.Errorf("failed to set up the talosmetalmachine controller: %w", err)
	}
	r.linker = &infra.NodeLinker{ClusterCache: r.ClusterCache, Controller: c, Name: "talosmetalmachine", MapNode: r.nodeToMachine}
	return nil
}

// clusterToMachines maps a Cluster to its TalosMetalMachines.
func (r *MachineReconciler) clusterToMachines(ctx context.Context, o client.Object) []ctrl.Request {
	machines := &infrav1.TalosMetalMachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		return nil
	}
	return requestsFor(machines.Items)
}

// infraClusterToMachines maps a TalosMetalCluster to the TalosMetalMachines of its Cluster.
func (r *MachineReconciler) infraClusterToMachines(ctx context.Context, o client.Object) []ctrl.Request {
	name := o.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	machines := &infrav1.TalosMetalMachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil
	}
	return requestsFor(machines.Items)
}

// hostToMachines maps a MetalHost to its consumer, or, when it is Available, to every
// TalosMetalMachine of its namespace still waiting for a host.
func (r *MachineReconciler) hostToMachines(ctx context.Context, o client.Object) []ctrl.Request {
	h, ok := o.(*infrav1.MetalHost)
	if !ok {
		return nil
	}
	if h.Spec.ConsumerRef != nil {
		return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: h.Namespace, Name: h.Spec.ConsumerRef.Name}}}
	}
	if h.Status.State != infrav1.MetalHostStateAvailable {
		return nil
	}
	machines := &infrav1.TalosMetalMachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(h.Namespace)); err != nil {
		return nil
	}
	waiting := slices.DeleteFunc(machines.Items, func(m infrav1.TalosMetalMachine) bool { return m.Status.Host != "" })
	return requestsFor(waiting)
}

func requestsFor(machines []infrav1.TalosMetalMachine) []ctrl.Request {
	requests := make([]ctrl.Request, 0, len(machines))
	for _, m := range machines {
		requests = append(requests, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
	}
	return requests
}

// nodeToMachine maps a workload Node to the TalosMetalMachine with its providerID, or to
// every TalosMetalMachine of the namespace while the Node has none.
func (r *MachineReconciler) nodeToMachine(namespace string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		node, ok := o.(*corev1.Node)
		if !ok {
			return nil
		}
		if host, found := strings.CutPrefix(node.Spec.ProviderID, ProviderIDPrefix+namespace+"/"); found {
			h := &infrav1.MetalHost{}
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: host}, h); err != nil || h.Spec.ConsumerRef == nil {
				return nil
			}
			return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: namespace, Name: h.Spec.ConsumerRef.Name}}}
		}
		if node.Spec.ProviderID != "" {
			return nil
		}
		machines := &infrav1.TalosMetalMachineList{}
		if err := r.Client.List(ctx, machines, client.InNamespace(namespace)); err != nil {
			return nil
		}
		return requestsFor(machines.Items)
	}
}

// Reconcile brings one TalosMetalMachine closer to its spec.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	m := &infrav1.TalosMetalMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if _, moving := m.Annotations[clusterctlv1.DeleteForMoveAnnotation]; moving && !m.DeletionTimestamp.IsZero() {
		// clusterctl move created it in another management cluster, which runs its host now.
		return ctrl.Result{}, nil
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, m.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if machine == nil {
		if !m.DeletionTimestamp.IsZero() {
			return r.deleteOrphan(ctx, m)
		}
		ctrl.LoggerFrom(ctx).V(4).Info("Waiting for the Machine to own the TalosMetalMachine")
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to get the Cluster of Machine %s: %w", machine.Name, err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster), "Machine", klog.KObj(machine)))
	patchHelper, err := patch.NewHelper(m, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, m); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	defer func() {
		m.Status.ObservedGeneration = m.Generation
		reterr = errors.Join(reterr, infra.PatchReady(ctx, patchHelper, "TalosMetalMachine", m,
			infrav1.HostProvisionedCondition, infrav1.NodeProviderIDSetCondition))
	}()
	if !m.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, cluster, m)
	}
	if controllerutil.AddFinalizer(m, machineFinalizer) {
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, cluster, machine, m)
}

func (r *MachineReconciler) reconcileNormal(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine, m *infrav1.TalosMetalMachine) (ctrl.Result, error) {
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.WaitingForClusterInfrastructureReason,
			"Waiting for the control-plane endpoint of Cluster %s (TalosMetalCluster %s)", cluster.Name, cluster.Spec.InfrastructureRef.Name)
		return ctrl.Result{}, nil
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.WaitingForBootstrapDataReason,
			"Waiting for the bootstrap provider to render the machine config of Machine %s", machine.Name)
		return ctrl.Result{}, nil
	}
	h, err := r.host(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if h == nil && m.Spec.ProviderID != "" {
		// Provisioned once: never install another server under the same Machine.
		infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.ConflictReason,
			"No MetalHost names TalosMetalMachine %s in spec.consumerRef although its node is %s: restore the MetalHost (with its consumerRef) or delete the Machine", m.Name, m.Spec.ProviderID)
		return ctrl.Result{RequeueAfter: infra.RetryConflict}, nil
	}
	claimed := false
	if h == nil {
		if h, claimed, err = r.claim(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
		if h == nil {
			// MetalHost events wake the Machine; the requeue covers hosts a watch filter hides.
			return ctrl.Result{RequeueAfter: infra.RetryConflict}, nil
		}
	}
	m.Status.Host = h.Name
	log := ctrl.LoggerFrom(ctx).WithValues("MetalHost", klog.KObj(h))
	ctx = ctrl.LoggerInto(ctx, log)

	if err := r.restoreState(ctx, m, h); err != nil {
		return ctrl.Result{}, err
	}
	if h.Status.State == infrav1.MetalHostStateProvisioning {
		if result, done, err := r.provision(ctx, machine, m, h, claimed); err != nil || !done {
			return result, err
		}
	}
	if h.Status.BootAssets == nil {
		// Moved or restored: this manager's boot service wipes the host one day, with the
		// assets it installed from.
		if err := r.recordBootAssets(ctx, machine, m, h); err != nil {
			log.Info("Cannot record the boot assets of the host yet", "reason", err.Error())
		}
	}
	address := installedAddress(h, m)
	if address == "" {
		address = r.nodeAddress(ctx, cluster, ProviderID(h.Namespace, h.Name))
	}
	infra.SetTruef(m, infrav1.HostProvisionedCondition, "MetalHost %s booted Talos at %s", h.Name, address)
	m.Spec.ProviderID = ProviderID(h.Namespace, h.Name)
	m.Status.Addresses = nil
	if address != "" {
		m.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: address}}
	}
	m.Status.FailureDomain = machine.Spec.FailureDomain
	m.Status.Initialization.Provisioned = ptr.To(true)
	return r.linker.Link(ctx, cluster, m, "", address, m.Spec.ProviderID)
}

// host returns the MetalHost m claimed, nil when it has none: by status.host (read from the
// API server, which the cache may lag behind), or else by the claim in the hosts' spec. A
// claim naming m but not its UID was carried by clusterctl move (which gives every object a
// new UID) or a restore from a backup: it is m's, and is updated to m's UID, when m's node
// runs on that host or the host lost its status with m (so it cannot be running another
// Machine's node).
func (r *MachineReconciler) host(ctx context.Context, m *infrav1.TalosMetalMachine) (*infrav1.MetalHost, error) {
	if m.Status.Host != "" {
		h := &infrav1.MetalHost{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Status.Host}, h)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err == nil && h.Spec.ConsumerRef != nil && h.Spec.ConsumerRef.UID == m.UID {
			return h, nil
		}
	}
	hosts := &infrav1.MetalHostList{}
	if err := r.Client.List(ctx, hosts, client.InNamespace(m.Namespace)); err != nil {
		return nil, err
	}
	for i := range hosts.Items {
		h := &hosts.Items[i]
		ref := h.Spec.ConsumerRef
		if ref == nil || ref.Kind != "TalosMetalMachine" || ref.Name != m.Name {
			continue
		}
		if ref.UID == m.UID {
			return h, nil
		}
		runsNode := m.Spec.ProviderID == ProviderID(h.Namespace, h.Name)
		lost := h.Status.State == "" || h.Status.State == infrav1.MetalHostStateRegistering
		if !runsNode && (m.Spec.ProviderID != "" || !lost) {
			continue
		}
		before := h.DeepCopy()
		h.Spec.ConsumerRef = hostConsumerRef(m)
		if err := r.Client.Patch(ctx, h, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return nil, fmt.Errorf("failed to carry the claim of MetalHost %s over to TalosMetalMachine %s: %w", h.Name, m.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Carried over the claim of a moved or restored MetalHost", "MetalHost", h.Name, "runsNode", runsNode)
		return h, nil
	}
	return nil, nil
}

// restoreState gives h, claimed by m, its state again when its status does not hold one of a
// claimed host (clusterctl move, a restore from a backup, a claim whose status update
// failed): Provisioned when m's node runs on it, so that it is never booted again, else
// Provisioning.
func (r *MachineReconciler) restoreState(ctx context.Context, m *infrav1.TalosMetalMachine, h *infrav1.MetalHost) error {
	if !statusLost(h) {
		return nil
	}
	before := h.DeepCopy()
	h.Status.State = infrav1.MetalHostStateProvisioning
	if m.Spec.ProviderID == ProviderID(h.Namespace, h.Name) {
		h.Status.State = infrav1.MetalHostStateProvisioned
	}
	if err := r.Client.Status().Patch(ctx, h, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to restore the state of MetalHost %s: %w", h.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Restored the state of the MetalHost from its claim", "from", before.Status.State, "to", h.Status.State)
	return nil
}

// mayHoldNode reports whether h, claimed by m, may hold a node's data: it was provisioned,
// booted to install, runs m's node (its providerID names it) or lost the status that would
// tell (moved or restored), so that it is wiped before another Machine gets it.
func mayHoldNode(h *infrav1.MetalHost, m *infrav1.TalosMetalMachine) bool {
	switch {
	case h.Status.State == infrav1.MetalHostStateProvisioned, lastBoot(h, infrav1.BootActionInstall, time.Time{}) != nil,
		m.Spec.ProviderID == ProviderID(h.Namespace, h.Name), statusLost(h):
		return true
	}
	return false
}

// statusLost reports whether h's status does not hold the state of a claimed host: created
// without it (clusterctl move, a restore from a backup) or its claim's update of it failed.
func statusLost(h *infrav1.MetalHost) bool {
	switch h.Status.State {
	case infrav1.MetalHostStateProvisioning, infrav1.MetalHostStateProvisioned, infrav1.MetalHostStateDeprovisioning:
		return false
	}
	return true
}

// installedAddress is the address h's node was installed at, as far as Talon's own records
// tell: its static address, else its last install boot, else m's status.
func installedAddress(h *infrav1.MetalHost, m *infrav1.TalosMetalMachine) string {
	if address := staticAddress(h); address != "" {
		return address
	}
	if boot := lastBoot(h, infrav1.BootActionInstall, time.Time{}); boot != nil {
		return boot.Address
	}
	if len(m.Status.Addresses) > 0 {
		return m.Status.Addresses[0].Address
	}
	return ""
}

// nodeAddress is the InternalIP of the workload Node with providerID, "" while there is no
// such Node or the workload cluster cannot be read: the address of a node whose host
// records were moved or restored without it.
func (r *MachineReconciler) nodeAddress(ctx context.Context, cluster *clusterv1.Cluster, providerID string) string {
	workload, err := r.ClusterCache.GetClient(ctx, client.ObjectKeyFromObject(cluster))
	if err != nil {
		return ""
	}
	nodes := &corev1.NodeList{}
	if err := workload.List(ctx, nodes); err != nil {
		return ""
	}
	for _, n := range nodes.Items {
		if n.Spec.ProviderID != providerID {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address
			}
		}
	}
	return ""
}

// claim takes an Available MetalHost matching m's selector for m. The claim is an update of
// the host's spec.consumerRef with its resourceVersion: of two Machines claiming one host, one
// wins and the other gets a conflict and tries the next host. fresh says m claimed the host now (not in
// an earlier reconcile the cache had not caught up with).
func (r *MachineReconciler) claim(ctx context.Context, m *infrav1.TalosMetalMachine) (_ *infrav1.MetalHost, fresh bool, _ error) {
	selector, err := metav1.LabelSelectorAsSelector(&m.Spec.HostSelector)
	if err != nil {
		infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.WaitingForHostReason, "spec.hostSelector is invalid: %v", err)
		return nil, false, nil
	}
	hosts := &infrav1.MetalHostList{}
	if err := r.Client.List(ctx, hosts, client.InNamespace(m.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, false, err
	}
	slices.SortFunc(hosts.Items, func(a, b infrav1.MetalHost) int { return strings.Compare(a.Name, b.Name) })
	states := map[infrav1.MetalHostState]int{}
	for i := range hosts.Items {
		h := &hosts.Items[i]
		states[h.Status.State]++
		if h.Status.State != infrav1.MetalHostStateAvailable || h.Spec.ConsumerRef != nil || h.Spec.NeedsWipe || !h.DeletionTimestamp.IsZero() {
			continue
		}
		before := h.DeepCopy()
		h.Spec.ConsumerRef = hostConsumerRef(m)
		err := r.Client.Patch(ctx, h, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			// Changed since the cache saw it: perhaps claimed by this very Machine already.
			current := &infrav1.MetalHost{}
			if getErr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(h), current); getErr == nil &&
				current.Spec.ConsumerRef != nil && current.Spec.ConsumerRef.UID == m.UID {
				return current, false, nil
			}
			continue
		}
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("failed to claim MetalHost %s: %w", h.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Claimed MetalHost", "MetalHost", h.Name)
		// The claim is recorded; should this update fail, the next reconcile restores the state.
		before = h.DeepCopy()
		h.Status.State = infrav1.MetalHostStateProvisioning
		h.Status.LastError = ""
		if err := r.Client.Status().Patch(ctx, h, client.MergeFrom(before)); err != nil {
			return nil, false, fmt.Errorf("failed to mark the claimed MetalHost %s Provisioning: %w", h.Name, err)
		}
		m.Status.LastBootRequest = nil
		return h, true, nil
	}
	var summary []string
	for state, n := range states {
		summary = append(summary, fmt.Sprintf("%d %s", n, state))
	}
	slices.Sort(summary)
	matching := "none"
	if len(summary) > 0 {
		matching = strings.Join(summary, ", ")
	}
	infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.WaitingForHostReason,
		"No Available MetalHost in namespace %s matches hostSelector %q (matching hosts: %s): add or free a host", m.Namespace, selector.String(), matching)
	return nil, false, nil
}

// bootAssetsOf is the boot assets of m: its spec, where an Image Factory without a
// schematic takes the schematic and release the Machine's TalosConfig resolved, so that the
// host boots the image it then installs.
func (r *MachineReconciler) bootAssetsOf(ctx context.Context, machine *clusterv1.Machine, m *infrav1.TalosMetalMachine) (infrav1.BootAssets, error) {
	assets := *m.Spec.BootAssets.DeepCopy()
	f := assets.ImageFactory
	if f == nil || f.Schematic != "" {
		return assets, nil
	}
	ref := machine.Spec.Bootstrap.ConfigRef
	if ref.Kind != "TalosConfig" || ref.APIGroup != bootstrapGroup {
		return assets, fmt.Errorf("spec.bootAssets.imageFactory names no schematic, and Machine %s's bootstrap config is a %s, not a TalosConfig that resolves one", machine.Name, ref.Kind)
	}
	config := &unstructured.Unstructured{}
	config.SetGroupVersionKind(schema.GroupVersionKind{Group: bootstrapGroup, Version: "v1beta1", Kind: "TalosConfig"})
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: ref.Name}, config); err != nil {
		return assets, fmt.Errorf("failed to read TalosConfig %s for its Image Factory schematic: %w", ref.Name, err)
	}
	schematic, _, _ := unstructured.NestedString(config.Object, "status", "imageFactory", "schematicID")
	version, _, _ := unstructured.NestedString(config.Object, "status", "imageFactory", "version")
	factoryURL, _, _ := unstructured.NestedString(config.Object, "status", "imageFactory", "url")
	if schematic == "" || version == "" {
		return assets, fmt.Errorf("TalosConfig %s has resolved no Image Factory schematic (status.imageFactory): give it spec.imageFactory or the v1.14 contract, or name a schematic in spec.bootAssets.imageFactory", ref.Name)
	}
	f.Schematic, f.Version = schematic, version
	if factoryURL != "" {
		// The factory that knows the schematic: the bootstrap manager's, maybe not the public one.
		f.URL = factoryURL
	}
	return assets, nil
}

// bootstrapGroup is the API group of Talon's bootstrap provider.
const bootstrapGroup = "bootstrap.cluster.x-k8s.io"

// noBootAssetsError says why the boot assets of a Machine cannot be had now.
type noBootAssetsError struct{ error }

// recordBootAssets fetches m's boot assets into the boot service's cache and records them on
// h, which boots them to install and to be wiped. A noBootAssetsError says why they cannot
// be had now.
func (r *MachineReconciler) recordBootAssets(ctx context.Context, machine *clusterv1.Machine, m *infrav1.TalosMetalMachine, h *infrav1.MetalHost) error {
	bootAssets, err := r.bootAssetsOf(ctx, machine, m)
	if err != nil {
		return noBootAssetsError{err}
	}
	assets, err := r.Assets.Ensure(ctx, bootAssets, h.Spec.Architecture)
	if err != nil {
		return noBootAssetsError{err}
	}
	if h.Status.BootAssets != nil && *h.Status.BootAssets == assets {
		return nil
	}
	before := h.DeepCopy()
	h.Status.BootAssets = &assets
	if err := r.Client.Status().Patch(ctx, h, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to record the boot assets of MetalHost %s: %w", h.Name, err)
	}
	return nil
}

// provision boots the claimed host until it fetched its config; done says it did.
func (r *MachineReconciler) provision(ctx context.Context, machine *clusterv1.Machine, m *infrav1.TalosMetalMachine, h *infrav1.MetalHost, claimed bool) (_ ctrl.Result, done bool, _ error) {
	log := ctrl.LoggerFrom(ctx)
	if util.IsControlPlaneMachine(machine) {
		// The config the host fetches must say where the VIP goes: refuse to boot it before.
		vip, err := controlPlaneVIP(ctx, r.Client, machine)
		if err != nil {
			return ctrl.Result{}, false, err
		}
		if vip != nil {
			if _, err := vipLink(h, vip); err != nil {
				infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.VIPLinkUnknownReason, "%v", err)
				return ctrl.Result{}, false, nil
			}
		}
	}
	if err := r.recordBootAssets(ctx, machine, m, h); errors.As(err, new(noBootAssetsError)) {
		infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.BootAssetsUnavailableReason, "MetalHost %s cannot boot: %v", h.Name, err)
		return ctrl.Result{RequeueAfter: infra.RetryConflict}, false, nil
	} else if err != nil {
		return ctrl.Result{}, false, err
	}
	requested := m.Status.LastBootRequest
	if requested != nil {
		if boot := lastBoot(h, infrav1.BootActionInstall, requested.Time); boot != nil && boot.ConfigDelivered {
			before := h.DeepCopy()
			h.Status.State = infrav1.MetalHostStateProvisioned
			if err := r.Client.Status().Patch(ctx, h, client.MergeFrom(before)); err != nil {
				return ctrl.Result{}, false, fmt.Errorf("failed to mark MetalHost %s Provisioned: %w", h.Name, err)
			}
			log.Info("The host fetched its config", "address", boot.Address)
			return ctrl.Result{}, true, nil
		}
	}
	bmc, err := bmcOf(ctx, r.Client, r.BMC, h)
	if err != nil {
		infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.BMCUnreachableReason, "%s", bmcProblem(h, err))
		return ctrl.Result{RequeueAfter: bmcRetry}, false, nil
	}
	if requested == nil && !claimed {
		// The cache may not hold this Machine's last reconcile yet, which booted the host: never
		// power-cycle a host twice for one boot. A request from before this claim does not count.
		current := &infrav1.TalosMetalMachine{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), current); err != nil {
			return ctrl.Result{}, false, err
		}
		if current.Status.LastBootRequest != nil && current.Status.Host == h.Name {
			m.Status.LastBootRequest = current.Status.LastBootRequest
			return ctrl.Result{RequeueAfter: infra.Converging}, false, nil
		}
	}
	switch {
	case requested == nil:
		now := time.Now()
		if err := bootFromNetwork(ctx, bmc, h); err != nil {
			infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.BMCUnreachableReason, "%s", bmcProblem(h, err))
			return ctrl.Result{RequeueAfter: bmcRetry}, false, nil
		}
		m.Status.LastBootRequest = &metav1.Time{Time: now}
		log.Info("Network-booting the host")
		if !faultShown(m) {
			infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.BootingReason, "Network-booting MetalHost %s through its BMC", h.Name)
		}
		return ctrl.Result{RequeueAfter: infra.Converging}, false, nil
	case time.Since(requested.Time) > r.BootTimeout:
		if lastBoot(h, infrav1.BootActionInstall, requested.Time) == nil {
			infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.HostNotBootingReason,
				"MetalHost %s did not network-boot within %s of its power cycle (no DHCP and iPXE script request reached the boot service): check its boot order, its network and the boot service; power-cycling it again",
				h.Name, r.BootTimeout)
		} else {
			infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.HostNotBootingReason,
				"MetalHost %s fetched its iPXE script but not its config within %s of its power cycle: check the kernel and initramfs downloads and the MetalHost's BootRequestRefused events; power-cycling it again",
				h.Name, r.BootTimeout)
		}
		m.Status.LastBootRequest = nil
		return ctrl.Result{RequeueAfter: infra.Converging}, false, nil
	}
	state, err := bmc.PowerState(ctx)
	if err != nil {
		infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.BMCUnreachableReason, "%s", bmcProblem(h, err))
		return ctrl.Result{RequeueAfter: bmcRetry}, false, nil
	}
	if state == power.StateOff && time.Since(requested.Time) > powerGrace {
		infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.PowerStateMismatchReason,
			"MetalHost %s: BMC %s reports power %s although Talon powered the host on at %s; powering it on again",
			h.Name, h.Spec.BMC.Address, state, requested.Format(time.RFC3339))
		m.Status.LastBootRequest = nil
		return ctrl.Result{RequeueAfter: bmcRetry}, false, nil
	}
	if !faultShown(m) {
		infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.BootingReason, "Network-booting MetalHost %s through its BMC", h.Name)
	}
	return ctrl.Result{RequeueAfter: infra.Converging}, false, nil
}

// faultShown reports whether HostProvisioned shows a boot or power fault: it stays until the
// host fetched its config, so that a person sees why the host was power-cycled again.
func faultShown(m *infrav1.TalosMetalMachine) bool {
	c := conditions.Get(m, infrav1.HostProvisionedCondition)
	return c != nil && (c.Reason == infrav1.HostNotBootingReason || c.Reason == infrav1.PowerStateMismatchReason)
}

// reconcileDelete releases the host: it resets the node through the Talos API and waits for
// it to power off; a node that does not answer, or does not finish, is powered off and its
// host marked for a wipe.
func (r *MachineReconciler) reconcileDelete(ctx context.Context, cluster *clusterv1.Cluster, m *infrav1.TalosMetalMachine) (ctrl.Result, error) {
	h, err := r.host(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if h == nil {
		controllerutil.RemoveFinalizer(m, machineFinalizer)
		return ctrl.Result{}, nil
	}
	infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.DeletingReason, "Releasing MetalHost %s", h.Name)
	log := ctrl.LoggerFrom(ctx).WithValues("MetalHost", klog.KObj(h))
	// Deleted before the host's lost state was restored: never release a node's host as if it
	// had never booted.
	installed := mayHoldNode(h, m)
	if err := r.restoreState(ctx, m, h); err != nil {
		return ctrl.Result{}, err
	}
	deleting := time.Since(m.DeletionTimestamp.Time)
	bmc, bmcErr := bmcOf(ctx, r.Client, r.BMC, h)
	state := power.StateUnknown
	if bmcErr == nil {
		state, bmcErr = bmc.PowerState(ctx)
	}
	if bmcErr != nil {
		if deleting < r.ResetTimeout {
			infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.BMCUnreachableReason, "Cannot release MetalHost %s: %s", h.Name, bmcProblem(h, bmcErr))
			return ctrl.Result{RequeueAfter: bmcRetry}, nil
		}
		// Do not hold the Machine (and its cluster's remediation) hostage to a dead BMC: the
		// host is released for a wipe, which waits for its BMC.
		log.Info("The BMC still fails; releasing the host for a wipe without powering it off", "reason", bmcProblem(h, bmcErr))
		if err := r.release(ctx, h, true, nil); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(m, machineFinalizer)
		return ctrl.Result{}, nil
	}
	release := func(needsWipe bool) (ctrl.Result, error) {
		var wiped *infrav1.HostWipe
		if h.Status.State == infrav1.MetalHostStateDeprovisioning && !needsWipe {
			wiped = &infrav1.HostWipe{Method: infrav1.HostWipeTalosReset, Finished: metav1.Now()}
		}
		if err := r.release(ctx, h, needsWipe, wiped); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("Released MetalHost", "needsWipe", needsWipe)
		controllerutil.RemoveFinalizer(m, machineFinalizer)
		return ctrl.Result{}, nil
	}

	if h.Status.State == infrav1.MetalHostStateDeprovisioning {
		// Reset asked: Talos powers the host off when it has wiped it. (Its data disks, if
		// it wants them wiped too, are wiped by a network boot.)
		if state == power.StateOff {
			return release(h.Spec.WipeDataDisks)
		}
		if deleting < r.ResetTimeout {
			return ctrl.Result{RequeueAfter: infra.Converging}, nil
		}
		log.Info("The node did not finish its reset; powering it off for a wipe")
		if err := bmc.PowerOff(ctx); err != nil {
			return releaseFailed(m, h, err), nil
		}
		return release(true)
	}
	if state != power.StateOn || h.Status.State != infrav1.MetalHostStateProvisioned {
		// Never finished booting, or off: nothing to reset through Talos.
		if err := bmc.PowerOff(ctx); err != nil {
			return releaseFailed(m, h, err), nil
		}
		return release(installed)
	}
	if h.Spec.WipeDataDisks {
		// One network boot wipes the system disk and, from maintenance mode where nothing
		// is mounted, every data disk: no Talos reset first.
		log.Info("The host wants its data disks wiped too; powering it off for a wipe")
		if err := bmc.PowerOff(ctx); err != nil {
			return releaseFailed(m, h, err), nil
		}
		return release(true)
	}
	address := installedAddress(h, m)
	if address == "" {
		address = r.nodeAddress(ctx, cluster, ProviderID(h.Namespace, h.Name))
	}
	if err := r.reset(ctx, cluster, address); err != nil {
		log.Info("Cannot reset the node through the Talos API; powering it off for a wipe", "reason", err.Error())
		if err := bmc.PowerOff(ctx); err != nil {
			return releaseFailed(m, h, err), nil
		}
		return release(true)
	}
	before := h.DeepCopy()
	h.Status.State = infrav1.MetalHostStateDeprovisioning
	if err := r.Client.Status().Patch(ctx, h, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to mark MetalHost %s Deprovisioning: %w", h.Name, err)
	}
	infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.DeletingReason, "Talos is resetting MetalHost %s", h.Name)
	return ctrl.Result{RequeueAfter: infra.Converging}, nil
}

// releaseFailed records that h cannot be powered off to be released, and says when to retry.
func releaseFailed(m *infrav1.TalosMetalMachine, h *infrav1.MetalHost, err error) ctrl.Result {
	infra.SetFalsef(m, infrav1.HostProvisionedCondition, infrav1.BMCUnreachableReason, "Cannot power off MetalHost %s to release it: %s", h.Name, bmcProblem(h, err))
	return ctrl.Result{RequeueAfter: bmcRetry}
}

// release gives h back to the inventory: first the record in its spec (no claim; whether it
// needs a wipe), then its state, which the MetalHost reconciler also derives from that record
// should this second update fail, and the wipe that ended, if any.
func (r *MachineReconciler) release(ctx context.Context, h *infrav1.MetalHost, needsWipe bool, wiped *infrav1.HostWipe) error {
	before := h.DeepCopy()
	h.Spec.ConsumerRef = nil
	h.Spec.NeedsWipe = needsWipe
	if err := r.Client.Patch(ctx, h, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to release MetalHost %s: %w", h.Name, err)
	}
	before = h.DeepCopy()
	h.Status.WipeRequested = nil
	if wiped != nil {
		h.Status.LastWipe = wiped
	}
	h.Status.State = infrav1.MetalHostStateAvailable
	if needsWipe {
		h.Status.State = infrav1.MetalHostStateDeprovisioning
	}
	if err := r.Client.Status().Patch(ctx, h, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to update the state of the released MetalHost %s: %w", h.Name, err)
	}
	return nil
}

// reset asks the node at address to wipe itself (a control-plane node leaves etcd first) and
// power off.
func (r *MachineReconciler) reset(ctx context.Context, cluster *clusterv1.Cluster, address string) error {
	if address == "" {
		return errors.New("no address")
	}
	bundle, err := clustersecrets.Get(ctx, r.Client, cluster)
	if err != nil {
		return err
	}
	c, err := r.TalosClients.New(ctx, bundle, address)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	return c.Reset(ctx)
}

// deleteOrphan releases the host of a TalosMetalMachine whose Machine is gone: powered off,
// to be wiped.
func (r *MachineReconciler) deleteOrphan(ctx context.Context, m *infrav1.TalosMetalMachine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, machineFinalizer) {
		return ctrl.Result{}, nil
	}
	if h, err := r.host(ctx, m); err != nil {
		return ctrl.Result{}, err
	} else if h != nil {
		if bmc, err := bmcOf(ctx, r.Client, r.BMC, h); err == nil {
			_ = bmc.PowerOff(ctx)
		}
		if err := r.release(ctx, h, mayHoldNode(h, m), nil); err != nil {
			return ctrl.Result{}, err
		}
	}
	patch := client.MergeFrom(m.DeepCopy())
	controllerutil.RemoveFinalizer(m, machineFinalizer)
	return ctrl.Result{}, r.Client.Patch(ctx, m, patch)
}
