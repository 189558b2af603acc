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
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/talon-capi/talon/internal/plane"
)

// CertManagerVersion is the cert-manager release 'make cert-manager' builds, which
// clusterctl installs before the providers when their managers run as Pods.
const CertManagerVersion = "v1.19.1"

// CertManagerManifest is where 'make cert-manager' writes cert-manager's install manifest,
// beside the clusterctl.yaml of Talon's local repository (clusterctl reads a file:// URL as
// a repository: <name>/<version>/<file>).
func CertManagerManifest(clusterctlConfig string) string {
	return filepath.Join(filepath.Dir(clusterctlConfig), "cert-manager", "cert-manager", CertManagerVersion, "cert-manager.yaml")
}

// InstallProvidersAsPods installs cert-manager (this build's), Cluster API and Talon on the
// kubelet-run management cluster p with clusterctl init from clusterctlConfig, as users
// install them: every manager a Deployment, its Pods running the images clusterctl names,
// which must be in the Docker Engine (nothing is pulled). env holds clusterctl variables
// (TALON_DOCKER_UNPRIVILEGED_NODES, CLUSTER_TOPOLOGY, ...). Once the providers are
// available, the in-place update hooks beside clusterctlConfig are registered.
func InstallProvidersAsPods(ctx context.Context, p *plane.Plane, clusterctlConfig string, env []string) error {
	base, err := os.ReadFile(clusterctlConfig)
	if err != nil {
		return fmt.Errorf("clusterctl configuration %s not found: run 'make release-manifests' first: %w", clusterctlConfig, err)
	}
	certManager := CertManagerManifest(clusterctlConfig)
	if _, err := os.Stat(certManager); err != nil {
		return fmt.Errorf("cert-manager's install manifest %s not found: run 'make cert-manager' first", certManager)
	}
	config := filepath.Join(p.Dir(), "clusterctl.yaml")
	if err := os.WriteFile(config, fmt.Appendf(base, "cert-manager:\n  url: file://%s\n  version: %s\n", certManager, CertManagerVersion), 0o600); err != nil {
		return err
	}
	providers := []string{"--config", config, "--core", "cluster-api", "--bootstrap", "talon", "--control-plane", "talon", "--infrastructure", "talon"}
	listed, err := p.Clusterctl(ctx, env, append([]string{"init", "list-images"}, providers...)...)
	if err != nil {
		return err
	}
	images := strings.Fields(string(listed))
	has, err := dockerImages(ctx, images...)
	if err != nil {
		return fmt.Errorf("the managers' images cannot be checked: %w", err)
	}
	missing := slices.DeleteFunc(images, func(image string) bool { return has[image] })
	if len(missing) > 0 {
		return fmt.Errorf("the Docker Engine lacks the images of %s, and nothing is pulled: run 'make docker-build cert-manager' first", strings.Join(missing, ", "))
	}
	if _, err := p.Clusterctl(ctx, env, append(append([]string{"init"}, providers...), "--wait-providers", "--wait-provider-timeout", "300")...); err != nil {
		return err
	}
	path := filepath.Join(filepath.Dir(clusterctlConfig), InPlaceUpdatesFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		p.Logf("Workers are replaced, not updated in place: no %s beside %s\n", InPlaceUpdatesFile, clusterctlConfig)
		return nil
	} else if err != nil {
		return err
	}
	if err := applyFile(ctx, p, path); err != nil {
		return fmt.Errorf("failed to register the in-place update hooks: %w", err)
	}
	return nil
}
