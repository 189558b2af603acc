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
	"io"
	"testing"

	. "github.com/onsi/gomega"
)

// TestBadInput: what a user can get wrong on the command line gets an error that says what
// to do, before anything is started or deleted.
func TestBadInput(t *testing.T) {
	out := t.TempDir()
	up := func(change func(*Options)) error {
		o := Options{Name: "demo", Namespace: "default", ControlPlanes: 1, Workers: 2, KubernetesVersion: "v1.36.3",
			BinDir: t.TempDir(), ClusterctlConfig: "none.yaml", OutDir: out, Out: io.Discard}
		change(&o)
		_, err := Up(t.Context(), o)
		return err
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"even control planes", up(func(o *Options) { o.ControlPlanes = 2 }), "--control-planes must be odd and at least 1 (etcd needs a majority), got 2"},
		{"no control plane", up(func(o *Options) { o.ControlPlanes = 0 }), "--control-planes must be odd and at least 1"},
		{"negative workers", up(func(o *Options) { o.Workers = -1 }), "--workers must not be negative, got -1"},
		{"unknown runtime", up(func(o *Options) { o.Runtime = "podman" }), `--runtime must be docker or sim, got "podman"`},
		{"tools not built", up(func(o *Options) { o.Runtime = RuntimeSim }), "clusterctl not found in"},
		{"down of an unknown cluster", Down(t.Context(), DownOptions{OutDir: out, Name: "nope", Out: io.Discard}), `talon up made no cluster "nope" in`},
		{"status of an unknown cluster", func() error { _, err := StatusOf(t.Context(), out, "nope"); return err }(), `talon up made no cluster "nope" in`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(tt.err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
	t.Run("down with nothing made is a no-op", func(t *testing.T) {
		NewWithT(t).Expect(Down(t.Context(), DownOptions{OutDir: t.TempDir(), Out: io.Discard})).To(Succeed())
	})
}
