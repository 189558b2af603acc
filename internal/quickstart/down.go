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
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
)

// DownOptions configure Down.
type DownOptions struct {
	// OutDir is the output directory up used.
	OutDir string
	// Name limits Down to one cluster; the plane stays while other clusters use it.
	Name string
	// KeepConfig keeps each cluster's files (kubeconfig, talosconfig, configs).
	KeepConfig bool
	// Timeout bounds the wait for each cluster's deletion.
	Timeout time.Duration
	// Out receives progress.
	Out io.Writer
}

// Down deletes the clusters up made (through Cluster API, so that the providers remove
// their nodes, load balancers and networks), removes whatever a failed deletion left in
// Docker, stops the local plane when no cluster uses it any more and removes the files.
func Down(ctx context.Context, opts DownOptions) error {
	records, err := Records(opts.OutDir)
	if err != nil {
		return err
	}
	if opts.Name != "" {
		rec, ok := records[opts.Name]
		if !ok {
			return fmt.Errorf("talon up made no cluster %q in %s", opts.Name, opts.OutDir)
		}
		records = map[string]*Record{opts.Name: rec}
	}
	var errs []error
	for name, rec := range records {
		if err := deleteCluster(ctx, rec, opts); err != nil {
			errs = append(errs, err)
			continue
		}
		clusterDir := filepath.Join(opts.OutDir, name)
		if opts.KeepConfig {
			errs = append(errs, os.Remove(filepath.Join(clusterDir, recordFile)))
			sayf(opts.Out, "Kept %s\n", clusterDir)
		} else {
			errs = append(errs, os.RemoveAll(clusterDir))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	left, err := Records(opts.OutDir)
	if err != nil {
		return err
	}
	planeDir := filepath.Join(opts.OutDir, PlaneDirName)
	p, err := plane.Open(planeDir, opts.Out)
	if errors.Is(err, plane.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(left) > 0 {
		sayf(opts.Out, "The management plane stays: %d other cluster(s) use it\n", len(left))
		return nil
	}
	if p.External() {
		// Up installed Cluster API and Talon into a cluster it did not start: they go, the
		// cluster stays.
		if err := p.Stop(ctx); err != nil {
			return err
		}
		// Up registered the in-place update hooks: clusterctl removes no CRD while an
		// object of it is left.
		if err := deleteExtensionConfigs(ctx, p); err != nil {
			return err
		}
		// The garbage collector removes the deleted clusters' templates a moment later;
		// clusterctl refuses to remove CRDs while objects of them exist.
		// One provider per call, Cluster API's core last: clusterctl lists the kinds it knew
		// when it started, so a call that removes two providers' CRDs fails on the second.
		// The API server's discovery may still list the kinds of a provider removed a moment
		// before (their lists answer 404, or clusterctl's mapping no longer finds them): the
		// next call is tried again.
		deadline := time.Now().Add(opts.Timeout)
		for _, providers := range [][]string{
			{"--infrastructure", "talon"}, {"--control-plane", "talon"}, {"--bootstrap", "talon"}, {"--core", "cluster-api"},
		} {
			for {
				_, err := p.Clusterctl(ctx, nil, append(append([]string{"delete"}, providers...), "--include-crd", "--include-namespace")...)
				if err == nil {
					break
				}
				retry := strings.Contains(err.Error(), "found existing objects") ||
					strings.Contains(err.Error(), "the server could not find the requested resource") ||
					strings.Contains(err.Error(), "no matches for kind")
				if !retry || time.Now().After(deadline) {
					return err
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(2 * time.Second):
				}
			}
		}
		if err := errors.Join(p.RemoveClusterctlInventory(ctx), p.UninstallCertManagerAPI(ctx)); err != nil {
			return err
		}
	}
	if err := p.Remove(ctx); err != nil {
		return err
	}
	sayf(opts.Out, "Stopped the management plane and removed %s\n", planeDir)
	return nil
}

// deleteCluster deletes the Cluster of rec and waits until it is gone, then removes what
// is left of it in Docker.
func deleteCluster(ctx context.Context, rec *Record, opts DownOptions) error {
	key := client.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}
	reachable := rec.Plane == ""
	if rec.Plane != "" {
		if p, err := plane.Open(rec.Plane, nil); err == nil && p.Running() {
			reachable = true
		}
	}
	if reachable {
		c, err := managementClient(rec.Kubeconfig)
		if err != nil {
			return err
		}
		cluster := &clusterv1.Cluster{}
		err = c.Get(ctx, key, cluster)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		default:
			sayf(opts.Out, "Deleting cluster %s\n", key)
			start := time.Now()
			if err := c.Delete(ctx, cluster); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			deadline := time.Now().Add(opts.Timeout)
			for {
				err := c.Get(ctx, key, cluster)
				if apierrors.IsNotFound(err) {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("cluster %s still exists after %s; see 'talon status --name %s' and the managers' logs in %s/logs",
						key, opts.Timeout, rec.Name, rec.Plane)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
			}
			sayf(opts.Out, "Cluster %s deleted in %s\n", key, time.Since(start).Round(time.Second))
		}
		if err := deleteApplied(ctx, c, filepath.Join(opts.OutDir, rec.Name, "cluster.yaml")); err != nil {
			return err
		}
	}
	if rec.Runtime == RuntimeDocker {
		return removeFromDocker(ctx, dockerruntime.Cluster{Namespace: rec.Namespace, Name: rec.Name}, opts.Out)
	}
	return nil
}

// deleteExtensionConfigs deletes the ExtensionConfigs of Talon's control-plane provider
// from p (Cluster API's ExtensionConfig has no finalizer: its manager need not run).
func deleteExtensionConfigs(ctx context.Context, p *plane.Plane) error {
	c, err := p.Client(client.Options{})
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: "runtime.cluster.x-k8s.io", Version: "v1beta2", Kind: "ExtensionConfig"})
	err = c.DeleteAllOf(ctx, obj, client.MatchingLabels{clusterv1.ProviderNameLabel: "control-plane-talon"})
	if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete Talon's ExtensionConfig: %w", err)
	}
	return nil
}

