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
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file is the part of a node's filesystem the simulator can show through Read and
// List: the files talosctl and operators read on a Talos node (the boot ID talosctl compares
// across a reboot, os-release, the hostname, the machine config on STATE) and etcd's data
// directory, which is the node's real etcd data, and an etcd snapshot uploaded for recovery.

// vfile is a file or directory of the node's filesystem.
type vfile struct {
	dir      bool
	size     int64
	modified time.Time
	open     func() (io.ReadCloser, error)
}

// files is the node's filesystem as it is now, by absolute path.
func (n *Node) files() map[string]vfile {
	n.mu.Lock()
	bootID, version, cfgData := n.bootID, n.version, n.cfgData
	host, _ := n.fqdnLocked()
	n.mu.Unlock()
	now := time.Now()
	files := map[string]vfile{}
	addDirs := func(p string, at time.Time) {
		for dir := path.Dir(p); ; dir = path.Dir(dir) {
			if _, ok := files[dir]; !ok {
				files[dir] = vfile{dir: true, modified: at}
			}
			if dir == "/" {
				return
			}
		}
	}
	content := func(p string, data []byte) {
		files[p] = vfile{size: int64(len(data)), modified: now, open: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}}
		addDirs(p, now)
	}
	content("/proc/sys/kernel/random/boot_id", []byte(bootID+"\n"))
	content("/etc/hostname", []byte(host+"\n"))
	content("/etc/os-release", []byte("NAME=\"Talos\"\nID=talos\nVERSION_ID="+version+"\nPRETTY_NAME=\"Talos ("+version+")\"\nHOME_URL=\"https://www.talos.dev/\"\n"))
	if cfgData != nil {
		content("/system/state/config.yaml", cfgData)
	}
	// etcd's data directory, as it is on disk.
	etcdDir := n.stateDir("etcd")
	_ = filepath.WalkDir(etcdDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // a file etcd removed meanwhile is not listed
		}
		info, err := d.Info()
		if err != nil {
			return nil //nolint:nilerr // as above
		}
		rel, _ := filepath.Rel(etcdDir, p)
		target := path.Join("/var/lib/etcd", filepath.ToSlash(rel))
		f := vfile{dir: d.IsDir(), size: info.Size(), modified: info.ModTime()}
		if !d.IsDir() {
			f.open = func() (io.ReadCloser, error) { return os.Open(p) } //nolint:gosec // a file of the node's own state
		}
		files[target] = f
		addDirs(target, info.ModTime())
		return nil
	})
	// A snapshot uploaded for recovery (EtcdRecover), until the recovery consumes it.
	snapshotPath := n.stateDir(recoverySnapshotFile)
	if info, err := os.Stat(snapshotPath); err == nil && info.Mode().IsRegular() {
		files[constants.EtcdRecoverySnapshotPath] = vfile{size: info.Size(), modified: info.ModTime(), open: func() (io.ReadCloser, error) {
			return os.Open(snapshotPath) //nolint:gosec // a file of the node's own state
		}}
		addDirs(constants.EtcdRecoverySnapshotPath, info.ModTime())
	}
	return files
}

// Read streams a file of the node, as machined does: NotFound for a missing file, an error
// for a directory.
func (s *machineService) Read(req *machine.ReadRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	f, ok := s.node.files()[path.Clean("/"+req.GetPath())]
	if !ok {
		return status.Errorf(codes.NotFound, "stat %s: no such file or directory", req.GetPath())
	}
	if f.dir {
		return status.Error(codes.Unknown, "path must be a regular file")
	}
	r, err := f.open()
	if err != nil {
		return status.Error(codes.Unknown, err.Error())
	}
	defer func() { _ = r.Close() }()
	return streamData(stream, r)
}

// List walks the node's filesystem from the request's root, as machined does: the root
// first (relative name "."), then what lies below it down to the depth asked for (its
// direct children without recursion), filtered by type.
func (s *machineService) List(req *machine.ListRequest, stream grpc.ServerStreamingServer[machine.FileInfo]) error {
	root := "/" + strings.Trim(req.GetRoot(), "/")
	files := s.node.files()
	if _, ok := files[root]; !ok {
		return status.Errorf(codes.Unknown, "lstat %s: no such file or directory", root)
	}
	depth := 1
	if req.GetRecurse() {
		depth = int(req.GetRecursionDepth())
		if depth == 0 {
			depth = -1
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		rel, ok := relativeTo(root, p)
		if !ok || (depth >= 0 && rel != "." && strings.Count(rel, "/") >= depth) {
			continue
		}
		f := files[p]
		if !wantedType(req.GetTypes(), f.dir) {
			continue
		}
		mode := fs.FileMode(0o644)
		if f.dir {
			mode = fs.ModeDir | 0o755
		}
		if err := stream.Send(&machine.FileInfo{
			Name: p, RelativeName: rel, Size: f.size, Mode: uint32(mode), Modified: f.modified.Unix(), IsDir: f.dir,
		}); err != nil {
			return err
		}
	}
	return nil
}

// relativeTo is p relative to root ("." for root itself), and whether p lies under it.
func relativeTo(root, p string) (string, bool) {
	if p == root {
		return ".", true
	}
	prefix := strings.TrimSuffix(root, "/") + "/"
	if !strings.HasPrefix(p, prefix) {
		return "", false
	}
	return strings.TrimPrefix(p, prefix), true
}

// wantedType reports whether a file (or directory) is of one of the types asked for; all
// are when none is.
func wantedType(types []machine.ListRequest_Type, dir bool) bool {
	if len(types) == 0 {
		return true
	}
	want := machine.ListRequest_REGULAR
	if dir {
		want = machine.ListRequest_DIRECTORY
	}
	return slices.Contains(types, want)
}
