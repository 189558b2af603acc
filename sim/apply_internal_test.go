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

package sim

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestOneApplyAtATime: while a config apply runs, a node of Talos 1.13.3 or later refuses
// another with FailedPrecondition, as machined does (the guard came with 1.14 and was
// backported to 1.13.3); an older node takes it up.
func TestOneApplyAtATime(t *testing.T) {
	for _, tc := range []struct {
		version string
		guards  bool
	}{{"v1.13.2", false}, {"v1.13.3", true}, {"v1.14.1", true}} {
		t.Run(tc.version, func(t *testing.T) {
			g := NewWithT(t)
			n, err := NewNode(Options{Address: "127.0.46.9", StateDir: t.TempDir(), TalosVersion: tc.version})
			g.Expect(err).NotTo(HaveOccurred())
			n.version = tc.version // as Start boots it, without serving the API
			s := &machineService{node: n}
			s.applying.Lock() // an apply in progress
			defer s.applying.Unlock()
			// Not a config: an apply that gets past the guard is refused for its data.
			_, err = s.ApplyConfiguration(t.Context(), &machine.ApplyConfigurationRequest{Data: []byte("not a config")})
			if tc.guards {
				g.Expect(status.Code(err)).To(Equal(codes.FailedPrecondition))
				g.Expect(status.Convert(err).Message()).To(Equal("another apply configuration is already in progress"))
			} else {
				g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument), "%v", err)
			}
		})
	}
}
