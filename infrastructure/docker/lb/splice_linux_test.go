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

package lb

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestNoSpliceHoldsNoPipes opens idle connections through a balancer and counts the kernel
// pipes this process holds: Go's splice(2) keeps two pipe descriptors per direction of each
// connection, which thousands of in-process balancers cannot afford; with NoSplice there are
// none.
func TestNoSpliceHoldsNoPipes(t *testing.T) {
	for _, tt := range []struct {
		noSplice  bool
		wantPipes int // per idle connection
	}{{false, 4}, {true, 0}} {
		t.Run("NoSplice="+strconv.FormatBool(tt.noSplice), func(t *testing.T) {
			g := NewWithT(t)
			port := freePort(t, "127.0.60.2")
			startTCPBackend(t, "127.0.60.2", port)
			balancer := New(port)
			balancer.NoSplice = tt.noSplice
			balancer.SetBackends(netip.MustParseAddr("127.0.60.2"))
			listen(t, balancer, "127.0.60.1")

			before := settledPipes(t)
			const conns = 5
			for range conns {
				conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(t.Context(), "tcp", net.JoinHostPort("127.0.60.1", strconv.Itoa(port)))
				g.Expect(err).NotTo(HaveOccurred())
				t.Cleanup(func() { _ = conn.Close() })
			}
			g.Eventually(func() int { return forwarded(balancer, "127.0.60.2", port) }).Should(Equal(conns))
			g.Eventually(func() int { return pipes(t) - before }).WithTimeout(2 * time.Second).Should(Equal(conns * tt.wantPipes))
			g.Consistently(func() int { return pipes(t) - before }).WithTimeout(300 * time.Millisecond).Should(Equal(conns * tt.wantPipes))
		})
	}
}

// settledPipes counts the pipes once the pool of spliced connections that ended before is
// emptied: Go keeps their pipes in a sync.Pool, closed by finalizers after two collections.
func settledPipes(t *testing.T) int {
	t.Helper()
	last := -1
	for range 50 {
		runtime.GC()
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		n := pipes(t)
		if n == last {
			return n
		}
		last = n
	}
	t.Fatalf("the number of pipes does not settle (%d)", last)
	return 0
}

// pipes counts the pipe descriptors this process holds.
func pipes(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("Skipping: no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "pipe:") {
			n++
		}
	}
	return n
}
