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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/internal/infra"
	"github.com/talon-capi/talon/infrastructure/metal/power"
	"github.com/talon-capi/talon/internal/record"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=metalhosts;metalhosts/status;metalhosts/finalizers,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="events.k8s.io",resources=events,verbs=create;patch

// hostFinalizer holds a MetalHost until no Machine uses it and it is powered off.
const hostFinalizer = "metalhost.infrastructure.cluster.x-k8s.io"

// Timings of the bare-metal reconcilers.
const (
	// bmcRetry is how soon a BMC that failed is asked again.
	bmcRetry = 10 * time.Second
	// powerRefresh is how often the power state of an idle host is read again.
	powerRefresh = time.Minute
	// DefaultBootTimeout is how long a host may take from its power cycle to fetching its
	// iPXE script before Talon says it does not boot and cycles it again.
	DefaultBootTimeout = 10 * time.Minute
	// powerGrace is how long a host may report power off after Talon powered it on.
	powerGrace = 15 * time.Second
)

// BMCFactory makes the power.Controller of a BMC; power.New in production.
type BMCFactory func(address string, creds power.Credentials, insecureSkipVerify bool) (power.Controller, error)

// NewBMC is the BMCFactory of real BMCs, with power.DefaultTimeout.
func NewBMC(address string, creds power.Credentials, insecureSkipVerify bool) (power.Controller, error) {
	return power.New(address, creds, insecureSkipVerify)
}

// HostReconciler keeps each MetalHost's BMC state and lifecycle: it registers a host once
// its BMC answers, keeps an Available host powered off, and wipes a host that needs it before
// it becomes Available again.
type HostReconciler struct {
	Client client.Client
	// APIReader reads MetalHosts from the API server before a power action, where the cache
	// may lag behind a Machine's claim or this reconciler's own last boot request; Client
	// when nil.
	APIReader client.Reader
	// BMC makes BMC clients; NewBMC when nil.
	BMC BMCFactory
	// Events records lifecycle events on the MetalHosts.
	Events events.EventRecorder
	// BootTimeout bounds a wipe boot like a provisioning boot; DefaultBootTimeout when zero.
	BootTimeout time.Duration
}

// SetupWithManager registers the reconciler with mgr.
func (r *HostReconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return errors.New("metalhost reconciler needs a Client")
	}
	if r.BMC == nil {
		r.BMC = NewBMC
	}
	if r.APIReader == nil {
		r.APIReader = r.Client
	}
	if r.BootTimeout == 0 {
		r.BootTimeout = DefaultBootTimeout
	}
	err := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.MetalHost{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, hostStatusChanged{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretToHosts)).
		WithOptions(options).
		Named("metalhost").
		Complete(r)
	if err != nil {
		return fmt.Errorf("failed to set up the metalhost controller: %w", err)
	}
	return nil
}

// hostStatusChanged passes the status changes the reconciler acts on: a new state, a boot
// recorded. (A claim or a wipe record is in spec: it changes the generation.)
type hostStatusChanged struct{ predicate.Funcs }

// Update implements predicate.Predicate.
func (hostStatusChanged) Update(e event.UpdateEvent) bool {
	oldHost, ok1 := e.ObjectOld.(*infrav1.MetalHost)
	newHost, ok2 := e.ObjectNew.(*infrav1.MetalHost)
	if !ok1 || !ok2 {
		return false
	}
	return oldHost.Status.State != newHost.Status.State || len(oldHost.Status.Boots) != len(newHost.Status.Boots) ||
		!newHost.DeletionTimestamp.IsZero()
}

// secretToHosts maps a credentials Secret to the MetalHosts that use it.
func (r *HostReconciler) secretToHosts(ctx context.Context, o client.Object) []ctrl.Request {
	hosts := &infrav1.MetalHostList{}
	if err := r.Client.List(ctx, hosts, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var requests []ctrl.Request
	for _, h := range hosts.Items {
		if h.Spec.BMC != nil && h.Spec.BMC.CredentialsName == o.GetName() {
			requests = append(requests, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&h)})
		}
	}
	return requests
}

