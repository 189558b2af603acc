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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capisecret "sigs.k8s.io/cluster-api/util/secret"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
)

// permissions are what the caller may change in a namespace, as the API server says.
type permissions struct {
	PatchClusters, PatchControlPlanes, PatchDeployments, CreateBackups, ReadSecrets bool
}

// ScaleControlPlane says whether the caller may scale the control plane of a cluster
// (through its topology when it has one).
func (p permissions) ScaleControlPlane(topology bool) bool {
	if topology {
		return p.PatchClusters
	}
	return p.PatchControlPlanes
}

// ScaleDeployments says whether the caller may scale a cluster's MachineDeployments.
func (p permissions) ScaleDeployments(topology bool) bool {
	if topology {
		return p.PatchClusters
	}
	return p.PatchDeployments
}

// ChangeVersion says whether the caller may change a cluster's Kubernetes version.
func (p permissions) ChangeVersion(topology bool) bool { return p.ScaleControlPlane(topology) }

// accessCache asks the API server what the caller may do in a namespace, at most every
// accessTTL.
type accessCache struct {
	client   client.Client
	readOnly bool
	mu       sync.Mutex
	entries  map[string]accessEntry
}

type accessEntry struct {
	at  time.Time
	can permissions
}

const accessTTL = 30 * time.Second

func newAccessCache(c client.Client, readOnly bool) *accessCache {
	return &accessCache{client: c, readOnly: readOnly, entries: map[string]accessEntry{}}
}

func (a *accessCache) of(ctx context.Context, namespace string) (permissions, error) {
	if a.readOnly {
		return permissions{}, nil
	}
	a.mu.Lock()
	e, ok := a.entries[namespace]
	a.mu.Unlock()
	if ok && time.Since(e.at) < accessTTL {
		return e.can, nil
	}
	var can permissions
	checks := []struct {
		to       *bool
		resource schema.GroupResource
		verb     string
	}{
		{&can.PatchClusters, schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "clusters"}, "patch"},
		{&can.PatchControlPlanes, schema.GroupResource{Group: controlplanev1.GroupVersion.Group, Resource: "taloscontrolplanes"}, "patch"},
		{&can.PatchDeployments, schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "machinedeployments"}, "patch"},
		{&can.CreateBackups, schema.GroupResource{Group: controlplanev1.GroupVersion.Group, Resource: "talosetcdbackups"}, "create"},
		{&can.ReadSecrets, schema.GroupResource{Resource: "secrets"}, "get"},
	}
	for _, check := range checks {
		ok, err := allowedAll(ctx, a.client, namespace, check.resource, check.verb)
		if err != nil {
			return permissions{}, err
		}
		*check.to = ok
	}
	a.mu.Lock()
	a.entries[namespace] = accessEntry{at: time.Now(), can: can}
	a.mu.Unlock()
	return can, nil
}

// errBadRequest marks a form the dashboard itself refuses.
var errBadRequest = errors.New("bad request")

// action wraps a change: refused when the dashboard is read-only or the request lacks the
// page's token; otherwise done with the caller's credentials, and the API server's refusal
// (RBAC, a webhook) is passed on with its code and message for the form to show.
func (s *Server) action(do func(ctx context.Context, r *http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.ReadOnly {
			http.Error(w, "talon dashboard runs with --read-only: it changes nothing", http.StatusForbidden)
			return
		}
		if !s.validToken(r) {
			http.Error(w, "the request lacks this page's token: reload the page and try again", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "failed to read the form: "+err.Error(), http.StatusBadRequest)
			return
		}
		done, err := do(r.Context(), r)
		if err != nil {
			code := http.StatusBadGateway
			var status apierrors.APIStatus
			switch {
			case errors.Is(err, errBadRequest):
				code = http.StatusBadRequest
			case errors.As(err, &status) && status.Status().Code != 0:
				code = int(status.Status().Code)
			}
			s.opts.Log.Info("Action refused", "path", r.URL.Path, "code", code, "reason", err.Error())
			http.Error(w, strings.TrimPrefix(err.Error(), errBadRequest.Error()+": "), code)
			return
		}
		s.opts.Log.Info("Action done", "path", r.URL.Path, "result", done)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(done))
	}
}

// replicasOf reads the form's replicas.
func replicasOf(r *http.Request) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("replicas")), 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: replicas must be a whole number of 0 or more, not %q", errBadRequest, r.PostFormValue("replicas"))
	}
	return int32(n), nil
}

