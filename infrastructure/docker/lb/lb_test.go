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
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
)

// The tests listen on 127.0.60.x, addresses no other package's tests use.

// TestForwardsToBackends sends requests through the balancer: they reach every backend in
// turn, and each backend answers after reading the whole request, which the client ends by
// closing its side of the connection. The same with NoSplice, copying in user space.
func TestForwardsToBackends(t *testing.T) {
	for _, noSplice := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSplice=%t", noSplice), func(t *testing.T) {
			g := NewWithT(t)
			port := freePort(t, "127.0.60.2")
			startTCPBackend(t, "127.0.60.2", port)
			startTCPBackend(t, "127.0.60.3", port)
			balancer := New(port)
			balancer.NoSplice = noSplice
			balancer.SetBackends(netip.MustParseAddr("127.0.60.2"), netip.MustParseAddr("127.0.60.3"))
			listen(t, balancer, "127.0.60.1")

			address := net.JoinHostPort("127.0.60.1", strconv.Itoa(port))
			g.Expect(exchange(t.Context(), address, "ping")).To(HaveSuffix(": ping"))
			g.Expect(answeringBackends(t.Context(), address, 4)).To(ConsistOf("127.0.60.2", "127.0.60.2", "127.0.60.3", "127.0.60.3"))
		})
	}
}

// TestSkipsUnhealthyBackends checks that a backend failing its health check is reported and
// takes no connections while another one serves.
func TestSkipsUnhealthyBackends(t *testing.T) {
	t.Run("a backend that stops accepting", func(t *testing.T) {
		g := NewWithT(t)
		port := freePort(t, "127.0.60.12")
		startTCPBackend(t, "127.0.60.12", port)
		stopping := startTCPBackend(t, "127.0.60.13", port)
		balancer := New(port)
		balancer.SetBackends(netip.MustParseAddr("127.0.60.12"), netip.MustParseAddr("127.0.60.13"))
		log := listen(t, balancer, "127.0.60.11")
		address := net.JoinHostPort("127.0.60.11", strconv.Itoa(port))
		g.Expect(answeringBackends(t.Context(), address, 4)).To(ConsistOf("127.0.60.12", "127.0.60.12", "127.0.60.13", "127.0.60.13"))

		g.Expect(stopping.Close()).To(Succeed())
		g.Eventually(log.String).Should(ContainSubstring(`"msg"="Backend is unhealthy" "backend"="127.0.60.13:` + strconv.Itoa(port) + `"`))
		g.Expect(answeringBackends(t.Context(), address, 4)).To(HaveEach("127.0.60.12"))
	})

	t.Run("an API server whose /readyz fails", func(t *testing.T) {
		g := NewWithT(t)
		client := startAPIServer(t, "127.0.60.22", func() bool { return true })
		var ready atomic.Bool
		startAPIServer(t, "127.0.60.23", ready.Load)
		balancer := New(apiServerPort)
		balancer.SetBackends(netip.MustParseAddr("127.0.60.22"), netip.MustParseAddr("127.0.60.23"))
		listen(t, balancer, "127.0.60.21")
		url := "https://" + net.JoinHostPort("127.0.60.21", strconv.Itoa(apiServerPort)) + "/"

		g.Eventually(func() ([]string, error) { return answeringAPIServers(t.Context(), client, url, 4) }).
			Should(HaveEach("127.0.60.22"), "the API server that is not ready takes no requests")

		ready.Store(true)
		g.Eventually(func() ([]string, error) { return answeringAPIServers(t.Context(), client, url, 4) }).
			Should(ContainElement("127.0.60.23"), "once ready it takes its share")
	})
}