// Reconcile brings one MetalHost closer to where its lifecycle wants it.
func (r *HostReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	h := &infrav1.MetalHost{}
	if err := r.Client.Get(ctx, req.NamespacedName, h); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	patchHelper, err := patch.NewHelper(h, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		h.Status.ObservedGeneration = h.Generation
		reterr = errors.Join(reterr, infra.PatchReady(ctx, patchHelper, "MetalHost", h, infrav1.BMCReachableCondition))
	}()
	if h.DeletionTimestamp.IsZero() {
		controllerutil.AddFinalizer(h, hostFinalizer)
	}
	migrateRecords(h)
	if h.Status.State == "" {
		r.setState(h, infrav1.MetalHostStateRegistering, "Checking the BMC")
	}
	if !h.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, h)
	}
	if err := r.moveCredentials(ctx, h); err != nil {
		// Not fatal to the host's lifecycle: it stays reachable, only a move would lose it.
		ctrl.LoggerFrom(ctx).Error(err, "The BMC credentials will not move with the host")
	}
	bmc, err := r.bmcOf(ctx, h)
	if err != nil {
		return r.bmcFailed(h, err), nil
	}
	state, err := bmc.PowerState(ctx)
	if err != nil {
		return r.bmcFailed(h, err), nil
	}
	if conditions.IsFalse(h, infrav1.BMCReachableCondition) {
		// The BMC problem is solved; other problems stay until their step succeeds.
		h.Status.LastError = ""
	}
	infra.SetTruef(h, infrav1.BMCReachableCondition, "BMC %s answers; the host is %s", h.Spec.BMC.Address, state)
	h.Status.PowerState = string(state)

	claimed := h.Spec.ConsumerRef != nil
	switch h.Status.State {
	case infrav1.MetalHostStateRegistering, infrav1.MetalHostStateError, infrav1.MetalHostStateProvisioning, infrav1.MetalHostStateProvisioned:
		if claimed {
			// A claimed host being registered lost its status (clusterctl move, a restore from a
			// backup) but not its claim: the TalosMetalMachine that claimed it rebuilds the
			// state from its own record, without a power action.
			return ctrl.Result{RequeueAfter: powerRefresh}, nil
		}
		// Unclaimed, it is registered, in Error, or was released by a Machine whose update of
		// the host's state is not written yet or was lost: read again where the cache may lag
		// behind a new claim.
		if h.Status.State == infrav1.MetalHostStateProvisioning || h.Status.State == infrav1.MetalHostStateProvisioned {
			current := &infrav1.MetalHost{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(h), current); err != nil {
				return ctrl.Result{}, err
			}
			if current.Spec.ConsumerRef != nil || current.Status.State != h.Status.State {
				return ctrl.Result{RequeueAfter: infra.Converging}, nil
			}
		}
		if h.Status.State == infrav1.MetalHostStateProvisioned && !h.Spec.NeedsWipe {
			// A Machine never releases a host it provisioned without a reset (which goes
			// through Deprovisioning) or a wipe: the claim was lost (the MetalHost replaced or
			// applied without it). The Machine whose node runs here, if any, gets it back; else
			// the host may hold a node's data and is wiped before reuse.
			owner, err := r.machineOn(ctx, h)
			if err != nil {
				return ctrl.Result{}, err
			}
			if owner != nil {
				h.Spec.ConsumerRef = hostConsumerRef(owner)
				record.Event(r.Events, h, corev1.EventTypeWarning, "ClaimRestored", "Claim",
					"Provisioned without a claim in spec.consumerRef: claimed again for TalosMetalMachine %s, whose node runs here", owner.Name)
				return ctrl.Result{}, nil
			}
			h.Spec.NeedsWipe = true
			record.Event(r.Events, h, corev1.EventTypeWarning, "ClaimLost", "Release",
				"Provisioned without a claim in spec.consumerRef and no TalosMetalMachine's providerID names it: the host may hold a node's data and is wiped before reuse")
		}
		if h.Spec.NeedsWipe {
			r.startWipe(h)
			return ctrl.Result{}, nil
		}
		h.Status.LastError = ""
		r.setState(h, infrav1.MetalHostStateAvailable, "The BMC answers; the host is Available")
		return ctrl.Result{}, nil
	case infrav1.MetalHostStateAvailable:
		if h.Spec.NeedsWipe && !claimed {
			// Marked for a wipe while Available (by a person): no Machine gets it before.
			r.startWipe(h)
			return ctrl.Result{}, nil
		}
		// An idle host stays off; one a Machine claimed a moment ago is booting.
		if state == power.StateOn {
			current := &infrav1.MetalHost{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(h), current); err != nil {
				return ctrl.Result{}, err
			}
			if current.Status.State != infrav1.MetalHostStateAvailable || current.Spec.ConsumerRef != nil {
				return ctrl.Result{}, nil
			}
			if err := bmc.PowerOff(ctx); err != nil {
				return r.bmcFailed(h, err), nil
			}
			return ctrl.Result{RequeueAfter: infra.Converging}, nil
		}
		return ctrl.Result{RequeueAfter: powerRefresh}, nil
	case infrav1.MetalHostStateDeprovisioning:
		if claimed {
			// Its Machine is resetting it.
			return ctrl.Result{RequeueAfter: powerRefresh}, nil
		}
		return r.wipe(ctx, h, bmc, state)
	}
	return ctrl.Result{RequeueAfter: powerRefresh}, nil
}

