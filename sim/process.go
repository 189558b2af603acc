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
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// binaryFor is the binary of Kubernetes component name for the version of the configured
// image, as a node pulls the image the config names: BinDir/v<major>.<minor>/<name> when
// there is one for the image tag's minor, else the pinned BinDir/<name>, which stands in for
// minors the simulator has no binaries of.
func (n *Node) binaryFor(name, image string) (string, error) {
	pinned := filepath.Join(n.opts.BinDir, name)
	if _, err := os.Stat(pinned); err != nil {
		return "", fmt.Errorf("%s not found in %s (run 'make tools'): %w", name, n.opts.BinDir, err)
	}
	minor := kubeMinor(imageTag(image))
	if minor == "" {
		return pinned, nil
	}
	versioned := filepath.Join(n.opts.BinDir, minor, name)
	//nolint:gosec // a path in the node's BinDir: minor is v<digits>.<digits> (kubeMinor)
	if _, err := os.Stat(versioned); err == nil {
		return versioned, nil
	}
	version, err := binaryVersion(pinned)
	if err != nil {
		return "", err
	}
	if kubeMinor(version) != minor {
		// Without a binary of that minor, the pinned one stands in (and reports its own
		// version), so that configs of other versions still make a working cluster.
		n.opts.Log.Info("No binary of the configured Kubernetes minor: running the pinned one",
			"component", name, "image", image, "running", version, "binaries", filepath.Join(n.opts.BinDir, "v<major>.<minor>"))
	}
	return pinned, nil
}

// kubeMinor is v<major>.<minor> of a Kubernetes version such as v1.37.2; empty when version
// is not one.
func kubeMinor(version string) string {
	major, rest, ok := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	if !ok || major == "" || minor == "" || strings.Trim(major+minor, "0123456789") != "" {
		return ""
	}
	return "v" + major + "." + minor
}

// binaryVersions caches the versions Kubernetes binaries report, by path.
var binaryVersions sync.Map

// binaryVersion is the version a Kubernetes binary reports (`--version`: Kubernetes v1.36.3).
func binaryVersion(binary string) (string, error) {
	if v, ok := binaryVersions.Load(binary); ok {
		return v.(string), nil //nolint:forcetypeassert // the map holds strings only
	}
	out, err := exec.Command(binary, "--version").Output() //nolint:noctx // a pinned binary of BinDir, which answers at once
	if err != nil {
		return "", fmt.Errorf("failed to read the version of %s: %w", binary, err)
	}
	version := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes"))
	binaryVersions.Store(binary, version)
	return version, nil
}

// component is a Kubernetes control-plane process of a node (kube-apiserver,
// kube-controller-manager): the real binary from the node's BinDir, where Talos would run
// its static pod.
type component struct {
	name string
	cmd  *exec.Cmd
	// shutdown stops a component that runs in this process (a light node's, Options.Light)
	// rather than as a process: cmd is nil then.
	shutdown func()
	// done is closed when the process has exited.
	done chan struct{}
	// started is when the process started; restarts counts the processes of the same
	// static pod that exited before it (the container's restart count).
	started  time.Time
	restarts int32
}

// inProcessComponent is a component that runs in this process until shutdown, which must
// make it return; done closes when it has.
func inProcessComponent(name string, shutdown func()) *component {
	return &component{name: name, shutdown: shutdown, done: make(chan struct{}), started: time.Now()}
}

// startComponent runs binary name of the Kubernetes version of image (binaryFor) with flags
// (name → value), logging to <state>/<name>.log. The node's process takes it down when it
// dies, as a node's power takes down its static pods.
func (n *Node) startComponent(ctx context.Context, name, image string, flags map[string]string) (*component, error) {
	binary, err := n.binaryFor(name, image)
	if err != nil {
		return nil, err
	}
	args := make([]string, 0, len(flags))
	for _, flag := range slices.Sorted(maps.Keys(flags)) {
		args = append(args, "--"+flag+"="+flags[flag])
	}
	// The log of the process before it stays, as the kubelet keeps a container's previous log.
	_ = os.Rename(n.stateDir(name+".log"), n.stateDir(name+".previous.log"))
	logFile, err := os.Create(n.stateDir(name + ".log"))
	if err != nil {
		return nil, err
	}
	//nolint:gosec // the binary is the pinned Kubernetes component in the node's BinDir.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("failed to start %s: %w", name, err)
	}
	c := &component{name: name, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	go func() {
		// The exit status says nothing new: the node is stopping it, or it failed and its
		// log in the state directory says why.
		_ = cmd.Wait()
		_ = logFile.Close()
		close(c.done)
	}()
	return c, nil
}

// withExtraArgs overlays the extra arguments of the machine config on the defaults, as Talos
// does for its static pods: a user's value replaces the default one.
func withExtraArgs(defaults map[string]string, extra map[string][]string) map[string]string {
	for flag, values := range extra {
		defaults[flag] = strings.Join(values, ",")
	}
	return defaults
}

// running reports whether the process is still alive.
func (c *component) running() bool {
	if c == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process if it runs.
func (c *component) signal(sig os.Signal) {
	if c.running() && c.cmd != nil {
		_ = c.cmd.Process.Signal(sig)
	}
}

// stop terminates the process and waits for it.
func (c *component) stop() {
	if c == nil {
		return
	}
	if c.cmd == nil {
		c.shutdown()
		<-c.done
		return
	}
	if c.cmd.Process == nil {
		return
	}
	// A paused process does not act on SIGINT: wake it first.
	c.signal(syscall.SIGCONT)
	c.signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}