// clusterOf reads the request's Cluster from the API server (not the cache, so that a
// change acts on what is there now).
func (s *Server) clusterOf(ctx context.Context, r *http.Request) (*clusterv1.Cluster, error) {
	if err := s.inScope(r.PathValue("namespace")); err != nil {
		return nil, err
	}
	c := &clusterv1.Cluster{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}, c); err != nil {
		return nil, err
	}
	if ref := c.Spec.ControlPlaneRef; ref.IsDefined() && (ref.Kind != "TalosControlPlane" || ref.APIGroup != controlplanev1.GroupVersion.Group) {
		return nil, fmt.Errorf("%w: Cluster %s's control plane is a %s, not a TalosControlPlane", errBadRequest, c.Name, ref.Kind)
	}
	return c, nil
}

// inScope refuses a namespace outside --namespace: the dashboard acts only where it shows.
func (s *Server) inScope(namespace string) error {
	if s.opts.Namespace != "" && namespace != s.opts.Namespace {
		return fmt.Errorf("%w: this dashboard shows namespace %s only", errBadRequest, s.opts.Namespace)
	}
	return nil
}

// replicasPatch sets spec.replicas.
func replicasPatch(n int32) client.Patch {
	return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
}

// jsonString is s as a JSON string.
func jsonString(s string) []byte {
	data, err := json.Marshal(s)
	if err != nil { // a string always marshals
		return []byte(`""`)
	}
	return data
}

// deploymentOf reads the MachineDeployment name of Cluster c from the API server.
func (s *Server) deploymentOf(ctx context.Context, c *clusterv1.Cluster, name string) (*clusterv1.MachineDeployment, error) {
	md := &clusterv1.MachineDeployment{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, md); err != nil {
		return nil, err
	}
	if md.Spec.ClusterName != c.Name {
		return nil, fmt.Errorf("%w: MachineDeployment %s belongs to Cluster %s", errBadRequest, md.Name, md.Spec.ClusterName)
	}
	return md, nil
}

// scaleControlPlane sets the control plane's replicas: in the Cluster's topology when it
// has one (after a dry run against the TalosControlPlane, so that its webhook's refusal
// shows now rather than later as a topology condition), else on the TalosControlPlane.
func (s *Server) scaleControlPlane(ctx context.Context, r *http.Request) (string, error) {
	n, err := replicasOf(r)
	if err != nil {
		return "", err
	}
	c, err := s.clusterOf(ctx, r)
	if err != nil {
		return "", err
	}
	if !c.Spec.ControlPlaneRef.IsDefined() {
		return "", fmt.Errorf("%w: Cluster %s has no control plane", errBadRequest, c.Name)
	}
	tcp := &controlplanev1.TalosControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}}
	change := replicasPatch(n)
	if !c.Spec.Topology.IsDefined() {
		if err := s.client.Patch(ctx, tcp, change); err != nil {
			return "", err
		}
		return fmt.Sprintf("TalosControlPlane %s scaled to %d", tcp.Name, n), nil
	}
	if err := s.client.Patch(ctx, tcp, change, client.DryRunAll); err != nil && !apierrors.IsForbidden(err) {
		return "", err
	}
	if err := s.client.Patch(ctx, c, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"topology":{"controlPlane":{"replicas":%d}}}}`, n))); err != nil {
		return "", err
	}
	return fmt.Sprintf("Cluster %s: control plane scaled to %d", c.Name, n), nil
}

// scaleDeployment sets a MachineDeployment's replicas, through the topology when the
// Cluster has one.
func (s *Server) scaleDeployment(ctx context.Context, r *http.Request) (string, error) {
	n, err := replicasOf(r)
	if err != nil {
		return "", err
	}
	c, err := s.clusterOf(ctx, r)
	if err != nil {
		return "", err
	}
	md, err := s.deploymentOf(ctx, c, r.PathValue("deployment"))
	if err != nil {
		return "", err
	}
	if !c.Spec.Topology.IsDefined() {
		if err := s.client.Patch(ctx, md, replicasPatch(n)); err != nil {
			return "", err
		}
		return fmt.Sprintf("MachineDeployment %s scaled to %d", md.Name, n), nil
	}
	topologyName := md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]
	for i, w := range c.Spec.Topology.Workers.MachineDeployments {
		if w.Name != topologyName {
			continue
		}
		// The test keeps the index from pointing at another pool if the list changed meanwhile.
		path := fmt.Sprintf("/spec/topology/workers/machineDeployments/%d", i)
		ops := fmt.Appendf(nil, `[{"op":"test","path":"%s/name","value":%s},{"op":"add","path":"%s/replicas","value":%d}]`,
			path, jsonString(w.Name), path, n)
		if err := s.client.Patch(ctx, c, client.RawPatch(types.JSONPatchType, ops)); err != nil {
			return "", err
		}
		return fmt.Sprintf("Cluster %s: workers %s scaled to %d", c.Name, w.Name, n), nil
	}
	return "", fmt.Errorf("%w: MachineDeployment %s is not in Cluster %s's topology", errBadRequest, md.Name, c.Name)
}

// changeVersion sets the Kubernetes version: the topology's, which Cluster API rolls out
// to the control plane and then the workers; or, without a topology, the control plane's
// or (with a deployment) one MachineDeployment's.
func (s *Server) changeVersion(ctx context.Context, r *http.Request) (string, error) {
	version := strings.TrimSpace(r.PostFormValue("version"))
	if version == "" {
		return "", fmt.Errorf("%w: version is required, e.g. v1.35.2", errBadRequest)
	}
	c, err := s.clusterOf(ctx, r)
	if err != nil {
		return "", err
	}
	if c.Spec.Topology.IsDefined() {
		if err := s.client.Patch(ctx, c, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"topology":{"version":%s}}}`, jsonString(version)))); err != nil {
			return "", err
		}
		return fmt.Sprintf("Cluster %s: version %s", c.Name, version), nil
	}
	if name := r.PostFormValue("deployment"); name != "" {
		md, err := s.deploymentOf(ctx, c, name)
		if err != nil {
			return "", err
		}
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"template":{"spec":{"version":%s}}}}`, jsonString(version)))
		if err := s.client.Patch(ctx, md, patch); err != nil {
			return "", err
		}
		return fmt.Sprintf("MachineDeployment %s: version %s", md.Name, version), nil
	}
	if !c.Spec.ControlPlaneRef.IsDefined() {
		return "", fmt.Errorf("%w: Cluster %s has no control plane", errBadRequest, c.Name)
	}
	tcp := &controlplanev1.TalosControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}}
	if err := s.client.Patch(ctx, tcp, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"version":%s}}`, jsonString(version)))); err != nil {
		return "", err
	}
	return fmt.Sprintf("TalosControlPlane %s: version %s", tcp.Name, version), nil
}

