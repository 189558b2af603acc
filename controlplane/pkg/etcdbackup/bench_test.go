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

package etcdbackup_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/talon-capi/talon/controlplane/pkg/etcdbackup"

	"github.com/talon-capi/talon/test/s3server"
)

// BenchmarkEtcdBackup streams real etcd snapshots of 200 and 400 MiB (a database of 1 MiB
// values, snapshotted by etcd itself) to a real S3 server, in clear and encrypted for an age
// identity or with a passphrase, the way
// a TalosEtcdBackup does: MB/s is the throughput, MiB-rss-growth how much the process's
// resident memory rose above what it was before the upload (sampled every 5 ms). The
// second must not grow with the snapshot: the upload holds one part at a time.
func BenchmarkEtcdBackup(b *testing.B) {
	srv := s3server.Start(b, host, "backups")
	store := open(b, srv, "backups", s3server.SecretAccessKey)
	identity, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	for _, mib := range []int{200, 400} {
		snapshot := etcdSnapshot(b, mib)
		for _, enc := range []struct {
			name string
			key  etcdbackup.Key
		}{{"clear", etcdbackup.Key{}}, {"identity", etcdbackup.Key{Identity: identity.String()}}, {"passphrase", etcdbackup.Key{Passphrase: "correct horse battery staple"}}} {
			name := fmt.Sprintf("%dMiB/%s", mib, enc.name)
			b.Run(name, func(b *testing.B) {
				info, err := os.Stat(snapshot)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(info.Size())
				var growth float64
				for i := 0; b.Loop(); i++ {
					f, err := os.Open(snapshot)
					if err != nil {
						b.Fatal(err)
					}
					peak := sampleRSS(func() {
						if _, err := store.Put(b.Context(), fmt.Sprintf("bench/%s-%d.db", strings.ReplaceAll(name, "/", "-"), i), f, enc.key); err != nil {
							b.Fatal(err)
						}
					})
					_ = f.Close()
					growth = max(growth, peak)
				}
				b.ReportMetric(growth/(1<<20), "MiB-rss-growth")
			})
		}
	}
}

// sampleRSS runs fn and returns how far the process's resident memory rose above its level
// before fn, at its highest.
func sampleRSS(fn func()) float64 {
	base := rss()
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if v := rss() - base; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	fn()
	close(done)
	<-stopped
	return float64(peak.Load())
}

// rss is the process's resident memory in bytes (VmRSS).
func rss() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "VmRSS:" {
			kib, _ := strconv.ParseInt(fields[1], 10, 64)
			return kib << 10
		}
	}
	return 0
}

// etcdSnapshot runs an etcd member, writes mib MiB of 1 MiB values into it, and saves
// etcd's own snapshot of it to a file; the member is stopped before the file is returned.
func etcdSnapshot(b *testing.B, mib int) string {
	b.Helper()
	dir := b.TempDir()
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.LogLevel = "error"
	cfg.QuotaBackendBytes = 4 << 30
	// The member listens on an address of its own, next to the S3 server's.
	peer, _ := url.Parse("http://127.0.73.2:2380")
	client, _ := url.Parse("http://127.0.73.2:2379")
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Clients[0].Addr().String()}, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	value := bytes.Repeat([]byte("etcd"), 1<<18)
	for i := range mib {
		value[0] = byte(i)
		if _, err := c.Put(b.Context(), fmt.Sprintf("/registry/bench/%05d", i), string(value)); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	r, err := c.Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	path := filepath.Join(dir, "snapshot.db")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.ReadFrom(r); err != nil {
		b.Fatal(err)
	}
	return path
}
