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
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

const (
	// dialTimeout bounds connecting to a backend, for a forwarded connection or a probe.
	dialTimeout = time.Second
	// acceptRetryDelay paces accepting again after an error such as running out of file
	// descriptors, which passes once connections close.
	acceptRetryDelay = 100 * time.Millisecond
	// noSpliceBuffer is the buffer of each direction with NoSplice: API requests and watch
	// events are small, and thousands of connections hold one each.
	noSpliceBuffer = 8 << 10
)

// Balancer forwards TCP connections on each of its ports to the same port of one of its
// backends, round-robin among the backends that passed their last health check. With no
// healthy backend it tries them all, so a cluster whose nodes are still booting is reached as
// soon as one answers.
type Balancer struct {
	// Probe, when set, tells whether a backend serves a port in place of the network probes
	// (probe): for backends in this process, which can say so without a connection. Set it
	// before Serve or Listen.
	Probe func(ctx context.Context, backend netip.Addr, port int) bool
	// CheckInterval is how often every backend is checked on every port; half a second when
	// zero. Set it before Serve or Listen.
	CheckInterval time.Duration
	// NoSplice copies through a small buffer in user space instead of splice(2). Go splices
	// between TCP connections through a kernel pipe, two file descriptors held by each
	// direction of each connection for as long as it is open: four per idle API watch. Set
	// it for balancers that share a process's file limit with thousands of others (the
	// in-process runtimes), before Serve or Listen.
	NoSplice bool

	ports []int
	// backendsChanged asks the health checker to check the new backends now, so they take
	// traffic without waiting for the next round.
	backendsChanged chan struct{}
	next            atomic.Uint64

	mu       sync.Mutex
	backends []netip.Addr
	// healthy holds, per port, the backends that passed their last check.
	healthy map[int]map[netip.Addr]bool
	// open holds a closer of every forwarded connection, by backend address and port.
	open map[netip.AddrPort]map[*int]func()
}

// New returns a Balancer of ports with no backends yet.
func New(ports ...int) *Balancer {
	return &Balancer{
		ports:           slices.Clone(ports),
		backendsChanged: make(chan struct{}, 1),
		healthy:         map[int]map[netip.Addr]bool{},
		open:            map[netip.AddrPort]map[*int]func(){},
	}
}

// SetBackends replaces the addresses connections are forwarded to. Connections forwarded to
// a backend that is no longer one are closed, so that their clients connect again, to a
// backend that is.
func (b *Balancer) SetBackends(addresses ...netip.Addr) {
	b.mu.Lock()
	b.backends = slices.Clone(addresses)
	for to := range b.open {
		if !slices.Contains(addresses, to.Addr()) {
			b.closeLocked(to)
		}
	}
	b.mu.Unlock()
	select {
	case b.backendsChanged <- struct{}{}:
	default:
	}
}

// Backends returns the addresses connections are forwarded to.
func (b *Balancer) Backends() []netip.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.backends)
}

// Serve forwards connections on address at every port of the Balancer until ctx is done,
// then returns nil once it has closed its listeners and connections.
func (b *Balancer) Serve(ctx context.Context, address string) error {
	stop, err := b.Listen(ctx, address)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}

// Listen listens on address at every port of the Balancer and forwards connections in the
// background until ctx is done or stop is called. It returns once every port accepts
// connections, or with the first port it could not listen on. stop closes the listeners and
// the forwarded connections and returns when nothing of them runs anymore.
func (b *Balancer) Listen(ctx context.Context, address string) (stop func(), err error) {
	listeners := make([]net.Listener, 0, len(b.ports))
	for _, port := range b.ports {
		hostPort := net.JoinHostPort(address, strconv.Itoa(port))
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", hostPort)
		if err != nil {
			for _, opened := range listeners {
				_ = opened.Close()
			}
			return nil, fmt.Errorf("failed to listen on %s: %w", hostPort, err)
		}
		listeners = append(listeners, l)
	}

	ctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(ctx, func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	})
	var running sync.WaitGroup
	running.Go(func() { b.checkHealth(ctx) })
	for i, l := range listeners {
		running.Go(func() { b.accept(ctx, l, b.ports[i], &running) })
	}
	return sync.OnceFunc(func() {
		cancel()
		running.Wait()
	}), nil
}

