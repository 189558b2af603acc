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

package talosclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	machineryclient "github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/internal/pki"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// startControlPlane starts a simulated control-plane node named hostname at address, its
// own cluster endpoint (so that it joins no other node's etcd), and a client of it.
func startControlPlane(t *testing.T, address, hostname string) (*sim.Node, talosclient.Client) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	n, err := sim.NewNode(sim.Options{Address: address, StateDir: t.TempDir(), BinDir: envtest.BinDir(), Log: testr.New(t)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Start(ctx, simtest.Render(t, bootstrapv1.GenerateTypeControlPlane, hostname, address))).To(Succeed())
	t.Cleanup(n.Stop)
	c, err := talosclient.NewFactory().New(ctx, simtest.Bundle(), address)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	g.Eventually(func() error { _, err := c.Version(ctx); return err }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	return n, c
}

// etcdClient is a client of the etcd member at address with a certificate from the
// cluster's etcd CA, as kube-apiserver has.
func etcdClient(t *testing.T, address string) *clientv3.Client {
	t.Helper()
	cert, err := pki.Issue(simtest.Bundle().Certs.Etcd, "test", nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][]byte{"ca.crt": simtest.Bundle().Certs.Etcd.Crt, "client.crt": cert.Crt, "client.key": cert.Key}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsInfo := transport.TLSInfo{
		CertFile: filepath.Join(dir, "client.crt"), KeyFile: filepath.Join(dir, "client.key"), TrustedCAFile: filepath.Join(dir, "ca.crt"),
	}
	tlsConfig, err := tlsInfo.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{"https://" + net.JoinHostPort(address, "2379")}, TLS: tlsConfig, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lostClusterSnapshot bootstraps a control-plane node at address, writes 50 keys
// (/talon-test/key-NN: value-NN) to its etcd, takes a snapshot through the client and stops
// the node: the snapshot is what is left of its cluster.
func lostClusterSnapshot(t *testing.T, address string) []byte {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	n, c := startControlPlane(t, address, "cp-a")
	g.Expect(c.Bootstrap(ctx)).To(Succeed())
	etcd := etcdClient(t, address)
	for i := range 50 {
		_, err := etcd.Put(ctx, fmt.Sprintf("/talon-test/key-%02d", i), fmt.Sprintf("value-%02d", i))
		g.Expect(err).NotTo(HaveOccurred())
	}
	r, err := c.EtcdSnapshot(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	snapshot, err := io.ReadAll(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Close()).To(Succeed())
	g.Expect(len(snapshot)%512).To(Equal(sha256.Size), "etcd appends the snapshot's SHA-256")
	n.Stop()
	return snapshot
}

// expectKeys expects the keys lostClusterSnapshot wrote in the etcd at address.
func expectKeys(t *testing.T, g Gomega, address string) {
	t.Helper()
	got, err := etcdClient(t, address).Get(t.Context(), "/talon-test/", clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Kvs).To(HaveLen(50))
	g.Expect(string(got.Kvs[7].Key)).To(Equal("/talon-test/key-07"))
	g.Expect(string(got.Kvs[7].Value)).To(Equal("value-07"))
}

// TestEtcdRecoverFromSnapshot is Talos' etcd disaster recovery through the client: a
// snapshot of node A's etcd (with keys written to it) restores the etcd of a fresh node B
// (talosctl bootstrap --recover-from), whose member list then holds B alone, and B's etcd
// has A's keys. Before that, on the same node B, a truncated snapshot and one whose integrity
// hash does not match are refused with the etcd service's reason and leave B bootstrappable.
func TestEtcdRecoverFromSnapshot(t *testing.T) {
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	g := NewWithT(t)
	ctx := t.Context()

	const addressA, addressB = "127.0.67.2", "127.0.67.3"
	snapshot := lostClusterSnapshot(t, addressA)
	b, clientB := startControlPlane(t, addressB, "cp-b")

	// A truncated upload is taken, but the recovery refuses it: etcd's service fails with
	// the reason, and the node is as it was (no etcd data, the snapshot still there).
	g.Expect(clientB.EtcdRecover(ctx, bytes.NewReader(snapshot[:len(snapshot)/2]))).To(Succeed())
	err = clientB.BootstrapRecover(ctx, false)
	g.Expect(errors.Is(err, talosclient.ErrRecoveryFailed)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("Failed to run pre stage: error verifying snapshot: snapshot file integrity check failed: the file is truncated"))
	g.Expect(err.Error()).To(ContainSubstring(addressB))
	g.Expect(clientB.EtcdMembers(ctx)).Error().To(HaveOccurred(), "no etcd member runs")
	rawB := simtest.Client(t, simtest.Bundle(), addressB)
	g.Expect(readFile(ctx, rawB, "/var/lib/etcd.snapshot")).To(HaveLen(len(snapshot)/2), "Talos keeps the snapshot for another try")

	// A snapshot whose data does not match its integrity hash: refused with etcdutl's words.
	// It is uploaded as talosctl -n uploads it: routed to the node by its apid.
	corrupt := bytes.Clone(snapshot)
	corrupt[len(corrupt)-1] ^= 0xff
	_, err = rawB.EtcdRecover(machineryclient.WithNode(ctx, addressB), bytes.NewReader(corrupt))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(ctx, rawB, "/var/lib/etcd.snapshot")).To(Equal(corrupt))
	err = clientB.BootstrapRecover(ctx, false)
	g.Expect(errors.Is(err, talosclient.ErrRecoveryFailed)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("error recovering from the snapshot: expected sha256"))

	// The good snapshot: B's etcd is A's data, as a cluster of B alone.
	g.Expect(clientB.EtcdRecover(ctx, bytes.NewReader(snapshot))).To(Succeed())
	g.Expect(clientB.BootstrapRecover(ctx, false)).To(Succeed())
	members, err := clientB.EtcdMembers(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(HaveLen(1))
	g.Expect(members[0].Name).To(Equal("cp-b"))
	g.Expect(members[0].Learner).To(BeFalse())
	g.Expect(members[0].PeerURLs).To(Equal([]string{"https://" + addressB + ":2380"}))
	expectKeys(t, g, addressB)
	g.Expect(strings.Join(b.LogTail("machined", 200), "\n")).To(MatchRegexp(
		`recovering etcd from snapshot: hash [0-9a-f]{8}, revision \d+, total keys \d+, total size \d+`))
	g.Expect(b.Bootstraps()).To(Equal(1))

	// The snapshot is consumed, and the node is bootstrapped.
	_, err = readFile(ctx, rawB, "/var/lib/etcd.snapshot")
	g.Expect(status.Code(err)).To(Equal(codes.NotFound), "%v", err)
	g.Expect(errors.Is(clientB.BootstrapRecover(ctx, false), talosclient.ErrAlreadyBootstrapped)).To(BeTrue())
}

// TestEtcdRecoverSkipHashCheck: a snapshot without etcd's integrity hash (what a copy of a
// data directory's db file is) is refused unless the hash check is skipped, and the refusal,
// which etcdutl gives after it began writing the data directory, leaves the node as it was:
// the same snapshot, still there, then restores with recover_skip_hash_check.
func TestEtcdRecoverSkipHashCheck(t *testing.T) {
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	g := NewWithT(t)
	ctx := t.Context()
	const addressA, addressB = "127.0.67.5", "127.0.67.6"
	snapshot := lostClusterSnapshot(t, addressA)
	_, c := startControlPlane(t, addressB, "cp-b")

	g.Expect(c.EtcdRecover(ctx, bytes.NewReader(snapshot[:len(snapshot)-sha256.Size]))).To(Succeed())
	err = c.BootstrapRecover(ctx, false)
	g.Expect(errors.Is(err, talosclient.ErrRecoveryFailed)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("error recovering from the snapshot: snapshot missing hash but --skip-hash-check=false"))

	g.Expect(c.BootstrapRecover(ctx, true)).To(Succeed())
	members, err := c.EtcdMembers(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(ConsistOf(HaveField("Name", "cp-b")))
	expectKeys(t, g, addressB)
}

// TestBootstrapRecoverWithoutSnapshot: Talos answers Bootstrap with recover_etcd even when no
// snapshot was uploaded (machined starts its etcd service in bootstrap mode and answers), and
// the service then fails: "Failed to run pre stage: error verifying snapshot: stat
// /var/lib/etcd.snapshot: no such file or directory". The node stays bootstrappable.
// EtcdRecover is for admins only, as in machined's rules.
func TestBootstrapRecoverWithoutSnapshot(t *testing.T) {
	_, err := envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)
	require.HeavyNodes(t)
	g := NewWithT(t)
	ctx := t.Context()
	const address = "127.0.67.4"
	_, c := startControlPlane(t, address, "cp-c")

	raw := simtest.Client(t, simtest.Bundle(), address)
	g.Expect(raw.Bootstrap(ctx, &machine.BootstrapRequest{RecoverEtcd: true})).To(Succeed(), "Talos answers before its etcd service restores")
	g.Eventually(func(g Gomega) {
		services, err := raw.ServiceInfo(ctx, "etcd")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(services).To(HaveLen(1))
		g.Expect(services[0].Service.GetState()).To(Equal("Failed"))
		events := services[0].Service.GetEvents().GetEvents()
		g.Expect(events[len(events)-1].GetMsg()).To(Equal(
			"Failed to run pre stage: error verifying snapshot: stat /var/lib/etcd.snapshot: no such file or directory"))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	err = c.BootstrapRecover(ctx, false)
	g.Expect(errors.Is(err, talosclient.ErrRecoveryFailed)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("stat /var/lib/etcd.snapshot: no such file or directory"))

	_, err = simtest.Client(t, simtest.Bundle(), address, role.EtcdBackup).EtcdRecover(ctx, bytes.NewReader([]byte("x")))
	g.Expect(status.Code(err)).To(Equal(codes.PermissionDenied), "%v", err)

	g.Expect(c.Bootstrap(ctx)).To(Succeed(), "the node can still be bootstrapped")
}

// readFile reads a file of a node through the Talos API.
func readFile(ctx context.Context, c *machineryclient.Client, path string) ([]byte, error) {
	r, err := c.Read(ctx, path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	return io.ReadAll(r)
}
