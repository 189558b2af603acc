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

// Package docker holds the tests of the docker layer: images Talon builds, run as containers
// by the machine's Docker Engine.
package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Layer is the test layer of this package (see test/require).
const Layer = "docker"

// SimImage is the node simulator image under test: $TALON_SIM_IMAGE, as `make test` builds
// it with `make sim-image`.
func SimImage() string {
	if image := os.Getenv("TALON_SIM_IMAGE"); image != "" {
		return image
	}
	return "ghcr.io/talon-capi/talon-sim:dev"
}

// Available reports why the docker layer cannot run here, or nil: the engine must answer and
// hold the simulator image.
func Available(ctx context.Context) error {
	if _, err := Docker(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		return fmt.Errorf("no Docker Engine answers: %w", err)
	}
	if _, err := Docker(ctx, "image", "inspect", SimImage()); err != nil {
		return fmt.Errorf("image %s is missing (run 'make sim-image'): %w", SimImage(), err)
	}
	return nil
}

// Docker runs the docker CLI and returns its trimmed output.
func Docker(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) || len(out) > 0 {
			return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
