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

package taloscontrolplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/infrastructure/metal"
	"github.com/talon-capi/talon/internal/record"
)

// The steps of an in-place update of one node. Each is recorded on the Machine
// (InPlaceUpdateAnnotation) before it is acted on, so that a restarted manager goes on from
// the step it reached: every step can be taken again without harm. A new Kubernetes version
// goes as talosctl upgrade-k8s takes it: first the control-plane components of every node,
// node by node (Components, ComponentsVerify, then Parked until every node is there), then
// each node's kubelet with the rest of its config (Apply...).
const (
	// stepRender: the TalosConfig has the new spec; its data Secret is rendered again.
	stepRender = "Render"
	// stepComponents: the new config is applied with the node's current kubelet, so that
	// only the control-plane components (static pods) change.
	stepComponents = "Components"
	// stepComponentsVerify: the node's static pods must run the new version and etcd be
	// healthy before the next node.
	stepComponentsVerify = "ComponentsVerify"
	// stepParked: the node's components are updated; its kubelet waits for every other
	// node's components.
	stepParked = "Parked"
	// stepDrain: the node is cordoned and drained before an upgrade or a reboot.
	stepDrain = "Drain"
	// stepApply: the new config is applied (and, for a new Talos version, its installer
	// run), staged for the next boot when the change needs a reboot.
	stepApply = "Apply"
	// stepReboot: the node is rebooted; the step ends when it reports another boot ID.
	stepReboot = "Reboot"
	// stepVerify: the node must run the new config and versions and be healthy before the
	// Machine gets the new spec and the next node is started.
	stepVerify = "Verify"
)

// rebootGrace is how long remediation waits for a node the in-place update rebooted: a
// node that has not come back by then may be remediated.
const rebootGrace = 10 * time.Minute

// rebootAgain is how long a node may keep its boot ID after a Reboot before the Reboot is
// sent again (the manager may have stopped between the record and the call).
const rebootAgain = 2 * time.Minute

// inPlaceRecord is a Machine's InPlaceUpdateAnnotation: the update of its node under way.
type inPlaceRecord struct {
	// Version and ConfigHash are what the node is updated to: the control plane's version
	// and configHash(controlPlaneConfig) when the update started or last changed.
	Version    string `json:"version"`
	ConfigHash string `json:"configHash"`
	// FromInstaller, FromKubelet and FromReboot describe the node's config before the
	// update: its installer, its kubelet image and its RebootDigest, which the new config
	// is compared with.
	FromInstaller string `json:"fromInstaller,omitempty"`
	FromKubelet   string `json:"fromKubelet,omitempty"`
	FromReboot    string `json:"fromReboot"`
	// Step is the step reached.
	Step string `json:"step"`
	// Upgrade is the installer run at the Apply step, when the Talos version changes, and
	// Installed says it ran: the node boots the new version before it gets the new config
	// (a config of a newer contract is refused by an older Talos).
	Upgrade   string `json:"upgrade,omitempty"`
	Installed bool   `json:"installed,omitempty"`
	// Reboot says the new config needs a reboot of its own: it is staged for the next boot
	// (after an upgrade's reboot, the new config is applied without one unless it needs it).
	Reboot bool `json:"reboot,omitempty"`
	// Applied says the new config was applied (or staged).
	Applied bool `json:"applied,omitempty"`
	// Cordoned says the control plane cordoned the node (and uncordons it at the end).
	Cordoned bool `json:"cordoned,omitempty"`
	// BootID is the node's boot before the Reboot step, and RebootSent when it was sent.
	BootID     string       `json:"bootID,omitempty"`
	RebootSent *metav1.Time `json:"rebootSent,omitempty"`
	// Started is when the update began (absent from records of older Talon versions).
	Started *metav1.Time `json:"started,omitempty"`
}

// startedTime is when the update of rec began, or the zero time when its record does not say.
func (rec inPlaceRecord) startedTime() time.Time {
	if rec.Started == nil {
		return time.Time{}
	}
	return rec.Started.Time
}

