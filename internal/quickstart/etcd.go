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
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosclient "github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
)

// Talosconfig reads the talosconfig of Cluster namespace/name that the bootstrap provider
// keeps in the Secret <name>-talosconfig; its endpoints are the control-plane Machines'
// addresses.
func Talosconfig(ctx context.Context, c client.Reader, namespace, name string) ([]byte, error) {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: namespace, Name: clustersecrets.TalosconfigSecretName(name)}
	if err := c.Get(ctx, key, s); err != nil {
		return nil, fmt.Errorf("failed to get the talosconfig Secret %s: %w", klog.KRef(key.Namespace, key.Name), err)
	}
	data := s.Data[clustersecrets.TalosconfigKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("secret %s has no %q", klog.KRef(key.Namespace, key.Name), clustersecrets.TalosconfigKey)
	}
	return data, nil
}

// etcdCallTimeout bounds the calls to each node: a node that does not answer must not hold
// talon status.
const etcdCallTimeout = 10 * time.Second

// TalosEtcdLister lists etcd members through the Talos API of the control-plane nodes, with
// a talosconfig: the member list from the first node that gives one, and each member's
// health from its own node's status.
type TalosEtcdLister struct {
	config    *clientconfig.Config
	endpoints []string
}

// NewTalosEtcdLister is an EtcdLister that reaches the nodes at endpoints (addresses of
// control-plane nodes, with or without the Talos API port) with talosconfig, such as the one
// Talosconfig reads; with no endpoints, those of the talosconfig's current context.
func NewTalosEtcdLister(talosconfig []byte, endpoints []string) (EtcdLister, error) {
	cfg, err := clientconfig.FromBytes(talosconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to read the talosconfig: %w", err)
	}
	current, ok := cfg.Contexts[cfg.Context]
	if !ok {
		return nil, fmt.Errorf("the talosconfig has no context %q", cfg.Context)
	}
	if len(endpoints) == 0 {
		endpoints = current.Endpoints
	}
	if len(endpoints) == 0 {
		return nil, errors.New("no Talos API endpoints: the talosconfig names none and none were given")
	}
	return &TalosEtcdLister{config: cfg, endpoints: slices.Clone(endpoints)}, nil
}

// nodeAnswer is what one node said.
type nodeAnswer struct {
	endpoint string
	members  []*machine.EtcdMember
	status   *machine.EtcdMemberStatus
	err      error
}

// EtcdMembers asks every endpoint, at once, for the member list and its own member's status.
func (l *TalosEtcdLister) EtcdMembers(ctx context.Context) ([]EtcdMember, error) {
	answers := make([]nodeAnswer, len(l.endpoints))
	var wg sync.WaitGroup
	for i, endpoint := range l.endpoints {
		wg.Go(func() { answers[i] = l.ask(ctx, endpoint) })
	}
	wg.Wait()

	var listed []*machine.EtcdMember
	var errs []error
	statuses := map[uint64]*machine.EtcdMemberStatus{}
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
		}
		if listed == nil && a.members != nil {
			listed = a.members
		}
		if a.status != nil {
			statuses[a.status.MemberId] = a.status
		}
	}
	if listed == nil {
		return nil, fmt.Errorf("no node listed the etcd members: %w", errors.Join(errs...))
	}
	out := make([]EtcdMember, 0, len(listed))
	for _, m := range listed {
		member := EtcdMember{ID: m.Id, Name: m.Hostname, PeerURLs: m.PeerUrls, Learner: m.IsLearner}
		switch st, ok := statuses[m.Id]; {
		case !ok:
			member.Problem = whyNoStatus(m.PeerUrls, answers)
		case len(st.Errors) > 0:
			member.Problem = "it reports: " + strings.Join(st.Errors, "; ")
		case st.Leader == 0:
			// A member cut off from its peers still answers; it knows no leader.
			member.Problem = "it knows no leader"
		default:
			member.Healthy = true
		}
		out = append(out, member)
	}
	return out, nil
}

// ask asks the node at endpoint for the member list and its member's status.
func (l *TalosEtcdLister) ask(ctx context.Context, endpoint string) nodeAnswer {
	a := nodeAnswer{endpoint: endpoint}
	c, err := talosclient.New(ctx, talosclient.WithConfig(l.config), talosclient.WithEndpoints(endpoint))
	if err != nil {
		a.err = fmt.Errorf("failed to connect to the Talos API at %s: %w", endpoint, err)
		return a
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
	defer cancel()
	list, err := c.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	if err != nil {
		a.err = fmt.Errorf("etcd member list on %s: %w", endpoint, err)
		return a
	}
	for _, msg := range list.Messages {
		a.members = append(a.members, msg.Members...)
	}
	st, err := c.EtcdStatus(ctx)
	switch {
	case err != nil:
		a.err = fmt.Errorf("etcd status on %s: %w", endpoint, err)
	case len(st.Messages) > 0:
		a.status = st.Messages[0].MemberStatus
	}
	return a
}

// whyNoStatus says why a member has no status: the error of the endpoint on its peer URLs'
// host, or that no endpoint is its node.
func whyNoStatus(peerURLs []string, answers []nodeAnswer) string {
	for _, peer := range peerURLs {
		u, err := url.Parse(peer)
		if err != nil {
			continue
		}
		for _, a := range answers {
			host, _, err := net.SplitHostPort(a.endpoint)
			if err != nil {
				host = a.endpoint
			}
			if host == u.Hostname() && a.err != nil {
				return a.err.Error()
			}
		}
	}
	return "its node did not answer or is not among the Talos API endpoints"
}