// TestClosesConnectionsOfFailedBackends: a connection held open to a backend that fails its
// health check is closed, so that its client connects again, to the healthy backend; the
// connection to the healthy one carries on.
func TestClosesConnectionsOfFailedBackends(t *testing.T) {
	g := NewWithT(t)
	port := freePort(t, "127.0.60.42")
	startTCPBackend(t, "127.0.60.42", port)
	failing := startTCPBackend(t, "127.0.60.43", port)
	balancer := New(port)
	balancer.SetBackends(netip.MustParseAddr("127.0.60.42"), netip.MustParseAddr("127.0.60.43"))
	log := listen(t, balancer, "127.0.60.41")
	address := net.JoinHostPort("127.0.60.41", strconv.Itoa(port))
	g.Expect(answeringBackends(t.Context(), address, 2)).To(ConsistOf("127.0.60.42", "127.0.60.43"))

	// Two idle connections, one to each backend (round-robin).
	conns := make([]*net.TCPConn, 0, 2)
	for range 2 {
		c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", address)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = c.Close() })
		conns = append(conns, c.(*net.TCPConn))
	}
	// The balancer dials a backend after it accepted a connection: wait until it did, or the
	// failing backend may be marked down first and both connections go to the healthy one.
	g.Eventually(func() []int {
		return []int{forwarded(balancer, "127.0.60.42", port), forwarded(balancer, "127.0.60.43", port)}
	}).WithTimeout(5*time.Second).Should(Equal([]int{1, 1}), "one connection forwarded to each backend")
	g.Expect(failing.Close()).To(Succeed())
	g.Eventually(log.String).Should(ContainSubstring(`"msg"="Backend is unhealthy" "backend"="127.0.60.43:` + strconv.Itoa(port) + `"`))

	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF)
	}
	var open []*net.TCPConn
	for _, c := range conns {
		if !closed(c) {
			open = append(open, c)
		}
	}
	g.Expect(open).To(HaveLen(1), "the connection to the failed backend is closed, the other is not")
	_ = open[0].SetReadDeadline(time.Time{})
	_, err := open[0].Write([]byte("ping"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(open[0].CloseWrite()).To(Succeed())
	answer, err := io.ReadAll(open[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(answer)).To(Equal("127.0.60.42: ping"))
}

// TestSetBackends moves the balancer to another backend: new connections go there.
func TestSetBackends(t *testing.T) {
	g := NewWithT(t)
	port := freePort(t, "127.0.60.32")
	startTCPBackend(t, "127.0.60.32", port)
	startTCPBackend(t, "127.0.60.33", port)
	balancer := New(port)
	listen(t, balancer, "127.0.60.31")
	address := net.JoinHostPort("127.0.60.31", strconv.Itoa(port))

	_, err := exchange(t.Context(), address, "ping")
	g.Expect(err).To(HaveOccurred(), "with no backends connections are closed")

	balancer.SetBackends(netip.MustParseAddr("127.0.60.32"))
	g.Expect(answeringBackends(t.Context(), address, 2)).To(HaveEach("127.0.60.32"))

	balancer.SetBackends(netip.MustParseAddr("127.0.60.33"))
	g.Expect(balancer.Backends()).To(Equal([]netip.Addr{netip.MustParseAddr("127.0.60.33")}))
	g.Expect(answeringBackends(t.Context(), address, 2)).To(HaveEach("127.0.60.33"))
}

// TestListen checks that a port that cannot be listened on fails the whole balancer with its
// address, and that stopping frees the ports.
func TestListen(t *testing.T) {
	g := NewWithT(t)
	free := freePort(t, "127.0.60.41")
	taken, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.60.41:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = taken.Close() }()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	_, err = New(free, takenPort).Listen(t.Context(), "127.0.60.41")
	g.Expect(err).To(MatchError(HavePrefix("failed to listen on 127.0.60.41:" + strconv.Itoa(takenPort) + ": ")))

	t.Log("The port opened before the failure was closed again: Serve listens on it until cancelled")
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error)
	go func() { served <- New(free).Serve(ctx, "127.0.60.41") }()
	g.Eventually(func() error { return dialAndClose(t.Context(), net.JoinHostPort("127.0.60.41", strconv.Itoa(free))) }).Should(Succeed())
	cancel()
	g.Eventually(served).Should(Receive(BeNil()))
	g.Expect(dialAndClose(t.Context(), net.JoinHostPort("127.0.60.41", strconv.Itoa(free)))).NotTo(Succeed(), "the port is closed")
}

// listen runs balancer on address until the test ends and returns its log.
func listen(t *testing.T, balancer *Balancer, address string) *logBuffer {
	t.Helper()
	log := &logBuffer{}
	ctx := logr.NewContext(t.Context(), funcr.New(log.write, funcr.Options{}))
	stop, err := balancer.Listen(ctx, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return log
}

// logBuffer collects the lines of a funcr logger written from many goroutines.
type logBuffer struct {
	mu    sync.Mutex
	lines strings.Builder
}

func (l *logBuffer) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines.WriteString(prefix + args + "\n")
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines.String()
}

// freePort is a port nothing listens on at address.
func freePort(t *testing.T, address string) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", net.JoinHostPort(address, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// forwarded counts the connections b forwards to address at port.
func forwarded(b *Balancer, address string, port int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.open[netip.AddrPortFrom(netip.MustParseAddr(address), uint16(port))])
}

// startTCPBackend serves at address:port until the test ends or the returned listener is
// closed. It reads each request to its end and answers "<address>: <request>".
func startTCPBackend(t *testing.T, address string, port int) net.Listener {
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
			go func() {
				defer func() { _ = conn.Close() }()
				request, err := io.ReadAll(conn)
				if err != nil {
					return
				}
				_, _ = conn.Write([]byte(address + ": " + string(request)))
			}()
		}
	}()
	return l
}

// startAPIServer serves HTTPS at address:6443 until the test ends: /readyz answers 200 when
// ready says so, any other path answers address. It returns a client that trusts the server
// through the balancer and opens a connection per request.
func startAPIServer(t *testing.T, address string, ready func() bool) *http.Client {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", net.JoinHostPort(address, strconv.Itoa(apiServerPort)))
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, address)
	}))
	_ = server.Listener.Close()
	server.Listener = l
	server.StartTLS()
	t.Cleanup(server.Close)

	roots := x509.NewCertPool()
	roots.AddCert(server.Certificate())
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			// httptest's certificate names example.com, not the balancer's address.
			TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: "example.com", MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
	}
}

// exchange sends request through address, ends it by closing its side and returns the answer.
func exchange(ctx context.Context, address, request string) (string, error) {
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", address)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		return "", err
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	answer, err := io.ReadAll(conn)
	if err != nil {
		return "", err
	}
	if len(answer) == 0 {
		return "", errors.New("connection closed without an answer")
	}
	return string(answer), nil
}

// answeringBackends sends n requests through address and returns the backends that answered.
func answeringBackends(ctx context.Context, address string, n int) ([]string, error) {
	var backends []string
	for range n {
		answer, err := exchange(ctx, address, "ping")
		if err != nil {
			return nil, err
		}
		backend, _, _ := strings.Cut(answer, ": ")
		backends = append(backends, backend)
	}
	return backends, nil
}

// answeringAPIServers sends n requests to url with client and returns the API servers that
// answered.
func answeringAPIServers(ctx context.Context, client *http.Client, url string, n int) ([]string, error) {
	var servers []string
	for range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		servers = append(servers, string(body))
	}
	return servers, nil
}

func dialAndClose(ctx context.Context, address string) error {
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", address)
	if err != nil {
		return err
	}
	return conn.Close()
}