// recordOf reads m's in-place update record; ok is false when there is none.
func recordOf(m *clusterv1.Machine) (inPlaceRecord, bool, error) {
	raw, ok := m.Annotations[controlplanev1.InPlaceUpdateAnnotation]
	if !ok {
		return inPlaceRecord{}, false, nil
	}
	var rec inPlaceRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return inPlaceRecord{}, true, fmt.Errorf("annotation %s of Machine %s is not a record Talon wrote: %w", controlplanev1.InPlaceUpdateAnnotation, m.Name, err)
	}
	return rec, true, nil
}

// writeRecord records rec on m before the step it names is taken.
func (r *Reconciler) writeRecord(ctx context.Context, m *clusterv1.Machine, rec inPlaceRecord) error {
	// Cluster API's mark of an in-place update: the Machine's Updating condition is true
	// (and its Ready false) while it is there. Talon sets it on its control-plane Machines;
	// on workers Cluster API sets and removes it itself.
	return r.writeRecordMarked(ctx, m, rec, true)
}

// writeRecordMarked records rec on m, with Cluster API's in-place update mark when mark.
func (r *Reconciler) writeRecordMarked(ctx context.Context, m *clusterv1.Machine, rec inPlaceRecord, mark bool) error {
	data, _ := json.Marshal(rec) //nolint:errchkjson // a plain struct always marshals
	before := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[controlplanev1.InPlaceUpdateAnnotation] = string(data)
	if mark {
		m.Annotations[clusterv1.UpdateInProgressAnnotation] = ""
	}
	if err := r.Client.Patch(ctx, m, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to record the in-place update of Machine %s: %w", m.Name, err)
	}
	return nil
}

// inPlaceable reports whether everything that keeps m from being up to date can be changed
// on its node: the Kubernetes version and the controlPlaneConfig. A new infrastructure
// template or rollout.after replaces the Machine.
func (s *scope) inPlaceable(m *clusterv1.Machine) bool {
	spec := s.tcp.Spec
	if m.Annotations[InfrastructureTemplateAnnotation] != spec.MachineTemplate.Spec.InfrastructureRef.Name {
		return false
	}
	if !spec.Rollout.After.IsZero() && spec.Rollout.After.Before(ptrNow()) && m.CreationTimestamp.Before(&spec.Rollout.After) {
		return false
	}
	return spec.ControlPlaneConfig.GenerateType != bootstrapv1.GenerateTypeNone
}

// toReplace are the outdated Machines the rollout replaces: all of them, except under the
// InPlace strategy, which replaces only those it cannot update in place.
func (s *scope) toReplace() []*clusterv1.Machine {
	var out []*clusterv1.Machine
	for _, m := range s.outdated() {
		if s.tcp.Spec.Rollout.Strategy.Type != controlplanev1.InPlaceStrategyType || !s.inPlaceable(m) {
			out = append(out, m)
		}
	}
	return out
}

// toUpdate are the outdated Machines the InPlace strategy updates on their nodes.
func (s *scope) toUpdate() []*clusterv1.Machine {
	if s.tcp.Spec.Rollout.Strategy.Type != controlplanev1.InPlaceStrategyType {
		return nil
	}
	var out []*clusterv1.Machine
	for _, m := range s.outdated() {
		if s.inPlaceable(m) {
			out = append(out, m)
		}
	}
	return out
}

// desiredConfigSpec is the TalosConfig spec of a control-plane Machine: controlPlaneConfig,
// for a control-plane node named after its Machine unless told otherwise (its etcd member
// carries the name, and a person reads it in both places).
func desiredConfigSpec(tcp *controlplanev1.TalosControlPlane) bootstrapv1.TalosConfigSpec {
	spec := *tcp.Spec.ControlPlaneConfig.DeepCopy()
	spec.GenerateType = bootstrapv1.GenerateTypeControlPlane
	if spec.Hostname.Source == "" {
		spec.Hostname.Source = bootstrapv1.HostnameSourceMachineName
	}
	return spec
}

