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
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/siderolabs/crypto/x509"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdMember is the node's etcd member: the etcd server library, with certificates from
// the machine config's etcd CA, as the etcd Talos runs.
type etcdMember struct {
	// server is the etcd server library's member; on a light node (Options.Light) mem is the
	// member of the in-memory cluster memCluster instead.
	server     *embed.Etcd
	mem        *memMember
	memStopped <-chan struct{}
	memCluster *memEtcd
	client     *clientv3.Client
	dir        string
	stopOnce   sync.Once
	// leaving is set while the node removes the member itself (leaveEtcd), which then
	// stops it: watchRemoval leaves it alone.
	leaving atomic.Bool
}

// etcdURL is https://ip:port.
func etcdURL(ip net.IP, port int) url.URL {
	return url.URL{Scheme: "https", Host: net.JoinHostPort(ip.String(), strconv.Itoa(port))}
}

// etcdEndpoint is the client URL of the member on ip.
func etcdEndpoint(ip net.IP) string {
	u := etcdURL(ip, EtcdPort)
	return u.String()
}

// etcdPeer is the peer URL of the member on ip.
func etcdPeer(ip net.IP) string {
	u := etcdURL(ip, EtcdPeerPort)
	return u.String()
}

// writeEtcdPKI issues the member's server, peer and client certificates from the etcd CA.
func writeEtcdPKI(dir string, ca *x509.PEMEncodedCertificateAndKey, name string, ip net.IP) (transport.TLSInfo, error) {
	if ca == nil || len(ca.Key) == 0 {
		return transport.TLSInfo{}, errors.New("the machine config has no etcd CA key: only control-plane nodes run etcd")
	}
	member, err := issue(ca, name, []net.IP{ip, net.IPv4(127, 0, 0, 1)}, []string{name, "localhost"},
		[]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth, stdx509.ExtKeyUsageClientAuth})
	if err != nil {
		return transport.TLSInfo{}, err
	}
	if err := writeFilesIn(dir, map[string][]byte{"ca.crt": ca.Crt, "member.crt": member.Crt, "member.key": member.Key}); err != nil {
		return transport.TLSInfo{}, err
	}
	return etcdTLSInfo(dir), nil
}

// etcdTLSInfo names the member's certificate files written by writeEtcdPKI in dir.
func etcdTLSInfo(dir string) transport.TLSInfo {
	return transport.TLSInfo{
		CertFile:       filepath.Join(dir, "member.crt"),
		KeyFile:        filepath.Join(dir, "member.key"),
		TrustedCAFile:  filepath.Join(dir, "ca.crt"),
		ClientCertAuth: true,
	}
}

// startEtcdServer starts the member with the etcd server library. initialCluster is "name=peerURL,..."; state is "new" for
// the bootstrap member and "existing" for a joining one. sharedNetwork skips etcd's check
// that a peer's certificate names the address it connects from: nodes that share one network
// namespace reach each other's local addresses from the destination address itself.
func startEtcdServer(ctx context.Context, dataDir string, tlsInfo transport.TLSInfo, name string, ip net.IP, initialCluster, state string, sharedNetwork bool, log io.Writer) (*etcdMember, error) {
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = dataDir
	peer, client := etcdURL(ip, EtcdPeerPort), etcdURL(ip, EtcdPort)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = initialCluster
	cfg.ClusterState = state
	cfg.ClientTLSInfo, cfg.PeerTLSInfo = tlsInfo, tlsInfo
	cfg.PeerTLSInfo.SkipClientSANVerify = sharedNetwork
	// etcd's log is the etcd service's (talosctl logs etcd).
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(log), zapcore.InfoLevel)))
	cfg.LogLevel = "info"

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to start etcd: %w", err)
	}
	select {
	case <-server.Server.ReadyNotify():
	case err := <-server.Err():
		server.Close()
		return nil, fmt.Errorf("etcd failed: %w", err)
	case <-time.After(60 * time.Second):
		server.Close()
		return nil, errors.New("etcd did not become ready within 60s")
	case <-ctx.Done():
		server.Close()
		return nil, ctx.Err()
	}
	c, err := newEtcdClient(tlsInfo, client.String())
	if err != nil {
		server.Close()
		return nil, err
	}
	return &etcdMember{server: server, client: c, dir: dataDir}, nil
}

func newEtcdClient(tlsInfo transport.TLSInfo, endpoints ...string) (*clientv3.Client, error) {
	tlsConfig, err := tlsInfo.ClientConfig()
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsConfig,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create etcd client: %w", err)
	}
	return c, nil
}

// id is the member's etcd ID.
func (m *etcdMember) id() uint64 {
	if m.mem != nil {
		return m.mem.id
	}
	return uint64(m.server.Server.MemberID())
}

// leader is the ID of the leader the member knows, 0 without one.
func (m *etcdMember) leader() uint64 {
	if m.mem != nil {
		return m.memCluster.leaderID()
	}
	return uint64(m.server.Server.Leader())
}

// stopNotify is closed once the member stopped.
func (m *etcdMember) stopNotify() <-chan struct{} {
	if m.mem != nil {
		return m.memStopped
	}
	return m.server.Server.StopNotify()
}

// isMember reports whether the member is still in its cluster's membership.
func (m *etcdMember) isMember() bool {
	if m.mem != nil {
		return m.memCluster.exists(m.mem.id)
	}
	return m.server.Server.IsMemberExist(m.server.Server.MemberID())
}

// stop stops the member at once, like a node losing power: a graceful stop would try to
// hand over leadership, which blocks for good in a cluster without quorum.
func (m *etcdMember) stop() {
	m.stopOnce.Do(func() {
		_ = m.client.Close()
		if m.mem != nil {
			m.memCluster.stop(m.mem)
			return
		}
		m.server.Server.HardStop()
		m.server.Close()
	})
}
