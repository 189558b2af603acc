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
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
)

// Health is what talon status prints: the Cluster as the management cluster sees it, the
// workload cluster's Nodes and the etcd members.
type Health struct {
	// Cluster is the Cluster's namespace/name.
	Cluster string
	// Ready is whether the Cluster is ready for a user (Tree.Ready), every Node it was
	// possible to list is Ready and every etcd member listed is a healthy voter.
	Ready bool
	// State is the Cluster's state: Ready, or what it waits for.
	State string
	// Endpoint is the control-plane endpoint (host:port).
	Endpoint string
	// KubernetesVersion is the control plane's Kubernetes version.
	KubernetesVersion string
	// TalosVersions are the Talos versions the Nodes run, from their OS image.
	TalosVersions []string
	// Machines are the Cluster's Machines, control plane first.
	Machines []Machine
	// Nodes are the workload cluster's Nodes by name; nil when they were not listed.
	Nodes []Node
	// EtcdMembers are the etcd members by name; nil when they were not listed.
	EtcdMembers []EtcdMember
	// LastBackup is the newest TalosEtcdBackup of the cluster that succeeded; nil when none did.
	LastBackup *Backup
	// BackupsUnknown says why the backups could not be listed; empty when they were.
	BackupsUnknown string
	// Problems say, one per line, what is not ready and why.
	Problems []string
}

// Backup is an etcd backup that succeeded.
type Backup struct {
	// Name is the TalosEtcdBackup's name.
	Name string
	// Key is the object's key in the bucket.
	Key string
	// Size is the object's size in bytes.
	Size int64
	// Completed is when it completed.
	Completed time.Time
}

// Node is a Node of the workload cluster.
type Node struct {
	// Name is the Node's name.
	Name string
	// Ready is whether its Ready condition is True.
	Ready bool
	// KubeletVersion is the version its kubelet reports.
	KubeletVersion string
	// InternalIP is its first internal IP.
	InternalIP string
	// TalosVersion is the Talos version of its OS image ("Talos (v1.13.3)").
	TalosVersion string
}

// EtcdMember is an etcd member as the Talos API lists it, and its health.
type EtcdMember struct {
	// ID is the member's ID.
	ID uint64
	// Name is the member's name, the hostname of its node.
	Name string
	// PeerURLs are the URLs the other members reach it at.
	PeerURLs []string
	// Learner is whether it is a learner (joining, not yet voting).
	Learner bool
	// Healthy is whether its node answered its status without errors and it knows a leader.
	Healthy bool
	// Problem says why it is not healthy.
	Problem string
}

// EtcdLister lists etcd members.
type EtcdLister interface {
	// EtcdMembers lists the members of the cluster's etcd with their health.
	EtcdMembers(ctx context.Context) ([]EtcdMember, error)
}

// Gather reads the management cluster (Cluster, control plane, Machines) and, when workload
// is not nil, the workload cluster's Nodes, and when etcd is not nil, the etcd members. Only
// a failure to read the management cluster is an error: what the workload cluster or etcd do
// not answer becomes a problem of the Health.
func Gather(ctx context.Context, mgmt client.Reader, workload client.Reader, etcd EtcdLister, namespace, name string) (*Health, error) {
	tree, err := Describe(ctx, mgmt, namespace, name)
	if err != nil {
		return nil, err
	}
	h := &Health{
		Cluster:  klog.KRef(namespace, name).String(),
		State:    tree.Cluster.State,
		Endpoint: tree.Endpoint,
		Machines: tree.Machines(),
		Problems: tree.Problems(),
	}
	if tree.ControlPlane != nil {
		h.KubernetesVersion = tree.ControlPlane.Version
	}
	healthy := true
	if workload != nil {
		nodes := &corev1.NodeList{}
		if err := workload.List(ctx, nodes); err != nil {
			healthy = false
			h.Problems = append(h.Problems, fmt.Sprintf("The workload cluster's Nodes could not be listed: %v", err))
		} else {
			h.Nodes = make([]Node, 0, len(nodes.Items))
			for i := range nodes.Items {
				n, problem := newNode(&nodes.Items[i])
				h.Nodes = append(h.Nodes, n)
				if problem != "" {
					healthy = false
					h.Problems = append(h.Problems, problem)
				}
				if n.TalosVersion != "" && !slices.Contains(h.TalosVersions, n.TalosVersion) {
					h.TalosVersions = append(h.TalosVersions, n.TalosVersion)
				}
			}
			slices.SortFunc(h.Nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
			slices.Sort(h.TalosVersions)
		}
	}
	if etcd != nil {
		members, err := etcd.EtcdMembers(ctx)
		if err != nil {
			healthy = false
			h.Problems = append(h.Problems, fmt.Sprintf("The etcd members could not be listed: %v", err))
		} else {
			h.EtcdMembers = append([]EtcdMember{}, members...)
			slices.SortFunc(h.EtcdMembers, func(a, b EtcdMember) int { return strings.Compare(a.Name, b.Name) })
			for _, m := range h.EtcdMembers {
				switch {
				case !m.Healthy:
					healthy = false
					h.Problems = append(h.Problems, fmt.Sprintf("etcd member %s is not healthy: %s", m.Name, m.Problem))
				case m.Learner:
					healthy = false
					h.Problems = append(h.Problems, fmt.Sprintf("etcd member %s is still a learner", m.Name))
				}
			}
		}
	}
	if h.LastBackup, err = lastBackup(ctx, mgmt, namespace, name); err != nil {
		// Backups are not what makes a cluster ready: the cluster's health stands without them.
		h.BackupsUnknown = err.Error()
	}
	h.Ready = tree.Ready() && healthy
	return h, nil
}

// lastBackup is the newest backup of the cluster that succeeded, or nil when none did.
func lastBackup(ctx context.Context, mgmt client.Reader, namespace, cluster string) (*Backup, error) {
	backups := &controlplanev1.TalosEtcdBackupList{}
	if err := mgmt.List(ctx, backups, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("failed to list the etcd backups of %s/%s: %w", namespace, cluster, err)
	}
	var last *Backup
	for _, b := range backups.Items {
		if b.Spec.ClusterName != cluster || b.Status.Phase != controlplanev1.EtcdBackupSucceeded || b.Status.CompletionTime == nil {
			continue
		}
		if last == nil || b.Status.CompletionTime.After(last.Completed) {
			last = &Backup{Name: b.Name, Key: b.Status.Key, Size: ptr.Deref(b.Status.Size, 0), Completed: b.Status.CompletionTime.Time}
		}
	}
	return last, nil
}

// newNode reads a Node, and says what is wrong with it when it is not Ready.
func newNode(node *corev1.Node) (Node, string) {
	n := Node{Name: node.Name, KubeletVersion: node.Status.NodeInfo.KubeletVersion, TalosVersion: talosVersion(node.Status.NodeInfo.OSImage)}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			n.InternalIP = a.Address
			break
		}
	}
	problem := "Node " + node.Name + " has not reported Ready yet"
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			n.Ready = c.Status == corev1.ConditionTrue
			problem = fmt.Sprintf("Node %s is not Ready (%s): %s", node.Name, c.Reason, oneLine(c.Message))
		}
	}
	if n.Ready {
		problem = ""
	}
	return n, problem
}