// reconcileUpdates updates the outdated Machines in place, one node at a time: a node whose
// update is under way is taken to its next step (also one that is up to date again because
// the spec went back: it is taken back to the spec); otherwise, when etcd and every node are
// healthy, the next node starts: an outdated Machine without a record, or, once every
// outdated Machine has its components updated, the next parked one.
func (r *Reconciler) reconcileUpdates(ctx context.Context, s *scope, outdated []*clusterv1.Machine) (ctrl.Result, error) {
	var fresh, parked []*clusterv1.Machine
	for _, m := range s.active() {
		rec, ok, err := recordOf(m)
		switch {
		case err != nil:
			// A person must fix or remove the annotation: retrying changes nothing.
			s.blocked = err.Error()
			return ctrl.Result{}, nil //nolint:nilerr // reported in the conditions
		case !ok:
			if slices.Contains(outdated, m) {
				fresh = append(fresh, m)
			}
		case rec.Step == stepParked:
			parked = append(parked, m)
		default:
			return r.updateStep(ctx, s, m, rec)
		}
	}
	if len(fresh) == 0 && len(parked) == 0 {
		return ctrl.Result{}, nil
	}
	if why := s.updateGate(); why != "" {
		s.blocked = "In-place update waits: " + why
		return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
	}
	if len(fresh) > 0 {
		// Checked before any node of the update starts, against what each one runs.
		if why := r.versionRefusals(ctx, s.bundle, fresh, desiredConfigSpec(s.tcp), s.tcp.Spec.Version); why != "" {
			s.blocked = why
			return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
		}
		return r.startUpdate(ctx, s, fresh[0])
	}
	m := parked[0]
	rec, _, _ := recordOf(m)
	rec.Step = stepDrain
	return ctrl.Result{RequeueAfter: converging}, r.writeRecord(ctx, m, rec)
}

// updateGate says why no node may be touched now, or "": etcd must be healthy (every member
// a healthy voter the nodes agree on) and every control-plane Node and static pod Ready. It
// is asked before a node is started and again before each disruptive step (an installer, a
// config, a reboot), since a drain or a reboot of this node may take long.
func (s *scope) updateGate() string {
	if healthy, why := s.etcdHealth(); !healthy {
		return "etcd is not healthy: " + orDefault(why, "no etcd member list")
	}
	problems := s.componentProblems()
	if s.componentsErr != nil {
		problems = append(problems, s.componentsErr.Error())
	}
	if len(problems) > 0 {
		return "the control plane is not healthy: " + strings.Join(problems, "; ")
	}
	return ""
}

// versionRefusals says why the nodes of machines may not be updated to Kubernetes version
// and the TalosConfig spec, or "" (see versionRefusal).
func (r *Reconciler) versionRefusals(ctx context.Context, bundle *secrets.Bundle, machines []*clusterv1.Machine, spec bootstrapv1.TalosConfigSpec, version string) string {
	for _, m := range machines {
		if m.Spec.Bootstrap.DataSecretName == nil {
			return fmt.Sprintf("Cannot update Machine %s in place: it has no bootstrap data", m.Name)
		}
		secret := &corev1.Secret{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: *m.Spec.Bootstrap.DataSecretName}, secret); err != nil {
			return fmt.Sprintf("In-place update waits: failed to read the data Secret of Machine %s: %v", m.Name, err)
		}
		node, err := r.TalosClients.New(ctx, bundle, controlplane.MachineAddress(m))
		if err != nil {
			return fmt.Sprintf("In-place update waits: no connection to Machine %s (node %s): %v", m.Name, controlplane.MachineAddress(m), err)
		}
		why := versionRefusal(ctx, node, m, secret, spec, version)
		_ = node.Close()
		if why != "" {
			return why
		}
	}
	return ""
}

