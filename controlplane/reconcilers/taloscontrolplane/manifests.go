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

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
)

// manifestsFieldManager is the field manager of the bootstrap manifests, Talos' own.
const manifestsFieldManager = "talos"

// manifestsKey identifies what the bootstrap manifests are synced for.
func manifestsKey(tcp *controlplanev1.TalosControlPlane) string {
	return tcp.Spec.Version + "/" + configHash(tcp.Spec.ControlPlaneConfig)
}

// reconcileManifests syncs the bootstrap manifests (kube-proxy, CoreDNS, ...) into the
// workload cluster once every node runs the spec, as talosctl upgrade-k8s does after the
// nodes: Talos creates them at bootstrap and never updates them, so without this a new
// Kubernetes version would leave kube-proxy at the old one. They are read from a node's
// Talos API and applied server-side with Talos' field manager. ManifestsSyncedAnnotation
// records the spec they were synced for.
func (r *Reconciler) reconcileManifests(ctx context.Context, s *scope) error {
	key := manifestsKey(s.tcp)
	if s.tcp.Annotations[controlplanev1.ManifestsSyncedAnnotation] == key {
		return nil
	}
	// Only into a healthy cluster: the next reconcile of an unhealthy one comes soon.
	healthy, _ := s.etcdHealth()
	if !healthy || len(s.componentProblems()) > 0 || !s.componentsSeen() {
		return nil
	}
	var errs []error
	for _, m := range s.active() {
		node, err := r.TalosClients.New(ctx, s.bundle, controlplane.MachineAddress(m))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objects, err := node.BootstrapManifests(ctx)
		_ = node.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.applyManifests(ctx, s, objects); err != nil {
			s.blocked = fmt.Sprintf("Cannot sync the bootstrap manifests into the workload cluster: %v", err)
			return err
		}
		if s.tcp.Annotations == nil {
			s.tcp.Annotations = map[string]string{}
		}
		s.tcp.Annotations[controlplanev1.ManifestsSyncedAnnotation] = key
		ctrl.LoggerFrom(ctx).Info("Synced the bootstrap manifests into the workload cluster", "objects", len(objects), "version", s.tcp.Spec.Version)
		return nil
	}
	return fmt.Errorf("no control-plane node gave its bootstrap manifests: %w", errors.Join(errs...))
}

// applyManifests applies objects to the workload cluster server-side, taking over the
// fields Talos owns.
func (r *Reconciler) applyManifests(ctx context.Context, s *scope, objects []*unstructured.Unstructured) error {
	config, err := r.workloadConfig(ctx, s)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, o := range objects {
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var resource dynamic.ResourceInterface = dc.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			resource = dc.Resource(mapping.Resource).Namespace(o.GetNamespace())
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		if _, err := resource.Patch(ctx, o.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: manifestsFieldManager, Force: ptr.To(true)}); err != nil {
			return fmt.Errorf("failed to apply %s %s: %w", gvk.Kind, o.GetName(), err)
		}
	}
	return nil
}