// machineOn returns the TalosMetalMachine whose providerID names h (its node runs on h), nil
// when there is none.
func (r *HostReconciler) machineOn(ctx context.Context, h *infrav1.MetalHost) (*infrav1.TalosMetalMachine, error) {
	machines := &infrav1.TalosMetalMachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(h.Namespace)); err != nil {
		return nil, err
	}
	for i := range machines.Items {
		if m := &machines.Items[i]; m.Spec.ProviderID == ProviderID(h.Namespace, h.Name) && m.DeletionTimestamp.IsZero() {
			return m, nil
		}
	}
	return nil, nil
}

// migrateRecords moves the claim and the wipe record an earlier Talon kept in h's status to
// its spec, where clusterctl move and backups carry them (the patch writes spec before
// status).
func migrateRecords(h *infrav1.MetalHost) {
	if h.Status.DeprecatedConsumerRef != nil && h.Spec.ConsumerRef == nil {
		h.Spec.ConsumerRef = h.Status.DeprecatedConsumerRef
	}
	h.Spec.NeedsWipe = h.Spec.NeedsWipe || h.Status.DeprecatedNeedsWipe
	h.Status.DeprecatedConsumerRef = nil
	h.Status.DeprecatedNeedsWipe = false
}

// moveCredentials labels h's BMC credentials Secret for clusterctl move, which then moves it
// with the MetalHosts (their CRD carries the same label): a host moved to another management
// cluster keeps its credentials.
func (r *HostReconciler) moveCredentials(ctx context.Context, h *infrav1.MetalHost) error {
	if h.Spec.BMC == nil {
		return nil
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: h.Spec.BMC.CredentialsName}, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	if _, ok := secret.Labels[clusterctlv1.ClusterctlMoveLabel]; ok {
		return nil
	}
	patch := client.MergeFrom(secret.DeepCopy())
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[clusterctlv1.ClusterctlMoveLabel] = ""
	if err := r.Client.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("failed to label BMC credentials Secret %s for clusterctl move: %w", secret.Name, err)
	}
	return nil
}

// bmcOf returns the power.Controller of h's BMC, with the credentials of its Secret.
func (r *HostReconciler) bmcOf(ctx context.Context, h *infrav1.MetalHost) (power.Controller, error) {
	return bmcOf(ctx, r.Client, r.BMC, h)
}

// bmcOf returns the power.Controller of h's BMC, with the credentials of its Secret.
func bmcOf(ctx context.Context, c client.Client, factory BMCFactory, h *infrav1.MetalHost) (power.Controller, error) {
	if h.Spec.BMC == nil {
		return nil, errNoBMC
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: h.Spec.BMC.CredentialsName}, secret); err != nil {
		return nil, fmt.Errorf("cannot read BMC credentials Secret %s: %w", h.Spec.BMC.CredentialsName, err)
	}
	creds, err := power.CredentialsFromSecret(secret)
	if err != nil {
		return nil, err
	}
	return factory(h.Spec.BMC.Address, creds, h.Spec.BMC.DisableCertificateVerification)
}

// errNoBMC: the host has no spec.bmc.
var errNoBMC = errors.New("the MetalHost has no spec.bmc: set its BMC address and credentials Secret")

// bmcFailed records a BMC problem on h and says when to try again.
func (r *HostReconciler) bmcFailed(h *infrav1.MetalHost, err error) ctrl.Result {
	reason := infrav1.BMCUnreachableReason
	if errors.Is(err, errNoBMC) {
		reason = infrav1.NoBMCReason
	}
	msg := bmcProblem(h, err)
	infra.SetFalsef(h, infrav1.BMCReachableCondition, reason, "%s", msg)
	h.Status.LastError = msg
	if errors.Is(err, errNoBMC) {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: bmcRetry}
}

