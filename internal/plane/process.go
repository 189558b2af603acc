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

package plane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a program the plane started.
type Process struct {
	// Name identifies the process in the plane: etcd, kube-apiserver, or a manager's name.
	Name string `json:"name"`
	// PID is its process ID.
	PID int `json:"pid"`
	// Path is the program, used to tell the process from a later one with a reused PID.
	Path string `json:"path"`
	// Log is the file that holds its standard output and error.
	Log string `json:"log"`
	// Started is the process's start time (clock ticks after boot), which tells it from a
	// later process with the same PID.
	Started uint64 `json:"started"`
}

// spawn starts path in its own session with its output appended to logs/<name>.log; the
// process outlives the caller. Its exit is collected in the background when the caller
// is its parent for long enough.
func spawn(dir, name, path string, args, env []string) (Process, error) {
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		return Process{}, err
	}
	logPath := filepath.Join(dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Process{}, err
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	cmd := exec.Command(path, args...)     //nolint:noctx // The process outlives this call on purpose.
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Process{}, fmt.Errorf("failed to start %s: %w", path, err)
	}
	_, started, _ := procStat(cmd.Process.Pid)
	go func() { _ = cmd.Wait() }()
	return Process{Name: name, PID: cmd.Process.Pid, Path: path, Log: logPath, Started: started}, nil
}

// Alive says whether the process is still running (and is the one the plane started, not
// a later process that reuses its PID).
func (p Process) Alive() bool {
	state, started, ok := procStat(p.PID)
	// Z is a process that has exited and waits for its parent.
	return ok && state != "Z" && started == p.Started
}

// procStat reads the state and start time (clock ticks after boot) of process pid.
func procStat(pid int) (state string, started uint64, ok bool) {
	if pid <= 0 {
		return "", 0, false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// The fields after the command name (in parentheses, which may hold spaces) start
	// with the state (field 3); the start time is field 22.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return "", 0, false
	}
	started, err = strconv.ParseUint(fields[19], 10, 64)
	return fields[0], started, err == nil
}

// stop sends SIGTERM, waits up to grace for the process to exit, then kills it.
func (p Process) stop(ctx context.Context, grace time.Duration) error {
	if !p.Alive() {
		return nil
	}
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("failed to stop %s (pid %d): %w", p.Name, p.PID, err)
	}
	deadline := time.Now().Add(grace)
	for p.Alive() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			deadline = time.Now().Add(grace)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// CPUTime is the CPU time the process has used so far, user and system (/proc/<pid>/stat).
func (p Process) CPUTime() (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	_, rest, ok := strings.Cut(string(stat), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", p.PID, stat)
	}
	// utime and stime, fields 14 and 15 of stat, in clock ticks (USER_HZ, 100 on Linux).
	var ticks uint64
	for _, field := range fields[11:13] {
		n, err := strconv.ParseUint(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/%d/stat: %w", p.PID, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100, nil
}

// PeakMemory is the most resident memory the process has used (VmHWM), in bytes.
func (p Process) PeakMemory() (uint64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if value, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.PID)
}

// lastLines is the end of the process's log, for error messages.
func (p Process) lastLines(n int) string {
	data, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// answersOK says whether url answers a GET with 200 OK, within two seconds.
func answersOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}

// handedOut are the ports freePort gave out in this process: two picks before either is
// bound must not be the same port.
var handedOut sync.Map

// freePort finds a port that no socket of this machine uses, below the kernel's ephemeral
// range (net.ipv4.ip_local_port_range, 32768-60999 by default): an outgoing connection never
// takes such a port between the check and the process's bind, and the check binds every
// address, as the managers do (":port"). Ports the kernel hands out (":0") come from the
// ephemeral range, where either could happen; both were seen to fail a manager's start.
func freePort(ctx context.Context) (int, error) {
	for range 200 {
		port := 20000 + rand.IntN(12000) //nolint:gosec // a port number, not a secret
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		return port, l.Close()
	}
	return 0, errors.New("failed to find a free port between 20000 and 32000 in 200 tries")
}

// waitFor polls check every 100ms until it returns nil, the process dies or timeout passes.
func waitFor(ctx context.Context, p Process, timeout time.Duration, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if !p.Alive() {
			return fmt.Errorf("%s exited before %s; the end of %s:\n%s", p.Name, what, p.Log, p.lastLines(5))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not %s after %s (%w); see %s", p.Name, what, timeout, err, p.Log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