// versionRefusal says why m's node may not be updated to Kubernetes version and the
// TalosConfig spec, or "": the Talos it runs afterwards (the spec's Image Factory release on
// a node that installs from an installer, as secret, its data Secret, says; else the one it
// runs now) must run that Kubernetes version, and a new release must upgrade from the one
// the node runs now, as its Talos API says.
func versionRefusal(ctx context.Context, node talosclient.Client, m *clusterv1.Machine, secret *corev1.Secret, spec bootstrapv1.TalosConfigSpec, version string) string {
	installs := ""
	if secret.Annotations[bootstrapv1.ImageFactoryInstallerAnnotation] != "" {
		release, err := configgen.FactoryRelease(spec)
		if err != nil {
			return fmt.Sprintf("In-place update of Machine %s refused: %v", m.Name, err)
		}
		installs = release
	}
	running, err := node.Version(ctx)
	if err != nil {
		return fmt.Sprintf("In-place update waits: Machine %s (node %s) does not answer its Talos version: %v", m.Name, controlplane.MachineAddress(m), err)
	}
	if err := configgen.CheckNodeUpdate(running, installs, version); err != nil {
		return fmt.Sprintf("In-place update refused before it starts: Machine %s (node %s) runs Talos %s: %v", m.Name, controlplane.MachineAddress(m), running, err)
	}
	return ""
}

// startUpdate records the update of m's node, then gives its TalosConfig the new spec.
func (r *Reconciler) startUpdate(ctx context.Context, s *scope, m *clusterv1.Machine) (ctrl.Result, error) {
	config, secret, err := r.configAndData(ctx, s, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	fromReboot, err := controlplane.RebootDigest(secret.Data["value"])
	if err != nil {
		s.blocked = fmt.Sprintf("Cannot update Machine %s in place: its current config does not load: %v", m.Name, err)
		return ctrl.Result{}, nil
	}
	fromKubelet, err := controlplane.KubeletImage(secret.Data["value"])
	if err != nil {
		s.blocked = fmt.Sprintf("Cannot update Machine %s in place: its current config does not load: %v", m.Name, err)
		return ctrl.Result{}, nil
	}
	rec := inPlaceRecord{
		Version: s.tcp.Spec.Version, ConfigHash: configHash(s.tcp.Spec.ControlPlaneConfig),
		FromInstaller: secret.Annotations[bootstrapv1.ImageFactoryInstallerAnnotation], FromKubelet: fromKubelet, FromReboot: fromReboot,
		Step: stepRender, Started: ptr.To(metav1.Now()),
	}
	if err := r.writeRecord(ctx, m, rec); err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Updating a control-plane Machine in place", "Machine", klog.KObj(m), "version", rec.Version, "was", m.Spec.Version)
	record.Event(r.Events, m, corev1.EventTypeNormal, "InPlaceUpdateStarted", "UpdateInPlace", "Updating the node in place to Kubernetes %s", rec.Version)
	return ctrl.Result{RequeueAfter: converging}, r.ensureConfigSpec(ctx, s, config, rec)
}

// ensureConfigSpec marks m's TalosConfig with the Kubernetes version rec updates to, for the
// bootstrap provider to render it again, and once it is marked gives it the new spec: two
// updates, as the bootstrap webhook allows a new spec only on a TalosConfig marked before.
func (r *Reconciler) ensureConfigSpec(ctx context.Context, s *scope, config *bootstrapv1.TalosConfig, rec inPlaceRecord) error {
	spec := desiredConfigSpec(s.tcp)
	if equality.Semantic.DeepEqual(config.Spec, spec) && config.Annotations[bootstrapv1.InPlaceUpdateAnnotation] == rec.Version {
		return nil
	}
	before := config.DeepCopy()
	if config.Annotations == nil {
		config.Annotations = map[string]string{}
	}
	if _, marked := config.Annotations[bootstrapv1.InPlaceUpdateAnnotation]; marked {
		// The bootstrap webhook lets the spec of a marked TalosConfig change, and only then.
		config.Spec = spec
	}
	config.Annotations[bootstrapv1.InPlaceUpdateAnnotation] = rec.Version
	if err := r.Client.Patch(ctx, config, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to give TalosConfig %s its new spec: %w", config.Name, err)
	}
	return nil
}

// configAndData reads m's TalosConfig and its data Secret.
func (r *Reconciler) configAndData(ctx context.Context, s *scope, m *clusterv1.Machine) (*bootstrapv1.TalosConfig, *corev1.Secret, error) {
	config, ok := s.configs[m.Spec.Bootstrap.ConfigRef.Name]
	if !ok || m.Spec.Bootstrap.DataSecretName == nil {
		return nil, nil, fmt.Errorf("machine %s has no TalosConfig with a data Secret", m.Name)
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: *m.Spec.Bootstrap.DataSecretName}, secret); err != nil {
		return nil, nil, fmt.Errorf("failed to read the data Secret of Machine %s: %w", m.Name, err)
	}
	return config, secret, nil
}

