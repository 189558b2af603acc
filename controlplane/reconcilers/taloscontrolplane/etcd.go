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
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
)

// reconcileInitialization bootstraps etcd on the first Machine as soon as its Talos API
// answers, once: whether etcd is bootstrapped is read from the nodes, so a restarted or
// moved manager never bootstraps twice. The control plane is initialized when the workload
// API server answers.
func (r *Reconciler) reconcileInitialization(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	active := s.active()
	if len(active) == 0 {
		return r.createMachine(ctx, s)
	}
	if s.etcd == nil {
		first := slices.MinFunc(active, func(a, b *clusterv1.Machine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		address := machineAddress(first)
		if address == "" {
			s.waiting = fmt.Sprintf("Waiting for Machine %s to get an address", first.Name)
			return ctrl.Result{}, nil
		}
		c, err := r.TalosClients.New(ctx, s.bundle, address)
		if err != nil {
			return ctrl.Result{}, err
		}
		defer func() { _ = c.Close() }()
		if _, err := c.Version(ctx); err != nil {
			s.waiting = fmt.Sprintf("Waiting for the Talos API of Machine %s: %v", first.Name, err)
			return ctrl.Result{RequeueAfter: converging}, nil
		}
		switch err := c.Bootstrap(ctx); {
		case err == nil:
			log.Info("Bootstrapped etcd", "Machine", first.Name, "address", address)
		case errors.Is(err, talosclient.ErrAlreadyBootstrapped):
			log.Info("etcd was already bootstrapped", "Machine", first.Name)
		default:
			s.waiting = fmt.Sprintf("Bootstrapping etcd on Machine %s failed, retrying: %v", first.Name, err)
			return ctrl.Result{RequeueAfter: converging}, nil
		}
	}
	kube, err := r.workloadClient(ctx, s)
	if err == nil {
		_, err = kube.Discovery().ServerVersion()
	}
	if err != nil {
		s.waiting = fmt.Sprintf("etcd is bootstrapped; waiting for the workload API server: %v", err)
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	log.Info("The control plane is initialized")
	s.tcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	return ctrl.Result{RequeueAfter: converging}, nil
}

// scaleUp adds one up-to-date Machine after the preflight checks: etcd healthy with no
// learner, every Machine's node a voting member, no Machine being deleted.
func (r *Reconciler) scaleUp(ctx context.Context, s *scope) (ctrl.Result, error) {
	if waits := s.preflight(); waits != "" {
		s.blocked = "Scale up waits: " + waits
		return ctrl.Result{RequeueAfter: converging}, nil
	}
	return r.createMachine(ctx, s)
}

// preflight says why a Machine cannot be added now, or "".
func (s *scope) preflight() string {
	if s.etcd == nil {
		return "no control-plane node answers with the etcd member list"
	}
	if err := s.model().CanAddMember(); err != nil {
		return err.Error()
	}
	for _, m := range s.active() {
		if !s.isVoter(m) {
			return fmt.Sprintf("machine %s has not joined etcd as a voting member yet", m.Name)
		}
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
	if s.etcd != nil {
		for _, other := range s.active() {
			if other.Name != m.Name && !s.isVoter(other) {
				s.blocked = fmt.Sprintf("Removing Machine %s waits for Machine %s to join etcd as a voting member", m.Name, other.Name)
				return ctrl.Result{RequeueAfter: converging}, nil
			}
		}
	}
	if result := r.checkRemoval(ctx, s, m); !result.IsZero() {
		return result, nil
	}
	return ctrl.Result{RequeueAfter: converging}, r.deleteMachine(ctx, m)
}

// checkRemoval refuses (with the reason in the conditions) to remove m when the etcd members
// left would not be a quorum, and moves etcd leadership away from m's member.
func (r *Reconciler) checkRemoval(ctx context.Context, s *scope, m *clusterv1.Machine) ctrl.Result {
	if s.etcd == nil {
		s.blocked = fmt.Sprintf("Removing Machine %s waits: no control-plane node answers with the etcd member list", m.Name)
		return ctrl.Result{RequeueAfter: converging}
	}
	member, ok := s.memberOf(m)
	if !ok {
		return ctrl.Result{}
	}
	name := member.Name
	if err := s.model().CanRemoveMember(member.ID); err != nil {
		s.blocked = fmt.Sprintf("Removing Machine %s is refused: %v", m.Name, err)
		return ctrl.Result{RequeueAfter: 5 * converging}
	}
	if s.etcd.leader == name {
		if c, err := r.TalosClients.New(ctx, s.bundle, machineAddress(m)); err == nil {
			if err := c.EtcdForfeitLeadership(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Info("Could not move etcd leadership away; going on", "reason", err.Error())
			}
			_ = c.Close()
		}
	}
	return ctrl.Result{}
}

// removeMember takes the etcd member of m's node out of the cluster, through a healthy
// peer, after the same checks as checkRemoval.
func (r *Reconciler) removeMember(ctx context.Context, s *scope, m *clusterv1.Machine) ctrl.Result {
	if result := r.checkRemoval(ctx, s, m); !result.IsZero() {
		return result
	}
	member, ok := s.memberOf(m)
	if !ok {
		return ctrl.Result{}
	}
	name := member.Name
	if err := r.throughPeer(ctx, s, name, func(c talosclient.Client) error { return c.EtcdRemoveMember(ctx, member.ID) }); err != nil {
		s.blocked = fmt.Sprintf("Removing the etcd member of Machine %s failed, retrying: %v", m.Name, err)
		return ctrl.Result{RequeueAfter: converging}
	}
	ctrl.LoggerFrom(ctx).Info("Removed the etcd member", "Machine", m.Name, "member", name)
	return ctrl.Result{}
}

// throughPeer calls fn on the node of a healthy member other than exclude, trying each.
func (r *Reconciler) throughPeer(ctx context.Context, s *scope, exclude string, fn func(talosclient.Client) error) error {
	var errs []error
	for _, m := range s.active() {
		name := nodeName(m, s.configs)
		if name == exclude || !s.etcd.healthy[name] {
			continue
		}
		c, err := r.TalosClients.New(ctx, s.bundle, machineAddress(m))
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

// removeOrphanMembers removes etcd members that belong to no Machine, when that is safe.
func (r *Reconciler) removeOrphanMembers(ctx context.Context, s *scope) ctrl.Result {
	if s.etcd == nil {
		return ctrl.Result{}
	}
	model := s.model()
	for _, orphan := range model.OrphanMembers() {
		if err := model.CanRemoveMember(orphan.ID); err != nil {
			s.blocked = fmt.Sprintf("etcd member %s belongs to no Machine but cannot be removed yet: %v", orphan.Name, err)
			continue
		}
		if err := r.throughPeer(ctx, s, orphan.Name, func(c talosclient.Client) error { return c.EtcdRemoveMember(ctx, orphan.ID) }); err != nil {
			return ctrl.Result{RequeueAfter: converging}
		}
		ctrl.LoggerFrom(ctx).Info("Removed an etcd member that belonged to no Machine", "member", orphan.Name)
		return ctrl.Result{RequeueAfter: converging}
	}
	return ctrl.Result{}
}

// workloadClient is a client of the workload cluster from its kubeconfig Secret.
func (r *Reconciler) workloadClient(ctx context.Context, s *scope) (*kubernetes.Clientset, error) {
	data, err := kubeconfig.FromSecret(ctx, r.Client, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		return nil, err
	}
	config, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, err
	}
	config.Timeout = 5 * time.Second
	return kubernetes.NewForConfig(config)
}
