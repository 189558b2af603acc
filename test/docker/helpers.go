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

package docker

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
)

// Inspect returns what `docker container inspect` says about the container name.
func Inspect(tb testing.TB, name string) container.InspectResponse {
	tb.Helper()
	out, err := Docker(tb.Context(), "container", "inspect", name)
	if err != nil {
		tb.Fatal(err)
	}
	var inspected []container.InspectResponse
	if err := json.Unmarshal([]byte(out), &inspected); err != nil || len(inspected) != 1 {
		tb.Fatalf("Cannot read the inspection of container %s (%d results): %v", name, len(inspected), err)
	}
	return inspected[0]
}

// CanRunPrivileged reports whether the engine grants privileged mode: not when it runs
// rootless or inside an unprivileged container. It runs the simulator image.
func CanRunPrivileged(ctx context.Context) bool {
	_, err := Docker(ctx, "run", "--rm", "--privileged", "--entrypoint", "/usr/local/bin/talon", SimImage(), "version")
	return err == nil
}

// Leftovers lists the containers, volumes and networks carrying all labels, as
// "container <id>", "volume <name>" and "network <id>".
func Leftovers(ctx context.Context, labels map[string]string) ([]string, error) {
	var left []string
	for _, kind := range []string{"container", "volume", "network"} {
		args := []string{kind, "ls", "--quiet"}
		if kind == "container" {
			args = append(args, "--all")
		}
		out, err := Docker(ctx, append(args, filters(labels)...)...)
		if err != nil {
			return nil, err
		}
		for id := range strings.FieldsSeq(out) {
			left = append(left, kind+" "+id)
		}
	}
	return left, nil
}

// RemoveLabelled removes the containers (with their volumes), volumes and networks
// carrying all labels: now, in case an interrupted run left them, and when tb ends.
func RemoveLabelled(tb testing.TB, labels map[string]string) {
	tb.Helper()
	ctx := context.WithoutCancel(tb.Context())
	remove := func() {
		// Nothing to report when there is nothing to remove.
		left, _ := Leftovers(ctx, labels)
		for _, item := range left {
			kind, id, _ := strings.Cut(item, " ")
			args := []string{kind, "rm", id}
			if kind == "container" {
				args = []string{"container", "rm", "--force", "--volumes", id}
			}
			_, _ = Docker(ctx, args...)
		}
	}
	remove()
	tb.Cleanup(remove)
}

func filters(labels map[string]string) []string {
	args := make([]string, 0, 2*len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		args = append(args, "--filter", "label="+k+"="+labels[k])
	}
	return args
}