// nodeConfig is the config m's node is to run: the data in secret as m's infrastructure
// serves it. Talon's boot service adds a bare-metal host's own settings (its static
// addresses, the VIP, its provider ID and install disk), which the node keeps.
func (r *Reconciler) nodeConfig(ctx context.Context, m *clusterv1.Machine, secret *corev1.Secret) ([]byte, error) {
	return metal.ServedConfig(ctx, r.Client, m, secret)
}

// stopped stops the rollout at m's step with a message naming the node and the step.
func stopped(s *scope, m *clusterv1.Machine, step string, err error) {
	s.blocked = fmt.Sprintf("In-place update stopped at Machine %s (node %s), step %s: %v", m.Name, controlplane.MachineAddress(m), step, err)
}

// updateStep takes m's node to the next step of its update.
func (r *Reconciler) updateStep(ctx context.Context, s *scope, m *clusterv1.Machine, rec inPlaceRecord) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m), "step", rec.Step)
	config, secret, err := r.configAndData(ctx, s, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if want := (inPlaceRecord{Version: s.tcp.Spec.Version, ConfigHash: configHash(s.tcp.Spec.ControlPlaneConfig)}); rec.Version != want.Version || rec.ConfigHash != want.ConfigHash {
		// The spec changed during the update (a fix after a failed step): the node is taken
		// to the new spec, from the render on, with what it ran before the update.
		// An installer that ran stays installed (the node boots it, or already did): the
		// node's installer is then unknown, and the new spec's is installed over it.
		if rec.Installed {
			rec.FromInstaller = ""
		}
		rec.Version, rec.ConfigHash, rec.Step, rec.Upgrade, rec.Installed, rec.Reboot, rec.Applied =
			want.Version, want.ConfigHash, stepRender, "", false, false, false
		if err := r.writeRecord(ctx, m, rec); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("The spec changed during the in-place update: rendering again")
	}
	if err := r.ensureConfigSpec(ctx, s, config, rec); err != nil {
		return ctrl.Result{}, err
	}
	address := controlplane.MachineAddress(m)
	node, err := r.TalosClients.New(ctx, s.bundle, address)
	if err != nil {
		stopped(s, m, rec.Step, err)
		return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
	}
	defer node.Close() //nolint:errcheck // a client connection

	data, err := r.nodeConfig(ctx, m, secret)
	if err != nil {
		stopped(s, m, rec.Step, err)
		return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
	}
	switch rec.Step {
	case stepRender:
		if secret.Annotations[bootstrapv1.RenderedForAnnotation] != configgen.RenderedFor(desiredConfigSpec(s.tcp), rec.Version) {
			s.waiting = fmt.Sprintf("Waiting for the config of Machine %s to be rendered for %s", m.Name, rec.Version)
			return ctrl.Result{RequeueAfter: converging}, nil
		}
		// What the new config needs, decided once and recorded before anything is done.
		next, err := controlplane.RebootDigest(data)
		if err == nil {
			var kubelet string
			kubelet, err = controlplane.KubeletImage(data)
			if installer := secret.Annotations[bootstrapv1.ImageFactoryInstallerAnnotation]; installer != "" && installer != rec.FromInstaller {
				rec.Upgrade = installer
			}
			// With a new Talos version the node is upgraded first and then gets its whole
			// new config: an older Talos may refuse the new config.
			if err == nil && kubelet != rec.FromKubelet && rec.FromKubelet != "" && rec.Upgrade == "" {
				rec.Step = stepComponents
			}
		}
		if err != nil {
			stopped(s, m, rec.Step, err)
			return ctrl.Result{}, nil
		}
		rec.Reboot = next != rec.FromReboot
		if rec.Step == stepRender {
			rec.Step = stepDrain
		}
		return ctrl.Result{RequeueAfter: converging}, r.writeRecord(ctx, m, rec)

	case stepComponents:
		r.forfeitLeadership(ctx, node, log)
		pinned, err := controlplane.WithKubeletImage(data, rec.FromKubelet)
		if err == nil {
			err = node.ApplyConfiguration(ctx, pinned, false)
		}
		switch {
		case errors.Is(err, talosclient.ErrRebootRequired):
			// Talos before 1.14 wants a reboot for the rest of the change: the components
			// change with it, at the node's own turn.
			rec.Step = stepParked
		case err != nil:
			stopped(s, m, rec.Step, err)
			return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
		default:
			rec.Step = stepComponentsVerify
		}
		log.Info("Applied the new control-plane components", "kubelet", rec.FromKubelet)
		return ctrl.Result{RequeueAfter: converging}, r.writeRecord(ctx, m, rec)

	case stepComponentsVerify:
		if why := s.componentsRun(m, rec.Version); why != "" {
			s.waiting = fmt.Sprintf("Waiting for Machine %s: %s", m.Name, why)
			return ctrl.Result{RequeueAfter: converging}, nil
		}
		rec.Step = stepParked
		return ctrl.Result{RequeueAfter: converging}, r.writeRecord(ctx, m, rec)

	case stepDrain:
		if rec.Reboot || rec.Upgrade != "" {
			if !rec.Cordoned {
				rec.Cordoned = true
				if err := r.writeRecord(ctx, m, rec); err != nil {
					return ctrl.Result{}, err
				}
			}
			left, err := r.drain(ctx, s, m)
			if err != nil {
				stopped(s, m, rec.Step, err)
				return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
			}
			if left > 0 {
				s.waiting = fmt.Sprintf("Draining the Node of Machine %s before its reboot: %d Pods left", m.Name, left)
				return ctrl.Result{RequeueAfter: converging}, nil
			}
		}
		rec.Step = stepApply
		return ctrl.Result{RequeueAfter: converging}, r.writeRecord(ctx, m, rec)

	case stepApply:
		if why := s.updateGate(); why != "" {
			s.blocked = fmt.Sprintf("In-place update of Machine %s waits before step %s: %s", m.Name, rec.Step, why)
			return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
		}
		// Leadership moves off the node first: its member stops serving for a moment when
		// its etcd or kube-apiserver restarts.
		r.forfeitLeadership(ctx, node, log)
		if rec.Upgrade != "" && !rec.Installed {
			log.Info("Installing the new Talos version", "installer", rec.Upgrade)
			if err := node.InstallUpgrade(ctx, rec.Upgrade); err != nil {
				stopped(s, m, rec.Step, err)
				record.Event(r.Events, m, corev1.EventTypeWarning, "InPlaceUpdateFailed", "UpdateInPlace", "Installing %s failed: %v", rec.Upgrade, err)
				return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
			}
			return r.rebootStep(ctx, s, m, node, func(rec *inPlaceRecord) { rec.Installed = true }, rec)
		}
		err := node.ApplyConfiguration(ctx, data, rec.Reboot)
		if errors.Is(err, talosclient.ErrRebootRequired) && !rec.Reboot {
			// Talos before 1.14 decides itself what needs a reboot: the node is drained
			// first, then the config staged.
			rec.Reboot, rec.Step = true, stepDrain
			return ctrl.Result{RequeueAfter: converging}, r.writeRecord(ctx, m, rec)
		}
		if err != nil {
			stopped(s, m, rec.Step, err)
			return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
		}
		log.Info("Applied the new config", "reboot", rec.Reboot)
		if rec.Reboot {
			return r.rebootStep(ctx, s, m, node, func(rec *inPlaceRecord) { rec.Applied = true }, rec)
		}
		rec.Applied, rec.Step = true, stepVerify
		return ctrl.Result{RequeueAfter: converging}, r.writeRecord(ctx, m, rec)

	case stepReboot:
		bootID, err := node.BootID(ctx)
		switch {
		case err != nil:
			s.waiting = fmt.Sprintf("Waiting for Machine %s to come back from its reboot", m.Name)
			return ctrl.Result{RequeueAfter: converging}, nil
		case bootID != rec.BootID:
			// Back from the reboot: after an upgrade the node gets its new config; after the
			// config, it is verified.
			rec.Step, rec.RebootSent = stepVerify, nil
			if !rec.Applied {
				rec.Step = stepApply
			}
			return ctrl.Result{RequeueAfter: converging}, r.writeRecord(ctx, m, rec)
		case rec.RebootSent != nil && time.Since(rec.RebootSent.Time) < rebootAgain:
			s.waiting = fmt.Sprintf("Waiting for Machine %s to reboot", m.Name)
			return ctrl.Result{RequeueAfter: converging}, nil
		}
		if why := s.updateGate(); why != "" {
			s.blocked = fmt.Sprintf("In-place update of Machine %s waits before its reboot: %s", m.Name, why)
			return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
		}
		rec.RebootSent = ptrNow()
		if err := r.writeRecord(ctx, m, rec); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("Rebooting the node")
		if err := node.Reboot(ctx); err != nil {
			stopped(s, m, rec.Step, err)
		}
		return ctrl.Result{RequeueAfter: converging}, nil

	case stepVerify:
		if why := r.verifyUpdated(ctx, s, m, node, rec, data); why != "" {
			s.waiting = fmt.Sprintf("Waiting for Machine %s: %s", m.Name, why)
			return ctrl.Result{RequeueAfter: converging}, nil
		}
		if rec.Cordoned {
			if err := r.uncordon(ctx, s, m); err != nil {
				stopped(s, m, rec.Step, err)
				return ctrl.Result{RequeueAfter: converging}, nil
			}
		}
		return r.finishUpdate(ctx, m, config, rec)
	}
	s.blocked = fmt.Sprintf("Machine %s records an unknown in-place update step %q", m.Name, rec.Step)
	return ctrl.Result{}, nil
}

