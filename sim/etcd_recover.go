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
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file is Talos' etcd disaster recovery: EtcdRecover uploads a snapshot (what
// EtcdSnapshot streamed from a member of the lost cluster) to where machined keeps it,
// /var/lib/etcd.snapshot, and Bootstrap with recover_etcd starts etcd in bootstrap mode,
// whose service first restores its data directory from that snapshot, as a cluster of this
// one member, with etcdutl.

// recoverySnapshotFile is where the node keeps an uploaded snapshot in its state directory:
// constants.EtcdRecoverySnapshotPath on EPHEMERAL (/var/lib), beside etcd's data directory.
const recoverySnapshotFile = "etcd.snapshot"

// EtcdRecover takes the upload of an etcd snapshot for Bootstrap with recover_etcd, as
// machined's does: FailedPrecondition while /var/lib is not there yet (here: before the node
// is configured), Unimplemented on a worker, a partial upload removed, a new one replacing
// the last. Errors writing the file are machined's, without a gRPC code.
func (s *machineService) EtcdRecover(stream grpc.ClientStreamingServer[common.Data, machine.EtcdRecoverResponse]) error {
	n := s.node
	if _, err := os.Stat(n.stateDir()); err != nil || !n.configured() {
		return status.Error(codes.FailedPrecondition, "etcd service is not ready for recovery yet")
	}
	if !n.isControlPlane() {
		return status.Error(codes.Unimplemented, "etcd recover is only available on control plane nodes")
	}
	if n.opts.Light != nil {
		return status.Error(codes.Unimplemented, errNoMemoryData.Error())
	}
	path := n.stateDir(recoverySnapshotFile)
	//nolint:gosec // the node's own state directory
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("error creating etcd recovery snapshot: %w", err)
	}
	uploaded := false
	defer func() {
		_ = f.Close()
		if !uploaded {
			_ = os.Remove(path)
		}
	}()
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if _, err := f.Write(msg.GetBytes()); err != nil {
			return fmt.Errorf("error writing snapshot: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("error fsyncing snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("error closing snapshot: %w", err)
	}
	uploaded = true
	n.opts.Log.Info("Received an etcd recovery snapshot", "path", constants.EtcdRecoverySnapshotPath)
	return stream.SendAndClose(&machine.EtcdRecoverResponse{Messages: []*machine.EtcdRecover{{}}})
}

// recoverEtcd is the etcd service Bootstrap with recover_etcd started: it restores the data
// directory from the uploaded snapshot (the service's pre stage), then runs the cluster's
// first member on it and brings up the control plane, as bootstrapEtcd does. A failure ends
// the service Failed with machined's message; the data directory stays empty and the
// snapshot stays, so the node can be bootstrapped again. The caller set n.bootstrapping.
//
// ctx is the node's services context: the recovery outlives the Bootstrap call.
func (n *Node) recoverEtcd(ctx context.Context, cfg talosconfig.Provider, name string, skipHashCheck bool) {
	defer func() {
		n.mu.Lock()
		n.bootstrapping = false
		n.mu.Unlock()
	}()
	n.services.event("etcd", servicePreparing, "Running pre state")
	if ctx.Err() != nil {
		return // the node stopped: its services are gone
	}
	if err := n.restoreEtcd(name, skipHashCheck); err != nil {
		n.opts.Log.Info("etcd failed to recover from the snapshot", "reason", err.Error())
		n.services.stopped("etcd", serviceFailed, "Failed to run pre stage: "+err.Error())
		return
	}
	if err := n.startBootstrapMember(ctx, ctx, cfg, name, true); err != nil {
		msg := status.Convert(err).Message()
		n.opts.Log.Info("etcd failed to start from the recovered data", "reason", msg)
		n.services.stopped("etcd", serviceFailed, "Failed running service: "+msg)
	}
}

// restoreEtcd makes the node's etcd data directory from the uploaded snapshot, as the etcd
// service's recoverFromSnapshot does: etcdutl's Status, then Restore as this one member
// (its name and peer URL, an initial cluster of itself), then the snapshot is deleted. The
// errors are machined's, naming Talos' paths. Unlike Talos, which restores in place, the
// restore is made beside the data directory and moved into it once complete: a snapshot that
// fails its hash check leaves nothing behind.
func (n *Node) restoreEtcd(name string, skipHashCheck bool) error {
	path, dataDir, restoring := n.stateDir(recoverySnapshotFile), n.stateDir("etcd"), n.stateDir("etcd.restoring")
	talosPaths := strings.NewReplacer(path, constants.EtcdRecoverySnapshotPath, restoring, constants.EtcdDataPath, dataDir, constants.EtcdDataPath)
	talosError := func(format string, err error) error {
		return fmt.Errorf(format, errors.New(talosPaths.Replace(err.Error())))
	}

	// etcdutl logs to machined's log, as Talos' does.
	manager := snapshot.NewV3(zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(n.logs.of("machined")), zapcore.InfoLevel)))
	if err := checkSnapshotFile(path); err != nil {
		return talosError("error verifying snapshot: %w", err)
	}
	st, err := manager.Status(path)
	if err != nil {
		return talosError("error verifying snapshot: %w", err)
	}
	n.opts.Log.Info(fmt.Sprintf("recovering etcd from snapshot: hash %08x, revision %d, total keys %d, total size %d",
		st.Hash, st.Revision, st.TotalKey, st.TotalSize))
	if !skipHashCheck {
		if err := checkSnapshotHash(path); err != nil {
			return talosError("error recovering from the snapshot: %w", err)
		}
	}
	if err := os.RemoveAll(restoring); err != nil {
		return err
	}
	peer := etcdPeer(n.ip)
	err = manager.Restore(snapshot.RestoreConfig{
		SnapshotPath:   path,
		Name:           name,
		OutputDataDir:  restoring,
		PeerURLs:       []string{peer},
		InitialCluster: name + "=" + peer,
		SkipHashCheck:  skipHashCheck,
	})
	if err == nil {
		// Onto the empty (or missing) data directory; a directory made meanwhile fails this.
		err = os.Rename(restoring, dataDir)
	}
	if err != nil {
		_ = os.RemoveAll(restoring)
		return talosError("error recovering from the snapshot: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return talosError("error deleting snapshot: %w", err)
	}
	return nil
}

