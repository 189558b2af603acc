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

package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
)

// Providers are Talon's three providers, named as their config/ directories.
var Providers = []string{"bootstrap", "controlplane", "infrastructure"}

// RepoRoot returns the root of the Talon repository this package was built from: the
// directory of this source file when the build kept its path, else (a build with -trimpath,
// as make runs every test) the nearest directory above the working directory, which go test
// sets to the package's own, whose go.mod declares Talon's module.
func RepoRoot() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "..", "..")
	}
	dir, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("cannot locate the Talon repository: %v", err))
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(mod, []byte("module "+module+"\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("cannot locate the Talon repository: no directory above the working directory has its go.mod")
		}
		dir = parent
	}
}

// module is the path of Talon's Go module.
const module = "github.com/talon-capi/talon"

// BinDir returns where the pinned binaries live: KUBEBUILDER_ASSETS if set, else bin/.
func BinDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(RepoRoot(), "bin")
}

// errMissingBinaries says that the machine lacks a binary the plane needs, which is a reason
// to skip; every other start-up error is a failure.
var errMissingBinaries = errors.New("missing binaries")

// Binary returns the path of a pinned binary in BinDir, or an error naming the make target
// that builds it.
func Binary(name string) (string, error) {
	path := filepath.Join(BinDir(), name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%w: %s not found in %s; run 'make tools' to build it from pinned Go modules", errMissingBinaries, name, BinDir())
	}
	return path, nil
}

// ModuleDir returns the directory of a module this repository depends on, as go list sees it.
func ModuleDir(module string) (string, error) {
	cmd := exec.CommandContext(context.Background(), "go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("failed to locate module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not in the module cache; run 'go mod download'", module)
	}
	return dir, nil
}

// CAPICRDDir returns the directory of Cluster API's core CRDs inside its module.
func CAPICRDDir() (string, error) {
	return capiModulePath("core", "config", "crd", "bases")
}

// ClusterctlCRDDir returns the directory of clusterctl's provider inventory CRD inside Cluster
// API's module: clusterctl init installs it, and clusterctl move reads it on both planes.
func ClusterctlCRDDir() (string, error) {
	return capiModulePath("cmd", "clusterctl", "config", "manifest")
}

// capiModulePath returns the path elem inside Cluster API's module.
func capiModulePath(elem ...string) (string, error) {
	dir, err := ModuleDir("sigs.k8s.io/cluster-api")
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{dir}, elem...)...), nil
}

// Kustomize renders a kustomization directory (relative to the repository root) with the
// pinned kustomize.
func Kustomize(dir string) ([]byte, error) {
	kustomize, err := Binary("kustomize")
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(context.Background(), kustomize, "build", filepath.Join(RepoRoot(), dir))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s failed: %w: %s", dir, err, stderr.String())
	}
	return out, nil
}

// TalonCRDs returns Talon's CRDs as the release manifests carry them, contract labels
// included, by rendering each provider's config/<provider>/crd, and the optional
// KubernetesCluster API's config/kubernetescluster.
func TalonCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	dirs := make([]string, 0, len(Providers)+1)
	dirs = append(dirs, filepath.Join("config", "kubernetescluster"))
	for _, p := range Providers {
		dirs = append(dirs, filepath.Join("config", p, "crd"))
	}
	for _, dir := range dirs {
		out, err := Kustomize(dir)
		if err != nil {
			return nil, err
		}
		decoder := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := decoder.Decode(crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("failed to decode the CRDs of %s: %w", dir, err)
			}
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

// webhookConfigurations returns the validating and mutating webhook configurations
// controller-gen wrote for the providers. controller-gen gives every provider's the same
// name (the release manifests prefix it), so each is renamed after its provider: installed
// under one name, the last would replace the others.
func webhookConfigurations() ([]*admissionregistrationv1.ValidatingWebhookConfiguration, []*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	var validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	var mutating []*admissionregistrationv1.MutatingWebhookConfiguration
	for _, p := range Providers {
		path := filepath.Join(RepoRoot(), "config", p, "webhook", "manifests.yaml")
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		decoder := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var raw json.RawMessage
			if err := decoder.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, nil, fmt.Errorf("failed to decode %s: %w", path, err)
			}
			var meta metav1.TypeMeta
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, nil, fmt.Errorf("failed to decode %s: %w", path, err)
			}
			switch meta.Kind {
			case "ValidatingWebhookConfiguration":
				config := &admissionregistrationv1.ValidatingWebhookConfiguration{}
				if err := json.Unmarshal(raw, config); err != nil {
					return nil, nil, fmt.Errorf("failed to decode %s: %w", path, err)
				}
				config.Name = p + "-" + config.Name
				validating = append(validating, config)
			case "MutatingWebhookConfiguration":
				config := &admissionregistrationv1.MutatingWebhookConfiguration{}
				if err := json.Unmarshal(raw, config); err != nil {
					return nil, nil, fmt.Errorf("failed to decode %s: %w", path, err)
				}
				config.Name = p + "-" + config.Name
				mutating = append(mutating, config)
			}
		}
	}
	return validating, mutating, nil
}

// Template returns the objects of a file in templates/, processed as clusterctl generate
// processes it with variables: a variable without a value and without a default is an error.
func Template(file string, variables map[string]string) ([]unstructured.Unstructured, error) {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "templates", file))
	if err != nil {
		return nil, err
	}
	processed, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if v, ok := variables[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("variable %s is not set", name)
	})
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", file, err)
	}
	return utilyaml.ToUnstructured(processed)
}