// rebootStep records what was done (done) and the node's boot before its reboot, then
// moves m to the Reboot step.
func (r *Reconciler) rebootStep(ctx context.Context, s *scope, m *clusterv1.Machine, node talosclient.Client, done func(*inPlaceRecord), rec inPlaceRecord) (ctrl.Result, error) {
	bootID, err := node.BootID(ctx)
	if err != nil {
		stopped(s, m, rec.Step, err)
		return ctrl.Result{RequeueAfter: unhealthyRecheck}, nil
	}
	done(&rec)
	rec.BootID, rec.Step = bootID, stepReboot
	return ctrl.Result{RequeueAfter: converging}, r.writeRecord(ctx, m, rec)
}

// forfeitLeadership moves etcd leadership off the node, if it leads; a failure is logged:
// etcd elects another leader by itself when the member stops.
func (r *Reconciler) forfeitLeadership(ctx context.Context, node talosclient.Client, log logr.Logger) {
	if err := node.EtcdForfeitLeadership(ctx); err != nil {
		log.Info("The node's etcd member did not give up leadership", "reason", err.Error())
	}
}

// componentsRun says what keeps m's control-plane components from counting as updated to
// version: its static pods must be Ready with images of that version, and etcd healthy.
func (s *scope) componentsRun(m *clusterv1.Machine, version string) string {
	c, ok := s.components[m.Name]
	if !ok {
		return "its Node is not seen in the workload cluster"
	}
	if problems := c.problems(); len(problems) > 0 {
		return strings.Join(problems, "; ")
	}
	for _, component := range staticPods {
		if image := c.pods[component].image; imageTag(image) != version {
			return fmt.Sprintf("%s on %s runs %s, want %s", component, c.node, image, version)
		}
	}
	if healthy, why := s.etcdHealth(); !healthy {
		return "etcd is not healthy: " + why
	}
	return ""
}