// startBootstrapMember starts the cluster's first member on the node's data directory (empty:
// a new cluster; restored: the recovered one, whose membership etcd then reads from its data
// rather than from the initial cluster), records it, and brings up the control plane in the
// background, in servicesCtx (the services of the config the bootstrap began under). Its
// errors carry Talos' gRPC codes for Bootstrap. A member that fails to start leaves an empty
// data directory, but recovered data stays, as it stays on Talos: the next boot starts the
// member from it.
func (n *Node) startBootstrapMember(ctx, servicesCtx context.Context, cfg talosconfig.Provider, name string, recovered bool) error {
	dataDir := n.stateDir("etcd")
	tlsInfo, err := writeEtcdPKI(n.stateDir("etcd-pki"), cfg.Cluster().Etcd().CA(), name, n.ip)
	if err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	member, err := n.startEtcd(ctx, dataDir, tlsInfo, name, name+"="+etcdPeer(n.ip), "new")
	if err != nil {
		if !recovered {
			_ = os.RemoveAll(dataDir)
		}
		return status.Error(codes.Internal, err.Error())
	}
	n.mu.Lock()
	if servicesCtx.Err() != nil {
		// The node stopped, rebooted or was reset while etcd started.
		n.mu.Unlock()
		member.stop()
		return status.Error(codes.Aborted, "the node's services stopped")
	}
	n.etcd = member
	n.bootstrapped++
	n.mu.Unlock()
	n.watchRemoval(member)
	n.opts.Log.Info("Bootstrapped etcd", "member", name)
	go func() {
		if err := n.startControlPlane(servicesCtx, cfg, tlsInfo); err != nil && servicesCtx.Err() == nil {
			n.opts.Log.Error(err, "Failed to start the control plane")
		}
	}()
	return nil
}

// boltMagic marks a bbolt database's meta pages (etcd's backend, which a snapshot is).
const boltMagic = 0xED0CDAED

// checkSnapshotFile refuses a snapshot whose bbolt database is shorter than its meta page
// says: a truncated upload. etcdutl's Status opens such a file and bbolt's consistency check
// then reads pages past its end and panics in a goroutine of its own (bbolt v1.4.3), which
// would take every simulated node of the process down (on Talos, machined).
func checkSnapshotFile(path string) error {
	// Missing: the error etcdutl's Status gives.
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	f, err := os.Open(path) //nolint:gosec // the node's own state directory
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	size := info.Size()
	if size%512 == sha256.Size {
		size -= sha256.Size // the integrity hash etcd appends to a snapshot
	}
	// A meta page: the page header (16 bytes), then magic, version, page size, flags (4 bytes
	// each), the root bucket (16), the freelist page, the high water mark, the transaction
	// ID and the checksum (8 each), the checksum being FNV-64a of what precedes it.
	readMeta := func(offset int64) (pageSize, highWater, txid uint64, ok bool) {
		buf := make([]byte, 16+64)
		if _, err := f.ReadAt(buf, offset); err != nil {
			return 0, 0, 0, false
		}
		meta := buf[16:]
		h := fnv.New64a()
		_, _ = h.Write(meta[:56])
		le := binary.LittleEndian
		if le.Uint32(meta[0:]) != boltMagic || le.Uint64(meta[56:]) != h.Sum64() {
			return 0, 0, 0, false
		}
		return uint64(le.Uint32(meta[8:])), le.Uint64(meta[40:]), le.Uint64(meta[48:]), true
	}
	pageSize, highWater, txid, ok := readMeta(0)
	second := int64(pageSize)
	if !ok {
		second = int64(os.Getpagesize())
	}
	if ps, hw, tx, ok1 := readMeta(second); ok1 && (!ok || tx > txid) {
		pageSize, highWater, ok = ps, hw, true
	}
	if !ok {
		return errors.New("snapshot file integrity check failed: not an etcd database (no valid bbolt meta page)")
	}
	if need := highWater * pageSize; uint64(size) < need {
		return fmt.Errorf("snapshot file integrity check failed: the file is truncated: %d bytes of a database of %d", size, need)
	}
	return nil
}

// checkSnapshotHash checks a snapshot against the SHA-256 etcd appends to it, as etcdutl's
// Restore does, with its words, before etcdutl reads the database: bbolt panics on some
// corrupt databases (see checkSnapshotFile). A snapshot without the hash is left to Restore,
// which refuses it unless the hash check is skipped.
func checkSnapshotHash(path string) error {
	f, err := os.Open(path) //nolint:gosec // the node's own state directory
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	if size%512 != sha256.Size {
		return nil
	}
	want := make([]byte, sha256.Size)
	if _, err := f.ReadAt(want, size-sha256.Size); err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size-sha256.Size)); err != nil {
		return err
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("expected sha256 %v, got %v", want, got)
	}
	return nil
}
