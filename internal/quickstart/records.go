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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// recordFile is the record up writes into a cluster's directory.
const recordFile = "talon-up.json"

// Record is what up writes to <out>/<name>/talon-up.json for status and down.
type Record struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Runtime and Image say where the nodes run.
	Runtime string `json:"runtime"`
	Image   string `json:"image,omitempty"`
	// Kubeconfig is the management cluster's kubeconfig.
	Kubeconfig string `json:"kubeconfig"`
	// Plane is the local plane's directory, if up started one.
	Plane string `json:"plane,omitempty"`
}

// Records are the clusters up made in outDir, by name.
func Records(outDir string) (map[string]*Record, error) {
	paths, err := filepath.Glob(filepath.Join(outDir, "*", recordFile))
	if err != nil {
		return nil, err
	}
	records := map[string]*Record{}
	for _, path := range paths {
		rec := &Record{}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, rec); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		records[rec.Name] = rec
	}
	return records, nil
}

// StatusOf gathers the health of the cluster up made in outDir under name: the management
// cluster's objects, the workload cluster's Nodes (through the kubeconfig up wrote) and the
// etcd members (through the Talos API with the cluster's talosconfig).
func StatusOf(ctx context.Context, outDir, name string) (*Health, error) {
	records, err := Records(outDir)
	if err != nil {
		return nil, err
	}
	rec, ok := records[name]
	if !ok {
		return nil, fmt.Errorf("talon up made no cluster %q in %s", name, outDir)
	}
	mgmt, err := managementClient(rec.Kubeconfig)
	if err != nil {
		return nil, err
	}
	var workload client.Reader
	if cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(outDir, name, "kubeconfig")); err == nil {
		if workload, err = client.New(cfg, client.Options{Scheme: Scheme}); err != nil {
			return nil, err
		}
	}
	var etcd EtcdLister
	if talosconfig, err := Talosconfig(ctx, mgmt, rec.Namespace, rec.Name); err == nil {
		if etcd, err = NewTalosEtcdLister(talosconfig, nil); err != nil {
			return nil, err
		}
	}
	return Gather(ctx, mgmt, workload, etcd, rec.Namespace, rec.Name)
}

// writeJSON writes v as indented JSON to path.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