// verifyUpdated says what keeps m's node from counting as updated: it must run the new
// config and Talos version (when upgraded), its Node must be Ready with the new kubelet,
// its static pods Ready with the new images, and etcd healthy.
func (r *Reconciler) verifyUpdated(ctx context.Context, s *scope, m *clusterv1.Machine, node talosclient.Client, rec inPlaceRecord, data []byte) string {
	if why := nodeRuns(ctx, node, rec, data); why != "" {
		return why
	}
	if why := s.componentsRun(m, rec.Version); why != "" {
		return why
	}
	if c := s.components[m.Name]; c.kubelet != rec.Version {
		return fmt.Sprintf("Node %s runs kubelet %s, want %s", c.node, c.kubelet, rec.Version)
	}
	return ""
}

// nodeRuns says what keeps node from running the new config data and, when rec upgrades
// it, the new Talos version; "" when it runs them.
func nodeRuns(ctx context.Context, node talosclient.Client, rec inPlaceRecord, data []byte) string {
	if want := imageTag(rec.Upgrade); want != "" {
		version, err := node.Version(ctx)
		if err != nil {
			return "the node does not answer its version: " + err.Error()
		}
		if version != want {
			return fmt.Sprintf("the node runs Talos %s, want %s", version, want)
		}
	}
	running, err := node.MachineConfig(ctx)
	if err != nil {
		return err.Error()
	}
	if same, err := controlplane.SameConfig(running, data); err != nil || !same {
		return fmt.Sprintf("the node does not run the new config yet (%v)", err)
	}
	return ""
}