// bmcProblem says what went wrong with h's BMC, naming the host and the BMC.
func bmcProblem(h *infrav1.MetalHost, err error) string {
	if h.Spec.BMC == nil {
		return fmt.Sprintf("MetalHost %s: %v", h.Name, err)
	}
	return fmt.Sprintf("MetalHost %s: BMC %s: %v", h.Name, h.Spec.BMC.Address, err)
}

// setState moves h to state and records why in an event.
func (r *HostReconciler) setState(h *infrav1.MetalHost, state infrav1.MetalHostState, why string) {
	if h.Status.State == state {
		return
	}
	h.Status.State = state
	record.Event(r.Events, h, corev1.EventTypeNormal, string(state), "SetState", "%s", why)
}

// startWipe moves h, which needs a wipe, to Deprovisioning to be wiped, or to Error when
// Talon has nothing to wipe it with: then a person has to (no retry loop).
func (r *HostReconciler) startWipe(h *infrav1.MetalHost) {
	if h.Status.BootAssets == nil {
		r.setState(h, infrav1.MetalHostStateError, "No boot assets to wipe with")
		h.Status.LastError = fmt.Sprintf("MetalHost %s needs a wipe but Talon has no boot assets to wipe it with (it never booted Talos through this boot service): wipe its disks and set spec.needsWipe to false", h.Name)
		return
	}
	r.setState(h, infrav1.MetalHostStateDeprovisioning, "The host may hold a previous node's data: wiping it")
}

// wipe network-boots h into Talos with talos.experimental.wipe=system (Talos wipes the system
// disk and reboots, into maintenance mode) and, once Talos answers in maintenance mode with no
// system disk left, wipes its data disks when the host asks for it, powers it off and marks it
// Available.
func (r *HostReconciler) wipe(ctx context.Context, h *infrav1.MetalHost, bmc power.Controller, state power.State) (ctrl.Result, error) {
	if !h.Spec.NeedsWipe {
		r.setState(h, infrav1.MetalHostStateAvailable, "The host was reset")
		return ctrl.Result{}, nil
	}
	if h.Status.BootAssets == nil {
		r.setState(h, infrav1.MetalHostStateError, "No boot assets to wipe with")
		return ctrl.Result{}, nil
	}
	requested := h.Status.WipeRequested
	if requested == nil || time.Since(requested.Time) > r.BootTimeout {
		// The cache may not hold this reconciler's last request yet: never cycle twice for one.
		current := &infrav1.MetalHost{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(h), current); err != nil {
			return ctrl.Result{}, err
		}
		if current.Status.State != infrav1.MetalHostStateDeprovisioning || !current.Spec.NeedsWipe || current.Spec.ConsumerRef != nil {
			return ctrl.Result{RequeueAfter: infra.Converging}, nil
		}
		if later := current.Status.WipeRequested; later != nil && (requested == nil || requested.Before(later)) {
			h.Status.WipeRequested = later
			return ctrl.Result{RequeueAfter: infra.Converging}, nil
		}
		if requested != nil {
			what := "did not network-boot"
			switch {
			case lastBoot(h, infrav1.BootActionMaintenance, requested.Time) != nil:
				what = "booted into maintenance mode, but its wipe did not finish,"
			case lastBoot(h, infrav1.BootActionWipe, requested.Time) != nil:
				what = "network-booted to be wiped, but did not boot again into maintenance mode"
			}
			h.Status.LastError = fmt.Sprintf("MetalHost %s %s within %s of its power cycle to be wiped; power-cycling it again", h.Name, what, r.BootTimeout)
		}
		now := time.Now()
		if err := bootFromNetwork(ctx, bmc, h); err != nil {
			return r.bmcFailed(h, err), nil
		}
		h.Status.WipeRequested = &metav1.Time{Time: now}
		return ctrl.Result{RequeueAfter: infra.Converging}, nil
	}
	// Talos wipes the system disk in the wipe boot and reboots: the boot after it is into
	// maintenance mode.
	boot := lastBoot(h, infrav1.BootActionMaintenance, requested.Time)
	if boot == nil {
		return ctrl.Result{RequeueAfter: infra.Converging}, nil
	}
	if err := maintenanceMode(ctx, boot.Address); err != nil {
		ctrl.LoggerFrom(ctx).V(4).Info("Waiting for the wiped host to answer in maintenance mode", "address", boot.Address, "reason", err.Error())
		return ctrl.Result{RequeueAfter: infra.Converging}, nil
	}
	// Nothing is mounted in maintenance mode: every data disk can be wiped.
	wiped, err := checkWipe(ctx, boot.Address, h.Spec.WipeDataDisks)
	var unverified errWipeNotVerified
	switch {
	case errors.As(err, &unverified):
		// The wipe failed: wiped again from the start, with a new power cycle.
		h.Status.LastError = fmt.Sprintf("MetalHost %s booted into maintenance mode after its wipe boot, but %v; wiping it again", h.Name, err)
		h.Status.WipeRequested = nil
		return ctrl.Result{RequeueAfter: bmcRetry}, nil
	case err != nil:
		h.Status.LastError = fmt.Sprintf("MetalHost %s: Talos wiped its system disk, but %v", h.Name, err)
		return ctrl.Result{RequeueAfter: bmcRetry}, nil
	}
	if state == power.StateOn {
		if err := bmc.PowerOff(ctx); err != nil {
			return r.bmcFailed(h, err), nil
		}
	}
	h.Spec.NeedsWipe = false
	h.Status.WipeRequested = nil
	h.Status.LastError = ""
	h.Status.LastWipe = &infrav1.HostWipe{Method: infrav1.HostWipeNetworkBoot, Finished: metav1.Now(), Disks: wiped}
	why := "The host was wiped"
	if len(wiped) > 0 {
		why = "The host was wiped, with its disks " + strings.Join(wiped, ", ")
	}
	r.setState(h, infrav1.MetalHostStateAvailable, why)
	return ctrl.Result{}, nil
}

