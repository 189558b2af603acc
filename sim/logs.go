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
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file is the node's logs, as machined keeps each service's output in a ring buffer:
// machined's is the simulator's own log of the node (which Talos also writes to the kernel
// log, so it is what dmesg shows), etcd's is the etcd server's. Logs and Dmesg serve them.

// maxLogLines is how many lines a service's log keeps.
const maxLogLines = 4096

// logLine is one line of a log and when it was written.
type logLine struct {
	at   time.Time
	text string
}

// logBuffer is one service's log.
type logBuffer struct {
	mu      sync.Mutex
	lines   []logLine
	partial []byte
	// wake is closed and replaced on every new line.
	wake chan struct{}
}

// Write appends the complete lines of p (an io.Writer for loggers).
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		b.appendLocked(string(b.partial[:i]))
		b.partial = b.partial[i+1:]
	}
	return len(p), nil
}

func (b *logBuffer) appendLocked(text string) {
	b.lines = append(b.lines, logLine{at: time.Now(), text: text})
	if extra := len(b.lines) - maxLogLines; extra > 0 {
		b.lines = b.lines[extra:]
	}
	if b.wake != nil {
		close(b.wake)
	}
	b.wake = make(chan struct{})
}

// stream sends the last tail lines (all when negative) and, with follow, every new line
// until ctx ends.
func (b *logBuffer) stream(ctx context.Context, tail int, follow bool, send func(logLine) error) error {
	b.mu.Lock()
	start := 0
	if tail >= 0 {
		start = max(0, len(b.lines)-tail)
	}
	b.mu.Unlock()
	for {
		b.mu.Lock()
		start = min(start, len(b.lines))
		pending := append([]logLine(nil), b.lines[start:]...)
		start = len(b.lines)
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		for _, line := range pending {
			if err := send(line); err != nil {
				return err
			}
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}

// logs are a node's service logs, by service ID.
type logs struct {
	mu       sync.Mutex
	services map[string]*logBuffer
}

// of is the log of service id, created when missing.
func (l *logs) of(id string) *logBuffer {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.services == nil {
		l.services = map[string]*logBuffer{}
	}
	b, ok := l.services[id]
	if !ok {
		b = &logBuffer{}
		l.services[id] = b
	}
	return b
}

// registered is the log of service id, if it has one.
func (l *logs) registered(id string) (*logBuffer, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.services[id]
	return b, ok
}

// LogTail is the last lines of service id's log (etcd, machined, ...), for a test to print
// when it fails; none when the service has no log.
func (n *Node) LogTail(id string, lines int) []string {
	b, ok := n.logs.registered(id)
	if !ok {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := make([]string, 0, lines)
	for _, line := range b.lines[max(0, len(b.lines)-lines):] {
		tail = append(tail, line.text)
	}
	return tail
}

// Logs streams a service's log, as machined's: the last tail_lines lines (all when
// negative), then new lines with follow. A service without a log is machined's error.
func (s *machineService) Logs(req *machine.LogsRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	b, ok := s.node.logs.registered(req.GetId())
	if !ok || req.GetNamespace() == "k8s.io" {
		return status.Errorf(codes.Unknown, "log %q was not registered", req.GetId())
	}
	return b.stream(stream.Context(), int(req.GetTailLines()), req.GetFollow(), func(line logLine) error {
		return stream.Send(&common.Data{Bytes: []byte(line.text + "\n")})
	})
}

// Dmesg streams the kernel log, which on a simulated node holds what machined logs (Talos
// writes its own log there too), in the format machined gives the kernel's messages.
func (s *machineService) Dmesg(req *machine.DmesgRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	tail := -1
	if req.GetTail() {
		tail = 0
	}
	return s.node.logs.of("machined").stream(stream.Context(), tail, req.GetFollow(), func(line logLine) error {
		return stream.Send(&common.Data{Bytes: fmt.Appendf(nil, "%s: %7s: [%s]: [talos] %s\n",
			"daemon", "info", line.at.UTC().Format(time.RFC3339Nano), line.text)})
	})
}

// teeSink writes what a logger logs to the node's machined log too.
type teeSink struct {
	logr.LogSink
	log    *logBuffer
	name   string
	values []any
}

// newTeeSink tees sink (none when nil) to log.
func newTeeSink(sink logr.LogSink, log *logBuffer) teeSink {
	if sink == nil {
		sink = logr.Discard().GetSink()
	}
	if sink == nil {
		sink = discardSink{}
	}
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		// One more frame between the caller and the sink: this one.
		sink = cd.WithCallDepth(1)
	}
	return teeSink{LogSink: sink, log: log}
}

func (t teeSink) Init(info logr.RuntimeInfo) { t.LogSink.Init(info) }

// WithCallDepth passes the call depth on to the sink.
func (t teeSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := t.LogSink.(logr.CallDepthLogSink); ok {
		t.LogSink = cd.WithCallDepth(depth)
	}
	return t
}

// Enabled logs to the machined log at the default verbosity whatever the sink logs.
func (t teeSink) Enabled(level int) bool { return level == 0 || t.LogSink.Enabled(level) }

// GetCallStackHelper is the sink's, so that a test logger reports the caller's line.
func (t teeSink) GetCallStackHelper() func() {
	if h, ok := t.LogSink.(logr.CallStackHelperLogSink); ok {
		return h.GetCallStackHelper()
	}
	return func() {}
}

func (t teeSink) Info(level int, msg string, keysAndValues ...any) {
	t.GetCallStackHelper()()
	if level == 0 {
		t.write(msg, keysAndValues)
	}
	if t.LogSink.Enabled(level) {
		t.LogSink.Info(level, msg, keysAndValues...)
	}
}

func (t teeSink) Error(err error, msg string, keysAndValues ...any) {
	t.GetCallStackHelper()()
	t.write(msg, append(keysAndValues, "error", err))
	t.LogSink.Error(err, msg, keysAndValues...)
}

func (t teeSink) WithValues(keysAndValues ...any) logr.LogSink {
	t.LogSink = t.LogSink.WithValues(keysAndValues...)
	t.values = append(append([]any(nil), t.values...), keysAndValues...)
	return t
}

func (t teeSink) WithName(name string) logr.LogSink {
	t.LogSink = t.LogSink.WithName(name)
	if t.name != "" {
		name = t.name + "/" + name
	}
	t.name = name
	return t
}

// write appends one line: the message and its key-value pairs (the node's address left out).
func (t teeSink) write(msg string, keysAndValues []any) {
	var line strings.Builder
	line.WriteString(msg)
	all := append(append([]any(nil), t.values...), keysAndValues...)
	for i := 0; i+1 < len(all); i += 2 {
		if key := fmt.Sprint(all[i]); key != "node" {
			fmt.Fprintf(&line, " %s=%v", key, all[i+1])
		}
	}
	_, _ = t.log.Write([]byte(line.String() + "\n"))
}

// discardSink logs nothing.
type discardSink struct{}

func (discardSink) Init(logr.RuntimeInfo)            {}
func (discardSink) Enabled(int) bool                 { return false }
func (discardSink) Info(int, string, ...any)         {}
func (discardSink) Error(error, string, ...any)      {}
func (d discardSink) WithValues(...any) logr.LogSink { return d }
func (d discardSink) WithName(string) logr.LogSink   { return d }
