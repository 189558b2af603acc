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

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	dockerruntime "github.com/talon-capi/talon/infrastructure/docker/runtime"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/clusters"
	dockertest "github.com/talon-capi/talon/test/docker"
	"github.com/talon-capi/talon/test/envtest"
)

// Kubernetes versions of the clusters Sidero's providers make: a patch version apart, both
// served by the simulator image.
const (
	sideroVersion     = "v1.36.3"
	sideroNextVersion = "v1.36.4"
)

// sideroControlPlaneGVK is CACPPT's TalosControlPlane.
var sideroControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha3", Kind: "TalosControlPlane"}

// TestSideroProviders runs Sidero Labs' providers (CABPT v0.6.12, CACPPT v0.5.13, built
// from the module proxy) with Talon's Docker infrastructure provider and the simulator, on
// a management plane of their own, with no manual step: a 1 + 2 cluster, the control plane
// scaled to 3, then a rolling change of the Kubernetes patch version. They speak the Talos
// API their own way (a directory listing to tell whether etcd was bootstrapped, service
// events, the etcd member list): each step passes only if the simulator answers as Talos
// does. Their managers (Pods, as their users run them) log no panic.
func TestSideroProviders(t *testing.T) {
	s := newDockerSuite(t)
	ctx, g := t.Context(), s.g
	const ns, name = "default", "sidero"
	t.Cleanup(func() { dockertest.RemoveLabelled(t, map[string]string{dockerruntime.LabelCluster: name}) })

	p := s.sideroPlane("sidero-plane")
	mgmt := s.client(p.Kubeconfig())
	s.createSideroCluster(p, mgmt, ns, name, 1, 2, sideroVersion)

	t.Log("1. Their providers make a 1 + 2 cluster: every Machine Running with a Ready Node")
	workload := s.sideroWorkload(mgmt, ns, name)
	g.Eventually(func(g Gomega) {
		g.Expect(clusters.UsableMachines(ctx, g, mgmt, ns, name)).To(HaveLen(3))
		g.Expect(clusters.ReadyNodes(ctx, g, workload)).To(HaveLen(3))
	}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

	t.Log("2. Their control plane scales 1 -> 3, each new node joining etcd")
	s.patchSideroControlPlane(mgmt, ns, name, map[string]any{"replicas": int64(3)})
	s.expectSideroControlPlane(mgmt, ns, name, sideroVersion)
	before := clusters.Names(controlPlaneMachines(ctx, g, mgmt, ns, name))

	t.Logf("3. Their control plane rolls Kubernetes %s -> %s, one Machine at a time", sideroVersion, sideroNextVersion)
	s.patchSideroControlPlane(mgmt, ns, name, map[string]any{"version": sideroNextVersion})
	after := s.expectSideroControlPlane(mgmt, ns, name, sideroNextVersion)
	for _, m := range after {
		g.Expect(before).NotTo(ContainElement(m), "Machine %s was replaced", m)
	}

	t.Log("4. Their managers logged no panic, and no refusal by RBAC")
	for container, log := range clusters.ManagerLogs(t, p) {
		g.Expect(regexp.MustCompile(`(?i)panic`).FindAllString(log, -1)).To(BeEmpty(), "the log of %s mentions a panic", container)
	}
	clusters.ExpectNoRefusals(t, p)
}

// sideroPlane starts a kubelet-run management cluster where clusterctl init installs
// cert-manager, Cluster API, Talon's infrastructure provider (Docker) and Sidero's bootstrap
// and control-plane providers as their users install them: every manager a Deployment's
// Pod, Sidero's from the images of make sidero-images.
func (s *suite) sideroPlane(name string) *plane.Plane {
	s.t.Helper()
	config := filepath.Join(envtest.RepoRoot(), "out", "clusterctl-sidero.yaml")
	if _, err := os.Stat(config); err != nil {
		s.t.Fatalf("%s is missing: run 'make release-manifests' first", config)
	}
	return s.startPodsPlane(name, func(p *plane.Plane) error {
		return quickstart.InstallSideroProvidersAsPods(s.t.Context(), p, config, []string{"TALON_DOCKER_UNPRIVILEGED_NODES=true"})
	})
}

// createSideroCluster renders examples/sidero-docker-cluster.yaml with clusterctl and
// applies it, the simulator image standing in for Talos.
func (s *suite) createSideroCluster(p *plane.Plane, c client.Client, ns, name string, cps, workers int, version string) {
	s.t.Helper()
	s.g.Expect(createCluster(s.t.Context(), s.bin, p.Kubeconfig(), c, sideroTemplate(), ns, name, cps, workers, version, testWriter{s.t})).To(Succeed())
}

// sideroTemplate is the clusterctl template of a cluster made by Sidero's providers.
func sideroTemplate() []string {
	return []string{"--from", filepath.Join(envtest.RepoRoot(), "examples", "sidero-docker-cluster.yaml")}
}

// createCluster renders a cluster template with clusterctl (template: its flags, such as
// --from FILE or --config FILE --infrastructure talon) against the management plane of
// kubeconfig and applies it with c, the simulator image standing in for Talos.
func createCluster(ctx context.Context, bin, kubeconfig string, c client.Client, template []string, ns, name string, cps, workers int, version string, log io.Writer) error {
	args := append(append([]string{"generate", "cluster", name}, template...), "--target-namespace", ns, "--kubernetes-version", version,
		"--control-plane-machine-count", strconv.Itoa(cps), "--worker-machine-count", strconv.Itoa(workers))
	manifest, err := plane.RunClusterctl(ctx, bin, kubeconfig, []string{"TALOS_IMAGE=" + dockertest.SimImage()}, log, args...)
	if err != nil {
		return err
	}
	objs, err := utilyaml.ToUnstructured(manifest)
	if err != nil {
		return err
	}
	for i := range objs {
		// Retried for a minute, as clusters.ApplyObjects does: a webhook just installed may
		// not be reachable through its Service yet.
		var applyErr error
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			applyErr = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&objs[i]), client.FieldOwner("e2e"))
			return applyErr == nil, nil
		}); err != nil {
			return fmt.Errorf("%s %s: %w", objs[i].GetKind(), objs[i].GetName(), errors.Join(applyErr, err))
		}
	}
	return nil
}