// reconcileDelete lets a MetalHost go once no Machine uses it, powered off when its BMC
// answers: a host without a working BMC (or credentials Secret) goes as it is.
func (r *HostReconciler) reconcileDelete(ctx context.Context, h *infrav1.MetalHost) (ctrl.Result, error) {
	if _, moving := h.Annotations[clusterctlv1.DeleteForMoveAnnotation]; moving {
		// clusterctl move created the host in another management cluster, which runs it now.
		controllerutil.RemoveFinalizer(h, hostFinalizer)
		return ctrl.Result{}, nil
	}
	if h.Spec.ConsumerRef != nil {
		h.Status.LastError = fmt.Sprintf("MetalHost %s is used by TalosMetalMachine %s: delete its Machine first", h.Name, h.Spec.ConsumerRef.Name)
		return ctrl.Result{RequeueAfter: powerRefresh}, nil
	}
	var err error
	if bmc, bmcErr := r.bmcOf(ctx, h); bmcErr == nil {
		err = bmc.PowerOff(ctx)
	} else if h.Spec.BMC != nil {
		err = bmcErr
	}
	if err != nil {
		record.Event(r.Events, h, corev1.EventTypeWarning, "NotPoweredOff", "Delete", "Deleted without powering the host off: %s", bmcProblem(h, err))
	}
	controllerutil.RemoveFinalizer(h, hostFinalizer)
	return ctrl.Result{}, nil
}

// bootFromNetwork makes h boot from the network once and power-cycles it.
func bootFromNetwork(ctx context.Context, bmc power.Controller, h *infrav1.MetalHost) error {
	mode := power.BootModeUEFI
	if h.Spec.Firmware == infrav1.FirmwareBIOS {
		mode = power.BootModeLegacy
	}
	if err := bmc.SetOneTimeBoot(ctx, power.BootDevice{Device: power.DevicePXE, Mode: mode}); err != nil {
		return err
	}
	return bmc.PowerCycle(ctx)
}

// lastBoot returns h's last network boot with action at or after since (to the second, as
// status keeps times), nil when there is none.
func lastBoot(h *infrav1.MetalHost, action infrav1.BootAction, since time.Time) *infrav1.BootRecord {
	since = since.Truncate(time.Second)
	for i := len(h.Status.Boots) - 1; i >= 0; i-- {
		b := &h.Status.Boots[i]
		if b.Time.Before(&metav1.Time{Time: since}) {
			return nil
		}
		if b.Action == action {
			return b
		}
	}
	return nil
}
