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

package binaries

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// process is a program under test running as its own process.
type process struct {
	cmd    *exec.Cmd
	logs   *strings.Builder
	exited chan error
}

// startProcess runs path with args and extra environment variables; it is killed when the
// test ends, and its output is logged if the test failed.
func startProcess(tb testing.TB, path string, env []string, args ...string) *process {
	tb.Helper()
	p := &process{
		cmd:    exec.CommandContext(context.Background(), path, args...),
		logs:   &strings.Builder{},
		exited: make(chan error, 1),
	}
	p.cmd.Env = append(os.Environ(), env...)
	// One writer for both streams: exec then writes to it from one goroutine at a time.
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("Failed to start %s: %v", path, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	tb.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
		if tb.Failed() {
			tb.Logf("Output of %s:\n%s", path, p.logs.String())
		}
	})
	return p
}

// terminate sends SIGTERM and fails the test unless the process exits 0 within 30s.
func (p *process) terminate(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("Failed to send SIGTERM: %v", err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			tb.Fatalf("%s exited with %v after SIGTERM", p.cmd.Path, err)
		}
	case <-time.After(30 * time.Second):
		tb.Fatalf("%s did not exit within 30s of SIGTERM", p.cmd.Path)
	}
}