// finishUpdate gives m the spec its node now runs and ends its record; the TalosConfig is
// no longer marked for rendering again.
func (r *Reconciler) finishUpdate(ctx context.Context, m *clusterv1.Machine, config *bootstrapv1.TalosConfig, rec inPlaceRecord) (ctrl.Result, error) {
	// The TalosConfig first: a manager stopped in between resumes at Verify, which marks it
	// again; the other way round it would stay marked with no record to unmark it.
	configBefore := config.DeepCopy()
	delete(config.Annotations, bootstrapv1.InPlaceUpdateAnnotation)
	if err := r.Client.Patch(ctx, config, client.MergeFrom(configBefore)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to unmark TalosConfig %s: %w", config.Name, err)
	}
	before := m.DeepCopy()
	m.Spec.Version = rec.Version
	m.Annotations[ConfigHashAnnotation] = rec.ConfigHash
	delete(m.Annotations, controlplanev1.InPlaceUpdateAnnotation)
	delete(m.Annotations, clusterv1.UpdateInProgressAnnotation)
	if err := r.Client.Patch(ctx, m, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to finish the in-place update of Machine %s: %w", m.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Updated a control-plane Machine in place", "Machine", klog.KObj(m), "version", rec.Version, "rebooted", rec.Reboot)
	observeOperation(operationInPlaceUpdate, rec.startedTime())
	record.Event(r.Events, m, corev1.EventTypeNormal, "InPlaceUpdated", "UpdateInPlace", "The node runs Kubernetes %s%s", rec.Version, map[bool]string{true: " after a reboot"}[rec.Reboot])
	return ctrl.Result{RequeueAfter: converging}, nil
}

// imageTag is the tag of an image reference (without a digest), or "".
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return ""
	}
	return image[i+1:]
}
