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
	"fmt"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
)

// watched is a kind the dashboard keeps an informer for.
type watched struct {
	// Name is how the page names the kind when the caller may not read it.
	Name     string
	Resource schema.GroupResource
	Object   client.Object
	List     client.ObjectList
}

func watchedKinds() []watched {
	return []watched{
		{"Clusters", schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "clusters"}, &clusterv1.Cluster{}, &clusterv1.ClusterList{}},
		{"TalosControlPlanes", schema.GroupResource{Group: controlplanev1.GroupVersion.Group, Resource: "taloscontrolplanes"}, &controlplanev1.TalosControlPlane{}, &controlplanev1.TalosControlPlaneList{}},
		{"MachineDeployments", schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "machinedeployments"}, &clusterv1.MachineDeployment{}, &clusterv1.MachineDeploymentList{}},
		{"Machines", schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "machines"}, &clusterv1.Machine{}, &clusterv1.MachineList{}},
		{"TalosEtcdBackups", schema.GroupResource{Group: controlplanev1.GroupVersion.Group, Resource: "talosetcdbackups"}, &controlplanev1.TalosEtcdBackup{}, &controlplanev1.TalosEtcdBackupList{}},
		{"Events", schema.GroupResource{Resource: "events"}, &corev1.Event{}, &corev1.EventList{}},
	}
}

// watcher holds an informer for each kind the caller may list and watch, and tells
// subscribers when any of them changes.
type watcher struct {
	cache    ctrlcache.Cache
	kinds    []watched
	readable map[string]bool

	mu          sync.Mutex
	version     uint64
	subscribers map[chan struct{}]struct{}
}

// newWatcher asks the API server which kinds the caller may list and watch in namespace
// (all when empty), starts informers for those and waits for them to fill.
func newWatcher(ctx context.Context, c client.Client, cc ctrlcache.Cache, namespace string) (*watcher, error) {
	w := &watcher{cache: cc, readable: map[string]bool{}, subscribers: map[chan struct{}]struct{}{}}
	for _, k := range watchedKinds() {
		ok, err := allowedAll(ctx, c, namespace, k.Resource, "list", "watch")
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		informer, err := cc.GetInformer(ctx, k.Object)
		if err != nil {
			return nil, fmt.Errorf("failed to watch %s: %w", k.Name, err)
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { w.changed() },
			UpdateFunc: func(any, any) { w.changed() },
			DeleteFunc: func(any) { w.changed() },
		}); err != nil {
			return nil, err
		}
		w.kinds = append(w.kinds, k)
		w.readable[k.Name] = true
	}
	if !w.readable["Clusters"] {
		return nil, fmt.Errorf("the kubeconfig's user may not list and watch Clusters (cluster.x-k8s.io)%s", inNamespace(namespace))
	}
	return w, nil
}

func inNamespace(namespace string) string {
	if namespace == "" {
		return " in all namespaces; pass --namespace to show one"
	}
	return " in namespace " + namespace
}

// allowedAll says whether the caller may do every verb on resource in namespace.
func allowedAll(ctx context.Context, c client.Client, namespace string, resource schema.GroupResource, verbs ...string) (bool, error) {
	for _, verb := range verbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: resource.Group, Resource: resource.Resource},
		}}
		if err := c.Create(ctx, review); err != nil {
			return false, fmt.Errorf("failed to ask the API server whether the user may %s %s: %w", verb, resource, err)
		}
		if !review.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

func (w *watcher) changed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.version++
	for ch := range w.subscribers {
		select {
		case ch <- struct{}{}:
		default: // already told; the subscriber reads the newest state when it wakes
		}
	}
}

// subscribe returns a channel that receives a value after each change, and its cancel.
func (w *watcher) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.subscribers[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.subscribers, ch)
		w.mu.Unlock()
	}
}

// snapshot reads every cache.
func (w *watcher) snapshot(ctx context.Context) (*snapshot, error) {
	s := &snapshot{Readable: w.readable}
	for _, k := range w.kinds {
		list := k.List.DeepCopyObject().(client.ObjectList)
		if err := w.cache.List(ctx, list); err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", k.Name, err)
		}
		switch l := list.(type) {
		case *clusterv1.ClusterList:
			s.Clusters = l.Items
		case *controlplanev1.TalosControlPlaneList:
			s.ControlPlanes = l.Items
		case *clusterv1.MachineDeploymentList:
			s.MachineDeployments = l.Items
		case *clusterv1.MachineList:
			s.Machines = l.Items
		case *controlplanev1.TalosEtcdBackupList:
			s.Backups = l.Items
		case *corev1.EventList:
			s.Events = l.Items
		}
	}
	return s, nil
}

// unreadable names the kinds the caller may not read, for the page to say so.
func (w *watcher) unreadable() []string {
	var out []string
	for _, k := range watchedKinds() {
		if !w.readable[k.Name] {
			out = append(out, k.Name)
		}
	}
	return out
}

// stripManagedFields keeps the caches small: the dashboard never shows managed fields.
func stripManagedFields(in any) (any, error) {
	if obj, ok := in.(metav1.Object); ok {
		obj.SetManagedFields(nil)
	}
	return in, nil
}