// deleteApplied deletes what up applied from manifest (cluster.yaml) and the Cluster's
// deletion left: the templates no Cluster API object owns.
func deleteApplied(ctx context.Context, c client.Client, manifest string) error {
	data, err := os.ReadFile(manifest)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	objs, err := utilyaml.ToUnstructured(data)
	if err != nil {
		return err
	}
	for i := range objs {
		if err := c.Delete(ctx, &objs[i]); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return fmt.Errorf("failed to delete %s %s: %w", objs[i].GetKind(), objs[i].GetName(), err)
		}
	}
	return nil
}

// removeFromDocker removes the containers (with their volumes), the load balancer and the
// network of cluster, if any are left.
func removeFromDocker(ctx context.Context, cluster dockerruntime.Cluster, out io.Writer) error {
	d, err := dockerruntime.NewDocker()
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	nodes, err := d.Nodes(ctx, cluster)
	if err != nil {
		return err
	}
	errs := []error{}
	for _, n := range nodes {
		sayf(out, "Removing the container %s left behind\n", n.Name)
		errs = append(errs, d.DeleteNode(ctx, cluster, n.Machine))
	}
	errs = append(errs, d.DeleteLoadBalancer(ctx, cluster), d.DeleteNetwork(ctx, cluster))
	return errors.Join(errs...)
}

// dockerImages says which of images the local Docker Engine holds; the error says why
// Docker cannot be used.
func dockerImages(ctx context.Context, images ...string) (map[string]bool, error) {
	has := map[string]bool{}
	d, err := dockerruntime.NewDocker()
	if err != nil {
		return has, err
	}
	defer func() { _ = d.Close() }()
	for _, image := range images {
		ok, err := d.HasImage(ctx, image)
		if err != nil {
			return has, err
		}
		has[image] = ok
	}
	return has, nil
}