// sideroWorkload is a client of the workload cluster, from the kubeconfig Secret CACPPT
// writes.
func (s *suite) sideroWorkload(c client.Client, ns, name string) client.Client {
	s.t.Helper()
	secret := &corev1.Secret{}
	s.g.Eventually(func() error {
		return c.Get(s.t.Context(), client.ObjectKey{Namespace: ns, Name: name + "-kubeconfig"}, secret)
	}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), "CACPPT writes the kubeconfig Secret")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	s.g.Expect(err).NotTo(HaveOccurred())
	workload, err := client.New(cfg, client.Options{Scheme: quickstart.Scheme})
	s.g.Expect(err).NotTo(HaveOccurred())
	return workload
}

// patchSideroControlPlane merges spec into the spec of CACPPT's TalosControlPlane.
func (s *suite) patchSideroControlPlane(c client.Client, ns, name string, spec map[string]any) {
	s.t.Helper()
	s.g.Expect(patchControlPlane(s.t.Context(), c, sideroControlPlaneGVK, ns, name, spec)).To(Succeed())
}

// patchControlPlane merges spec into the spec of the cluster's control plane
// <name>-control-plane of kind gvk (Talon's and Sidero's TalosControlPlanes share the
// replicas and version fields).
func patchControlPlane(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, ns, name string, spec map[string]any) error {
	tcp := &unstructured.Unstructured{}
	tcp.SetGroupVersionKind(gvk)
	tcp.SetNamespace(ns)
	tcp.SetName(name + "-control-plane")
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	// On a busy machine the API server may fail to reach the provider's webhook in time, as
	// it may for a user's kubectl, who tries again: so does the test, for a while. A refusal
	// is returned at once.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := c.Patch(ctx, tcp, client.RawPatch(types.MergePatchType, patch))
		if !quickstart.Transient(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(2 * time.Second):
		}
	}
}

// expectSideroControlPlane waits until CACPPT's control plane is three usable Machines of
// version, each node's etcd listing three members of one cluster (see expectControlPlane).
func (s *suite) expectSideroControlPlane(c client.Client, ns, name, version string) []string {
	s.t.Helper()
	return s.expectControlPlane(c, sideroControlPlaneGVK, ns, name, version, 3)
}

// expectControlPlane waits until the cluster's control plane is n usable Machines of
// version, its TalosControlPlane (of kind gvk: CACPPT's or Talon's, which say replicas and
// readyReplicas alike) reports n ready replicas, and each node's etcd lists n members of
// one cluster; it returns the Machines' names, sorted.
func (s *suite) expectControlPlane(c client.Client, gvk schema.GroupVersionKind, ns, name, version string, n int) []string {
	s.t.Helper()
	ctx := s.t.Context()
	bundle := s.sideroBundle(c, ns, name)
	var machines []clusterv1.Machine
	s.g.Eventually(func(g Gomega) {
		clusters.UsableMachines(ctx, g, c, ns, name)
		machines = controlPlaneMachines(ctx, g, c, ns, name)
		g.Expect(machines).To(HaveLen(n))
		for _, m := range machines {
			g.Expect(m.Spec.Version).To(Equal(version), "Machine %s", m.Name)
		}
		tcp := &unstructured.Unstructured{}
		tcp.SetGroupVersionKind(gvk)
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-control-plane"}, tcp)).To(Succeed())
		ready, _, _ := unstructured.NestedInt64(tcp.Object, "status", "readyReplicas")
		replicas, _, _ := unstructured.NestedInt64(tcp.Object, "status", "replicas")
		g.Expect([]int64{ready, replicas}).To(Equal([]int64{int64(n), int64(n)}), "the TalosControlPlane's ready replicas and replicas")
		clusters := map[uint64]bool{}
		for _, m := range machines {
			g.Expect(m.Status.Addresses).NotTo(BeEmpty())
			id, members, err := etcdCluster(ctx, bundle, m.Status.Addresses[0].Address)
			g.Expect(err).NotTo(HaveOccurred(), "etcd of Machine %s", m.Name)
			g.Expect(members).To(HaveLen(n), "the members etcd lists on Machine %s", m.Name)
			clusters[id] = true
		}
		g.Expect(clusters).To(HaveLen(1), "one etcd cluster")
	}).WithTimeout(10 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	return clusters.Names(machines)
}

// sideroBundle is the secrets bundle CABPT keeps in the Secret <cluster>-talos.
func (s *suite) sideroBundle(c client.Client, ns, name string) *secrets.Bundle {
	s.t.Helper()
	secret := &corev1.Secret{}
	s.g.Eventually(func() error {
		return c.Get(s.t.Context(), client.ObjectKey{Namespace: ns, Name: name + "-talos"}, secret)
	}).WithTimeout(time.Minute).Should(Succeed())
	bundle, err := configgen.UnmarshalBundle(secret.Data["bundle"])
	s.g.Expect(err).NotTo(HaveOccurred())
	return bundle
}