// backup creates a TalosEtcdBackup like the cluster's newest one (the same storage and
// encryption), which the control-plane manager takes at once.
func (s *Server) backup(ctx context.Context, r *http.Request) (string, error) {
	c, err := s.clusterOf(ctx, r)
	if err != nil {
		return "", err
	}
	list := &controlplanev1.TalosEtcdBackupList{}
	if err := s.client.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return "", err
	}
	var newest *controlplanev1.TalosEtcdBackup
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.ClusterName == c.Name && (newest == nil || b.CreationTimestamp.After(newest.CreationTimestamp.Time)) {
			newest = b
		}
	}
	if newest == nil {
		return "", fmt.Errorf("%w: Cluster %s has no etcd backup to take the storage from; create a TalosEtcdBackup or a schedule first", errBadRequest, c.Name)
	}
	b := &controlplanev1.TalosEtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, GenerateName: c.Name + "-dashboard-",
			Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name}},
		Spec: *newest.Spec.DeepCopy(),
	}
	if err := s.client.Create(ctx, b); err != nil {
		return "", err
	}
	return "TalosEtcdBackup " + b.Name + " created", nil
}

// download is what a download link serves from a Secret.
type download struct {
	secret   func(cluster string) string
	key      string
	filename func(cluster string) string
}

var (
	kubeconfigDownload = download{
		secret:   func(cluster string) string { return capisecret.Name(cluster, capisecret.Kubeconfig) },
		key:      capisecret.KubeconfigDataName,
		filename: func(cluster string) string { return cluster + ".kubeconfig" },
	}
	talosconfigDownload = download{
		secret:   clustersecrets.TalosconfigSecretName,
		key:      clustersecrets.TalosconfigKey,
		filename: func(cluster string) string { return cluster + ".talosconfig" },
	}
)

// download serves a cluster's kubeconfig or talosconfig, read with the caller's
// credentials: a caller who may not read the Secret gets the API server's 403.
func (s *Server) download(d download) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.ReadOnly {
			http.Error(w, "talon dashboard runs with --read-only: it serves no kubeconfig or talosconfig", http.StatusForbidden)
			return
		}
		namespace, name := r.PathValue("namespace"), r.PathValue("name")
		if err := s.inScope(namespace); err != nil {
			http.Error(w, strings.TrimPrefix(err.Error(), errBadRequest.Error()+": "), http.StatusBadRequest)
			return
		}
		secret := &corev1.Secret{}
		if err := s.client.Get(r.Context(), types.NamespacedName{Namespace: namespace, Name: d.secret(name)}, secret); err != nil {
			code := http.StatusBadGateway
			var status apierrors.APIStatus
			if errors.As(err, &status) && status.Status().Code != 0 {
				code = int(status.Status().Code)
			}
			http.Error(w, err.Error(), code)
			return
		}
		data, ok := secret.Data[d.key]
		if !ok {
			http.Error(w, fmt.Sprintf("Secret %s/%s has no key %q", namespace, secret.Name, d.key), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", d.filename(name)))
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(data)
	}
}
