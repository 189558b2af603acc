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
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	etcdresource "github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	controlplanev1alpha3 "github.com/talon-capi/talon/api/controlplane/v1alpha3"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/internal/record"
)

// reconcileInitialization bootstraps etcd once, on the Machine recorded for it, and marks
// the control plane initialized when the workload API server answers.
//
// The choice of the Machine is written to the TalosControlPlane (BootstrapMachineAnnotation)
// before Bootstrap is called, and Bootstrap only ever goes to that Machine: a restarted or
// moved manager, or one that cannot reach the node for a while, never starts a second etcd
// cluster elsewhere. Another Machine is chosen only once the recorded one is gone and every
// remaining node says it runs no etcd member: whatever cluster the gone Machine may have
// formed went with it.
func (r *Reconciler) reconcileInitialization(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	active := s.active()
	if len(active) == 0 && s.tcp.Annotations[controlplanev1.BootstrapMachineAnnotation] == "" {
		return r.createMachine(ctx, s)
	}
	if s.etcd == nil {
		// No node answers with etcd's members: bootstrap (once, on the recorded Machine), then
		// wait for the members, which the record below needs.
		if result, err := r.bootstrapRecordedMachine(ctx, s); err != nil || !result.IsZero() {
			return result, err
		}
		s.waiting = "etcd is bootstrapped; waiting for a control-plane node to answer with etcd's members"
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	kube, err := r.workloadClient(ctx, s)
	if err == nil {
		_, err = kube.Discovery().ServerVersion()
	}
	if err != nil {
		s.waiting = fmt.Sprintf("etcd is bootstrapped; waiting for the workload API server: %v", err)
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	// The record that the cluster served comes before the status that says so.
	if err := r.recordEtcdCluster(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	log.Info("The control plane is initialized")
	s.tcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	return ctrl.Result{RequeueAfter: converging}, nil
}

// bootstrapRecordedMachine calls Bootstrap on the Machine recorded for it, choosing and
// recording one first when there is none. A zero result means Bootstrap went through (or
// had before) and the caller may wait for the API server.
func (r *Reconciler) bootstrapRecordedMachine(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	target := s.tcp.Annotations[controlplanev1.BootstrapMachineAnnotation]
	if target != "" && s.machineByName(target) == nil {
		if why := s.whyNoRebootstrap(); why != "" {
			s.waiting = fmt.Sprintf("Machine %s, chosen to bootstrap etcd, is gone, and another is chosen only when no node may hold etcd: %s", target, why)
			return ctrl.Result{RequeueAfter: converging}, nil
		}
		log.Info("The Machine chosen to bootstrap etcd is gone and no other node runs etcd: choosing again", "previous", target)
		if err := r.patchAnnotations(ctx, s.tcp, map[string]string{controlplanev1.BootstrapMachineAnnotation: ""}); err != nil {
			return ctrl.Result{}, err
		}
		target = ""
	}
	if target == "" {
		if why := s.bootstrappedWithoutRecord(); why != "" {
			s.waiting = why + "; it is never bootstrapped again: waiting for a control-plane node to answer with etcd's members " +
				"(if etcd is lost, restore the cluster from an etcd snapshot instead)"
			return ctrl.Result{RequeueAfter: converging}, nil
		}
	}
	if target == "" {
		active := s.active()
		if len(active) == 0 {
			return r.createMachine(ctx, s)
		}
		first := slices.MinFunc(active, func(a, b *clusterv1.Machine) int {
			return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
		})
		if controlplane.MachineAddress(first) == "" {
			s.waiting = fmt.Sprintf("Waiting for Machine %s to get an address", first.Name)
			return ctrl.Result{}, nil
		}
		// The record comes first: from here on, only this Machine is ever bootstrapped.
		if err := r.patchAnnotations(ctx, s.tcp, map[string]string{controlplanev1.BootstrapMachineAnnotation: first.Name}); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("Chose the Machine to bootstrap etcd", "Machine", first.Name)
		target = first.Name
	}
	m := s.machineByName(target)
	if !m.DeletionTimestamp.IsZero() {
		s.waiting = fmt.Sprintf("Machine %s, chosen to bootstrap etcd, is being deleted; another is chosen once it is gone", m.Name)
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	address := controlplane.MachineAddress(m)
	if address == "" {
		s.waiting = fmt.Sprintf("Waiting for Machine %s, chosen to bootstrap etcd, to get an address", m.Name)
		return ctrl.Result{}, nil
	}
	c, err := r.TalosClients.New(ctx, s.bundle, address)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() { _ = c.Close() }()
	bootstrap, from := c.Bootstrap, ""
	if s.tcp.Spec.RestoreFrom != nil {
		bootstrap = func(ctx context.Context) error { return r.bootstrapFromBackup(ctx, s, c) }
		from = " from TalosEtcdBackup " + s.tcp.Spec.RestoreFrom.BackupName
	}
	var refused *restoreRefusal
	switch err := bootstrap(ctx); {
	case err == nil:
		log.Info("Bootstrapped etcd"+from, "Machine", m.Name, "address", address)
		observeOperation(operationBootstrap, m.CreationTimestamp.Time)
		record.Event(r.Events, s.tcp, corev1.EventTypeNormal, "Bootstrapped", "Bootstrap", "Bootstrapped etcd%s on Machine %s", from, m.Name)
	case errors.Is(err, talosclient.ErrAlreadyBootstrapped):
		log.Info("etcd was already bootstrapped", "Machine", m.Name)
	case errors.As(err, &refused):
		s.waiting = fmt.Sprintf("Restoring etcd on Machine %s is refused: %s. Retrying in %s", m.Name, refused.message, refusedRetry)
		record.Event(r.Events, s.tcp, corev1.EventTypeWarning, "RestoreRefused", "Bootstrap", "%s", refused.message)
		return ctrl.Result{RequeueAfter: refusedRetry}, nil
	default:
		s.waiting = fmt.Sprintf("Bootstrapping etcd%s on Machine %s (recorded in annotation %s) waits, retrying: %v. Only this Machine is ever bootstrapped; "+
			"if it will never come up, delete it and another is chosen once no node runs etcd",
			from, m.Name, controlplanev1.BootstrapMachineAnnotation, err)
		if from != "" {
			// Each attempt downloads the whole snapshot again.
			return ctrl.Result{RequeueAfter: restoreRetry}, nil
		}
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	return ctrl.Result{}, nil
}

// bootstrappedWithoutRecord says why etcd is known to have been bootstrapped although no
// Machine is recorded for it, or "": the control plane was taken over from Sidero Labs'
// CACPPT, which recorded the bootstrap in its status.bootstrapped (kept through conversion),
// or was recorded as having served (EtcdClusterAnnotation, written on takeover).
func (s *scope) bootstrappedWithoutRecord() string {
	if id := s.tcp.Annotations[controlplanev1.EtcdClusterAnnotation]; id != "" {
		return fmt.Sprintf("etcd served this control plane (member %s, annotation %s)", id, controlplanev1.EtcdClusterAnnotation)
	}
	if controlplanev1alpha3.Bootstrapped(s.tcp) {
		return "etcd was bootstrapped by the provider this control plane was taken over from (CACPPT's status.bootstrapped)"
	}
	return ""
}

// whyNoRebootstrap says why another Machine may not be bootstrapped, or "": it may once
// the control plane was never recorded as having served (EtcdClusterAnnotation) and every
// active Machine's node answers while its etcd does not.
func (s *scope) whyNoRebootstrap() string {
	if id := s.tcp.Annotations[controlplanev1.EtcdClusterAnnotation]; id != "" {
		return fmt.Sprintf("this control plane's etcd served the cluster (member %s, annotation %s); restore it from a backup instead", id, controlplanev1.EtcdClusterAnnotation)
	}
	for _, m := range s.active() {
		if report := s.nodes[m.Name]; report == nil || !report.noEtcd {
			return fmt.Sprintf("the node of Machine %s has not said that it runs no etcd member", m.Name)
		}
	}
	return ""
}

// recordEtcdCluster records, once, that etcd was formed and the control plane served: the
// ID of the bootstrapped Machine's member (or of the first member listed). From then on the
// safety checks hold even where status was lost (clusterctl move), and etcd is never
// bootstrapped again.
func (r *Reconciler) recordEtcdCluster(ctx context.Context, s *scope) error {
	if s.tcp.Annotations[controlplanev1.EtcdClusterAnnotation] != "" || len(s.etcd.members) == 0 {
		return nil
	}
	founder := s.etcd.members[0].ID
	if m := s.machineByName(s.tcp.Annotations[controlplanev1.BootstrapMachineAnnotation]); m != nil && recordedMemberID(m) != 0 {
		founder = recordedMemberID(m)
	}
	return r.patchAnnotations(ctx, s.tcp, map[string]string{controlplanev1.EtcdClusterAnnotation: etcdresource.FormatMemberID(founder)})
}

// patchAnnotations writes annotations on o at once (an empty value removes one): a record
// that must be on the API server before the step it guards.
func (r *Reconciler) patchAnnotations(ctx context.Context, o client.Object, values map[string]string) error {
	before, ok := o.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("cannot copy %T", o)
	}
	annotations := o.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	for k, v := range values {
		if v == "" {
			delete(annotations, k)
		} else {
			annotations[k] = v
		}
	}
	o.SetAnnotations(annotations)
	if err := r.Client.Patch(ctx, o, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to record %v on %s: %w", slices.Sorted(maps.Keys(values)), o.GetName(), err)
	}
	return nil
}

// scaleUp adds one up-to-date Machine after the preflight checks.
func (r *Reconciler) scaleUp(ctx context.Context, s *scope) (ctrl.Result, error) {
	if waits := s.preflight(); waits != "" {
		s.blocked = "Scale up waits: " + waits
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	return r.createMachine(ctx, s)
}

// preflight says why a Machine cannot be added now, or "": etcd healthy with no learner and
// one member list on every node, every Machine's node a voting member, no Machine being
// deleted, and every control-plane component healthy.
func (s *scope) preflight() string {
	if why := s.disagreement(""); why != "" {
		return why
	}
	if err := s.model().CanAddMember(); err != nil {
		return err.Error()
	}
	for _, m := range s.active() {
		if !s.isVoter(m) {
			return fmt.Sprintf("machine %s has not joined etcd as a voting member yet", m.Name)
		}
	}
	if s.componentsErr != nil {
		return s.componentsErr.Error()
	}
	if problems := s.componentProblems(); len(problems) > 0 {
		return "control-plane components are not healthy: " + strings.Join(problems, "; ")
	}
	return ""
}

// scaleDown removes one Machine, chosen by the model, when removing its etcd member keeps
// quorum: leadership is moved away, the Machine deleted, and its member removed once its
// Node is drained (releaseMachines).
func (r *Reconciler) scaleDown(ctx context.Context, s *scope) (ctrl.Result, error) {
	victim, ok := s.model().Victim()
	if !ok {
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	m := s.machineByName(victim.Name)
	// One change at a time: a Machine still joining etcd is not yet a spare voter.
	for _, other := range s.active() {
		if other.Name == m.Name || s.isVoter(other) {
			continue
		}
		if _, _, ok, why := s.memberToRemove(other); !ok && recordedMemberID(other) == 0 {
			s.blocked = fmt.Sprintf("Removing Machine %s waits: %s", m.Name, why)
		} else {
			s.blocked = fmt.Sprintf("Removing Machine %s waits for Machine %s to join etcd as a voting member", m.Name, other.Name)
		}
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	if result := r.checkRemoval(ctx, s, m); !result.IsZero() {
		return result, nil
	}
	return ctrl.Result{RequeueAfter: converging}, r.deleteMachine(ctx, m)
}

// startedUnderHostname is the member a going Machine's node started after it answered that
// it runs none: its node's answer and its peers' member list are read apart, and a member
// no Machine claims may already be listed under its hostname. ok is true when that member
// is found and can only be this Machine's; why, when one is listed but another Machine
// without a recorded member has the same hostname (names can repeat), says what a person
// can do. Neither, when the node did not answer so or no such member is listed.
func (s *scope) startedUnderHostname(m *clusterv1.Machine, unclaimed []controlplane.Member) (member talosclient.Member, ok bool, why string) {
	report := s.nodes[m.Name]
	if s.etcd == nil || report == nil || !report.noEtcd || recordedNoMember(m) {
		return talosclient.Member{}, false, ""
	}
	host := hostname(m, s.configs)
	var named []controlplane.Member
	for _, u := range unclaimed {
		if u.Name != "" && u.Name == host {
			named = append(named, u)
		}
	}
	if len(named) == 0 {
		return talosclient.Member{}, false, ""
	}
	for _, other := range s.machines {
		if other.Name != m.Name && recordedMemberID(other) == 0 && !recordedNoMember(other) && hostname(other, s.configs) == host {
			return talosclient.Member{}, false, fmt.Sprintf(
				"etcd member %s, which no Machine claims, carries the hostname of both Machine %s and Machine %s: record annotation %s=<id> on the one it belongs to",
				controlplane.DescribeMember(named[0]), m.Name, other.Name, controlplanev1.EtcdMemberIDAnnotation)
		}
	}
	if len(named) > 1 {
		return talosclient.Member{}, false, fmt.Sprintf("%d etcd members no Machine claims carry hostname %s of Machine %s: record annotation %s=<id> on the Machine",
			len(named), host, m.Name, controlplanev1.EtcdMemberIDAnnotation)
	}
	i := slices.IndexFunc(s.etcd.members, func(member talosclient.Member) bool { return member.ID == named[0].ID })
	if i < 0 {
		return talosclient.Member{}, false, ""
	}
	return s.etcd.members[i], true, ""
}

// memberToRemove is the etcd member of a Machine that is going, if it has one. ok is false
// when that cannot be known; why then says what a person can do.
func (s *scope) memberToRemove(m *clusterv1.Machine) (member talosclient.Member, has, ok bool, why string) {
	if member, found := s.memberOf(m); found {
		return member, true, true, ""
	}
	model := s.model()
	unclaimed := model.Unclaimed()
	report := s.nodes[m.Name]
	if started, ok, why := s.startedUnderHostname(m, unclaimed); ok || why != "" {
		return started, ok, ok, why
	}
	switch {
	case recordedNoMember(m):
		// A person recorded that it never joined etcd.
		return talosclient.Member{}, false, true, ""
	case s.etcd == nil && !s.etcdFormed():
		// Never served and no node has etcd: any member it had goes with its node.
		return talosclient.Member{}, false, true, ""
	case s.etcd == nil:
		return talosclient.Member{}, false, false, "no control-plane node answers with the etcd member list"
	case recordedMemberID(m) != 0 && s.disagreement(m.Name) == "" && (len(unclaimed) == 0 || (report != nil && report.noEtcd)):
		// Recorded, and not in the list the nodes agree on: it was removed already (a node that
		// rejoined with a new member would leave that member unclaimed).
		return talosclient.Member{}, false, true, ""
	case report != nil && report.noEtcd && recordedMemberID(m) == 0:
		// Its node says it runs no member, and none was ever recorded.
		return talosclient.Member{}, false, true, ""
	case recordedMemberID(m) == 0 && len(unclaimed) == 0:
		// Every member belongs to another Machine: this one has none.
		return talosclient.Member{}, false, true, ""
	case recordedMemberID(m) == 0 || len(unclaimed) > 0:
		names := make([]string, 0, len(unclaimed))
		for _, u := range unclaimed {
			names = append(names, controlplane.DescribeMember(u))
		}
		return talosclient.Member{}, false, false, fmt.Sprintf(
			"the etcd member of Machine %s cannot be identified: its recorded member ID is missing or not in etcd, and its node does not say; members no Machine claims: %s. "+
				"If one of them is this Machine's, record it with annotation %s=<id> on the Machine (or remove it with talosctl etcd remove-member); "+
				"if none is, the Machine never joined etcd: record annotation %s=none",
			m.Name, strings.Join(names, ", "), controlplanev1.EtcdMemberIDAnnotation, controlplanev1.EtcdMemberIDAnnotation)
	}
	return talosclient.Member{}, false, false, s.disagreement(m.Name)
}

// checkRemoval refuses (with the reason in the conditions) to remove m when its member
// cannot be identified, when the nodes disagree on etcd's members, or when the members left
// would not be a quorum; and it moves etcd leadership away from m's member, verified on the
// next reconcile.
func (r *Reconciler) checkRemoval(ctx context.Context, s *scope, m *clusterv1.Machine) ctrl.Result {
	member, has, ok, why := s.memberToRemove(m)
	if !ok {
		s.blocked = fmt.Sprintf("Removing Machine %s waits: %s", m.Name, why)
		return ctrl.Result{RequeueAfter: converging}
	}
	if !has {
		return ctrl.Result{}
	}
	if why := s.disagreement(m.Name); why != "" {
		s.blocked = fmt.Sprintf("Removing Machine %s waits: %s", m.Name, why)
		return ctrl.Result{RequeueAfter: converging}
	}
	if err := s.model().CanRemoveMember(member.ID); err != nil {
		s.blocked = fmt.Sprintf("Removing Machine %s is refused: %v", m.Name, err)
		return ctrl.Result{RequeueAfter: 5 * converging}
	}
	if s.etcd.leader == member.ID {
		// Leadership moves first, and the move is seen before the member goes: the next
		// reconcile reads the leader again from the nodes.
		s.blocked = fmt.Sprintf("Removing Machine %s waits for etcd leadership to move away from its member", m.Name)
		c, err := r.TalosClients.New(ctx, s.bundle, controlplane.MachineAddress(m))
		if err == nil {
			err = c.EtcdForfeitLeadership(ctx)
			_ = c.Close()
		}
		if err != nil {
			s.blocked += ": " + err.Error()
		} else {
			ctrl.LoggerFrom(ctx).Info("Moved etcd leadership away from a member that is leaving", "Machine", m.Name, "member", etcdresource.FormatMemberID(member.ID))
		}
		return ctrl.Result{RequeueAfter: converging / 4}
	}
	return ctrl.Result{}
}

// removeMember takes the etcd member of m's node out of the cluster, by its recorded ID and
// through a healthy peer, after the same checks as checkRemoval.
func (r *Reconciler) removeMember(ctx context.Context, s *scope, m *clusterv1.Machine) ctrl.Result {
	if result := r.checkRemoval(ctx, s, m); !result.IsZero() {
		return result
	}
	member, has, _, _ := s.memberToRemove(m)
	if !has {
		return ctrl.Result{}
	}
	if err := r.throughPeer(ctx, s, member.ID, func(c talosclient.Client) error { return c.EtcdRemoveMember(ctx, member.ID) }); err != nil {
		s.blocked = fmt.Sprintf("Removing the etcd member of Machine %s failed, retrying: %v", m.Name, err)
		return ctrl.Result{RequeueAfter: converging}
	}
	ctrl.LoggerFrom(ctx).Info("Removed the etcd member", "Machine", m.Name, "member", controlplane.DescribeMember(controlplane.Member{ID: member.ID, Name: member.Name}))
	record.Event(r.Events, s.tcp, corev1.EventTypeNormal, "EtcdMemberRemoved", "RemoveMember", "Removed etcd member %s of Machine %s",
		controlplane.DescribeMember(controlplane.Member{ID: member.ID, Name: member.Name}), m.Name)
	return ctrl.Result{}
}

// throughPeer calls fn on the node of a healthy member other than exclude, trying each.
func (r *Reconciler) throughPeer(ctx context.Context, s *scope, exclude uint64, fn func(talosclient.Client) error) error {
	var errs []error
	for _, m := range s.active() {
		id := recordedMemberID(m)
		if id == 0 || id == exclude || !s.etcd.healthy[id] {
			continue
		}
		c, err := r.TalosClients.New(ctx, s.bundle, controlplane.MachineAddress(m))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = fn(c)
		_ = c.Close()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return errors.New("no healthy etcd member to go through")
	}
	return errors.Join(errs...)
}

// learnerGrace is how long a learner may stay unstarted before it is removed: a node added
// to etcd that never started its member blocks every later scale-up.
const learnerGrace = 2 * time.Minute

// removeOrphanMembers removes etcd members that belong to no Machine, when that is safe,
// and learners that never started. A non-zero result ends the reconcile (a member was
// removed); due is when an unstarted learner is to be looked at again.
func (r *Reconciler) removeOrphanMembers(ctx context.Context, s *scope) (result ctrl.Result, due time.Duration) {
	if s.etcd == nil || s.disagreement("") != "" {
		return ctrl.Result{}, 0
	}
	model := s.model()
	now := time.Now()
	firstSeen := r.learners.observe(client.ObjectKeyFromObject(s.tcp).String(), model.Members, now)
	stale := model.StaleLearners(firstSeen, now.Add(-learnerGrace))
	for _, orphan := range append(stale, model.OrphanMembers()...) {
		if err := model.CanRemoveMember(orphan.ID); err != nil {
			s.blocked = fmt.Sprintf("etcd member %s belongs to no Machine but cannot be removed yet: %v", controlplane.DescribeMember(orphan), err)
			continue
		}
		if err := r.throughPeer(ctx, s, orphan.ID, func(c talosclient.Client) error { return c.EtcdRemoveMember(ctx, orphan.ID) }); err != nil {
			return ctrl.Result{RequeueAfter: converging}, 0
		}
		ctrl.LoggerFrom(ctx).Info("Removed an etcd member that belonged to no Machine", "member", controlplane.DescribeMember(orphan))
		record.Event(r.Events, s.tcp, corev1.EventTypeNormal, "EtcdMemberRemoved", "RemoveMember", "Removed etcd member %s, which belonged to no Machine", controlplane.DescribeMember(orphan))
		return ctrl.Result{RequeueAfter: converging}, 0
	}
	for _, seen := range firstSeen {
		// Look again when the oldest unstarted learner is due.
		if d := time.Until(seen.Add(learnerGrace)); d > 0 && (due == 0 || d < due) {
			due = d
		}
	}
	return ctrl.Result{}, due
}

// learnerClock remembers when each unstarted learner of each control plane was first seen.
// It lives in memory: a restarted manager waits the grace period again, which errs on the
// side of waiting.
type learnerClock struct {
	mu   sync.Mutex
	seen map[string]map[uint64]time.Time
}

// observe notes the unstarted learners among the members of the control plane key and
// forgets its others; it returns when each was first seen.
func (l *learnerClock) observe(key string, members []controlplane.Member, now time.Time) map[uint64]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]map[uint64]time.Time{}
	}
	seen := map[uint64]time.Time{}
	for _, m := range members {
		if !m.Learner || m.Name != "" {
			continue
		}
		seen[m.ID] = now
		if t, ok := l.seen[key][m.ID]; ok {
			seen[m.ID] = t
		}
	}
	if len(seen) == 0 {
		delete(l.seen, key)
	} else {
		l.seen[key] = seen
	}
	return maps.Clone(seen)
}

// workloadClient is a client of the workload cluster from its kubeconfig Secret.
func (r *Reconciler) workloadClient(ctx context.Context, s *scope) (*kubernetes.Clientset, error) {
	config, err := r.workloadConfig(ctx, s)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(config)
}

// workloadConfig is the client config of the workload cluster, from its kubeconfig Secret.
func (r *Reconciler) workloadConfig(ctx context.Context, s *scope) (*rest.Config, error) {
	return r.workloadConfigOf(ctx, client.ObjectKeyFromObject(s.cluster))
}

// workloadConfigOf is the client config of the workload cluster of the Cluster at key.
func (r *Reconciler) workloadConfigOf(ctx context.Context, key client.ObjectKey) (*rest.Config, error) {
	data, err := kubeconfig.FromSecret(ctx, r.Client, key)
	if err != nil {
		return nil, err
	}
	config, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, err
	}
	config.Timeout = 5 * time.Second
	return config, nil
}
