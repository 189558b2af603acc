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

package configgen

import "fmt"

// Mode is the runtime a node runs in; it decides how a config is validated.
type Mode string

const (
	// ModeMetal is a node installed on a disk of a bare-metal host or virtual machine.
	ModeMetal Mode = "metal"
	// ModeContainer is a node running as a container, e.g. in Docker.
	ModeContainer Mode = "container"

	// modeAny checks what holds for every runtime, for specs whose nodes' runtime is not
	// known yet (at admission): neither install nor container-only requirements apply.
	modeAny Mode = "any"
)

// ParseMode turns "metal" or "container" into a Mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeMetal, ModeContainer:
		return m, nil
	default:
		return "", fmt.Errorf("unknown mode %q: use metal or container", s)
	}
}

// String implements validation.RuntimeMode.
func (m Mode) String() string { return string(m) }

// RequiresInstall implements validation.RuntimeMode: only metal nodes install to a disk.
func (m Mode) RequiresInstall() bool { return m == ModeMetal }

// InContainer implements validation.RuntimeMode.
func (m Mode) InContainer() bool { return m == ModeContainer }

// containerMachineKinds are infrastructure machine kinds, and their templates, whose nodes
// run in containers.
var containerMachineKinds = map[string]bool{
	"TalosDockerMachine":         true,
	"TalosDockerMachineTemplate": true,
}

// ModeFor returns the runtime of nodes backed by an infrastructure machine (or machine
// template) of kind: container for Talon's Docker machines, metal for everything else.
func ModeFor(infrastructureKind string) Mode {
	if containerMachineKinds[infrastructureKind] {
		return ModeContainer
	}
	return ModeMetal
}