// accept forwards the connections of l until l is closed; running counts the forwarding.
func (b *Balancer) accept(ctx context.Context, l net.Listener, port int, running *sync.WaitGroup) {
	log := logr.FromContextOrDiscard(ctx)
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			log.Error(err, "Failed to accept a connection", "port", port)
			select {
			case <-ctx.Done():
				return
			case <-time.After(acceptRetryDelay):
			}
			continue
		}
		running.Go(func() { b.forward(ctx, conn, port) })
	}
}

// forward connects client to a backend at port and copies bytes both ways until both sides
// are done or ctx is.
func (b *Balancer) forward(ctx context.Context, client net.Conn, port int) {
	defer func() { _ = client.Close() }()
	backend, to, err := b.dial(ctx, port)
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("Dropping connection", "port", port, "reason", err.Error())
		return
	}
	defer func() { _ = backend.Close() }()
	defer b.track(to, func() {
		_ = client.Close()
		_ = backend.Close()
	})()
	stopClosing := context.AfterFunc(ctx, func() {
		_ = client.Close()
		_ = backend.Close()
	})
	defer stopClosing()

	var copying sync.WaitGroup
	copying.Go(func() { pipe(backend, client, b.NoSplice) })
	copying.Go(func() { pipe(client, backend, b.NoSplice) })
	copying.Wait()
}

// dial connects to the first backend that answers at port, starting from the next one in
// round-robin order.
func (b *Balancer) dial(ctx context.Context, port int) (net.Conn, netip.AddrPort, error) {
	backends := b.candidates(port)
	if len(backends) == 0 {
		return nil, netip.AddrPort{}, errors.New("no backends")
	}
	start := b.next.Add(1)
	var errs []error
	for i := range backends {
		backend := backends[(start+uint64(i))%uint64(len(backends))]
		conn, err := dialBackend(ctx, backend, port)
		if err == nil {
			return conn, netip.AddrPortFrom(backend, uint16(port)), nil
		}
		errs = append(errs, err)
	}
	return nil, netip.AddrPort{}, errors.Join(errs...)
}

// track records closeConn as the closer of a connection forwarded to to, until the returned
// func is called.
func (b *Balancer) track(to netip.AddrPort, closeConn func()) (untrack func()) {
	key := new(int)
	b.mu.Lock()
	if b.open[to] == nil {
		b.open[to] = map[*int]func(){}
	}
	b.open[to][key] = closeConn
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.open[to], key)
		if len(b.open[to]) == 0 {
			delete(b.open, to)
		}
		b.mu.Unlock()
	}
}

// closeLocked closes the connections forwarded to to; b.mu is held.
func (b *Balancer) closeLocked(to netip.AddrPort) {
	for _, closeConn := range b.open[to] {
		closeConn()
	}
}

// candidates are the backends to try at port: the healthy ones, or all when none is.
func (b *Balancer) candidates(port int) []netip.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	var healthy []netip.Addr
	for _, backend := range b.backends {
		if b.healthy[port][backend] {
			healthy = append(healthy, backend)
		}
	}
	if len(healthy) == 0 {
		return slices.Clone(b.backends)
	}
	return healthy
}

func dialBackend(ctx context.Context, backend netip.Addr, port int) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: dialTimeout}
	return dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(backend, uint16(port)).String())
}

// pipe copies src to dst until src ends, then half-closes dst so that its peer sees the end
// while the other direction carries on: a client may send its request, close its side and
// still read the answer. An error ends both directions. With noSplice the bytes pass
// through a buffer of this process rather than a kernel pipe (Balancer.NoSplice).
func pipe(dst, src net.Conn, noSplice bool) {
	var err error
	if noSplice {
		// Hiding ReadFrom and WriteTo keeps io.CopyBuffer from splicing.
		_, err = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, noSpliceBuffer))
	} else {
		_, err = io.Copy(dst, src)
	}
	if err != nil {
		_ = dst.Close()
		return
	}
	if tcp, ok := dst.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
}
