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

package cli

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The tests listen on 127.0.62.x, addresses no other package's tests use.

// TestLBFollowsBackendsFile runs `talon lb` and rewrites its backends file, as the Docker
// infrastructure provider does: new connections go to the new backends, and an invalid file
// is reported while the previous backends keep serving.
func TestLBFollowsBackendsFile(t *testing.T) {
	g := NewWithT(t)
	port := startNamedBackend(t, "127.0.62.2", 0)
	startNamedBackend(t, "127.0.62.3", port)
	file := filepath.Join(t.TempDir(), "backends")
	g.Expect(os.WriteFile(file, []byte("# control-plane nodes\n127.0.62.2\n"), 0o600)).To(Succeed())
	log := runLB(t, "--address", "127.0.62.1", "--port", strconv.Itoa(port), "--backends-file", file)
	endpoint := net.JoinHostPort("127.0.62.1", strconv.Itoa(port))
	g.Eventually(answeringBackend).WithArguments(t.Context(), endpoint).Should(Equal("127.0.62.2"))

	t.Log("Rewriting the file moves new connections to the new backend")
	g.Expect(os.WriteFile(file, []byte("127.0.62.3\n"), 0o600)).To(Succeed())
	g.Eventually(answeringBackend).WithArguments(t.Context(), endpoint).WithTimeout(3 * time.Second).Should(Equal("127.0.62.3"))
	g.Expect(log.String()).To(ContainSubstring(`"msg"="Backends changed" "backends"=["127.0.62.3"] "previous"=["127.0.62.2"]`))

	t.Log("An invalid file is reported and the previous backend keeps serving")
	g.Expect(os.WriteFile(file, []byte("127.0.62.3\n127.0.62.4:6443\n"), 0o600)).To(Succeed())
	g.Eventually(log.String).WithTimeout(3 * time.Second).Should(ContainSubstring("invalid backends file " + file + ": line 2: "))
	g.Expect(answeringBackend(t.Context(), endpoint)).To(Equal("127.0.62.3"))
}

// TestLBWithoutBackendsFile checks that with no backends file lb serves the --backend ones.
func TestLBWithoutBackendsFile(t *testing.T) {
	g := NewWithT(t)
	port := startNamedBackend(t, "127.0.62.12", 0)
	runLB(t, "--address", "127.0.62.11", "--port", strconv.Itoa(port),
		"--backends-file", filepath.Join(t.TempDir(), "missing"), "--backend", "127.0.62.12")
	g.Eventually(answeringBackend).WithArguments(t.Context(), net.JoinHostPort("127.0.62.11", strconv.Itoa(port))).
		Should(Equal("127.0.62.12"))
}

// runLB runs `talon lb args...` until the test ends, expecting it to stop cleanly, and returns
// its log.
func runLB(t *testing.T, args ...string) *syncBuffer {
	t.Helper()
	log := &syncBuffer{}
	cmd := NewRootCommand(io.Discard, log)
	cmd.SetArgs(append([]string{"lb"}, args...))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("talon lb failed: %v\n%s", err, log)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("talon lb did not stop\n%s", log)
		}
	})
	return log
}

// startNamedBackend serves at address:port (any free port when 0) until the test ends,
// writing address to every connection, and returns the port.
func startNamedBackend(t *testing.T, address string, port int) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", net.JoinHostPort(address, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, address)
			_ = conn.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// answeringBackend connects to endpoint and returns what the backend behind it wrote.
func answeringBackend(ctx context.Context, endpoint string) (string, error) {
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", endpoint)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	answer, err := io.ReadAll(conn)
	return string(answer), err
}

// syncBuffer is a buffer written by a command running in another goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