// talosVersion is the version in a Talos OS image name, "Talos (v1.13.3)"; empty for other
// operating systems.
func talosVersion(osImage string) string {
	rest, ok := strings.CutPrefix(osImage, "Talos (")
	if !ok {
		return ""
	}
	end := strings.IndexAny(rest, ",)")
	if end < 0 {
		return ""
	}
	return strings.TrimSpace(rest[:end])
}

// String renders the health compactly: a headline, then a table each of Machines, Nodes and
// etcd members, then the problems.
func (h *Health) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Cluster %s  %s", h.Cluster, h.State)
	if h.Endpoint != "" {
		fmt.Fprintf(&b, "  endpoint %s", h.Endpoint)
	}
	b.WriteString("\n")
	var versions []string
	if h.KubernetesVersion != "" {
		versions = append(versions, "Kubernetes "+h.KubernetesVersion)
	}
	var kubelets []string
	for _, n := range h.Nodes {
		if n.KubeletVersion != "" && !slices.Contains(kubelets, n.KubeletVersion) {
			kubelets = append(kubelets, n.KubeletVersion)
		}
	}
	if len(kubelets) > 0 {
		slices.Sort(kubelets)
		versions = append(versions, "kubelets "+strings.Join(kubelets, ", "))
	}
	if len(h.TalosVersions) > 0 {
		versions = append(versions, "Talos "+strings.Join(h.TalosVersions, ", "))
	}
	if len(versions) > 0 {
		b.WriteString(strings.Join(versions, "  ") + "\n")
	}
	switch {
	case h.BackupsUnknown != "":
		fmt.Fprintf(&b, "Etcd backups unknown: %s\n", h.BackupsUnknown)
	case h.LastBackup != nil:
		fmt.Fprintf(&b, "Last etcd backup %s at %s, %d bytes in %s\n",
			h.LastBackup.Name, h.LastBackup.Completed.UTC().Format(time.RFC3339), h.LastBackup.Size, h.LastBackup.Key)
	default:
		b.WriteString("No etcd backup (docs/backup.md)\n")
	}

	writeTable(&b, []string{"MACHINE", "ROLE", "PHASE", "READY", "NODE", "ADDRESS", "VERSION"}, len(h.Machines), func(i int) []string {
		m := h.Machines[i]
		role := "worker"
		if m.ControlPlane {
			role = "control-plane"
		}
		return []string{m.Name, role, m.Phase, yesNo(m.Ready), dash(m.NodeName), dash(m.Address), dash(m.Version)}
	})
	if h.Nodes != nil {
		writeTable(&b, []string{"NODE", "READY", "KUBELET", "INTERNAL-IP", "TALOS"}, len(h.Nodes), func(i int) []string {
			n := h.Nodes[i]
			return []string{n.Name, yesNo(n.Ready), dash(n.KubeletVersion), dash(n.InternalIP), dash(n.TalosVersion)}
		})
	}
	if h.EtcdMembers != nil {
		writeTable(&b, []string{"ETCD MEMBER", "ID", "PEER URLS", "ROLE", "HEALTH"}, len(h.EtcdMembers), func(i int) []string {
			m := h.EtcdMembers[i]
			role, health := "voter", "healthy"
			if m.Learner {
				role = "learner"
			}
			if !m.Healthy {
				health = "unhealthy"
			}
			return []string{m.Name, fmt.Sprintf("%016x", m.ID), dash(strings.Join(m.PeerURLs, ",")), role, health}
		})
	}
	if len(h.Problems) > 0 {
		b.WriteString("\nProblems:\n")
		for _, p := range h.Problems {
			b.WriteString("  " + p + "\n")
		}
	}
	return b.String()
}

// writeTable writes an empty line, then header and n rows in aligned columns.
func writeTable(b *strings.Builder, header []string, n int, row func(i int) []string) {
	w := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	// Writing to a strings.Builder does not fail.
	_, _ = fmt.Fprintln(w)
	_, _ = fmt.Fprintln(w, strings.Join(header, "\t"))
	for i := range n {
		_, _ = fmt.Fprintln(w, strings.Join(row(i), "\t"))
	}
	_ = w.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
