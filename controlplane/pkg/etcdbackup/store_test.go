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
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"filippo.io/age"
	"github.com/minio/minio-go/v7"
	. "github.com/onsi/gomega"

	"github.com/talon-capi/talon/controlplane/pkg/etcdbackup"
	"github.com/talon-capi/talon/test/s3server"
)

// The tests' S3 servers listen on 127.0.73.x.
const host = "127.0.73.1"

func open(tb testing.TB, srv *s3server.Server, bucket, secret string) *etcdbackup.Store {
	tb.Helper()
	s, err := etcdbackup.Open(etcdbackup.Location{Endpoint: srv.Endpoint, Bucket: bucket, AccessKeyID: s3server.AccessKeyID, SecretAccessKey: secret})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// snapshot is random data larger than two parts, so that the upload is a real multipart one.
func snapshot(tb testing.TB) []byte {
	tb.Helper()
	data := make([]byte, 2*etcdbackup.PartSize+12345)
	_, _ = rand.Read(data)
	return data
}

// TestPutAndGetRoundTrip writes a three-part snapshot in clear, encrypted for an age
// identity and with a passphrase, and reads each back whole; an encrypted object in the
// bucket is not the snapshot, and no other key opens it.
func TestPutAndGetRoundTrip(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := s3server.Start(t, host, "backups")
	store := open(t, srv, "backups", s3server.SecretAccessKey)
	data := snapshot(t)
	sum := sha256.Sum256(data)
	identity, err := age.GenerateX25519Identity()
	g.Expect(err).NotTo(HaveOccurred())
	other, err := age.GenerateX25519Identity()
	g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		key, wrong etcdbackup.Key
		object     string
	}{
		{object: "c/plain.db"},
		{object: "c/identity.db.age", key: etcdbackup.Key{Identity: identity.String()}, wrong: etcdbackup.Key{Identity: other.String()}},
		{object: "c/passphrase.db.age", key: etcdbackup.Key{Passphrase: "correct horse battery staple"}, wrong: etcdbackup.Key{Passphrase: "wrong"}},
	} {
		written, err := store.Put(ctx, tc.object, bytes.NewReader(data), tc.key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(written.SHA256).To(Equal(hex.EncodeToString(sum[:])))

		stored, err := os.ReadFile(filepath.Join(srv.Dir, "backups", tc.object))
		g.Expect(err).NotTo(HaveOccurred(), "the object is a file of the POSIX backend")
		g.Expect(int64(len(stored))).To(Equal(written.Size))
		if tc.key.IsZero() {
			g.Expect(bytes.Equal(stored, data)).To(BeTrue(), "the object is the snapshot")
			continue
		}
		g.Expect(bytes.Contains(stored, data[:4096])).To(BeFalse(), "the encrypted object does not hold the snapshot in clear")
		g.Expect(string(stored[:21])).To(Equal("age-encryption.org/v1"))

		r, err := store.Get(ctx, tc.object, tc.key, written.SHA256)
		g.Expect(err).NotTo(HaveOccurred())
		read, err := io.ReadAll(r)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Close()).To(Succeed())
		g.Expect(bytes.Equal(read, data)).To(BeTrue(), "%s reads back as written", tc.object)

		_, err = store.Get(ctx, tc.object, tc.wrong, "")
		g.Expect(errors.Is(err, etcdbackup.ErrDecrypt)).To(BeTrue(), "%s: a wrong key is refused: %v", tc.object, err)
	}
	// The Talos client's EtcdRecover sends what each Read returns, but drops the bytes that
	// come with io.EOF: the last ones must come alone.
	r, err := store.Get(ctx, "c/plain.db", etcdbackup.Key{}, hex.EncodeToString(sum[:]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readLikeTalos(r)).To(Equal(data), "the clear object reads back whole, as the Talos client reads it")

	// Someone changed a byte of the encrypted object in the bucket.
	stored, err := os.ReadFile(filepath.Join(srv.Dir, "backups", "c", "identity.db.age"))
	g.Expect(err).NotTo(HaveOccurred())
	stored[len(stored)/2] ^= 0xff
	_, err = srv.Client.PutObject(ctx, "backups", "c/identity.db.age", bytes.NewReader(stored), int64(len(stored)), minio.PutObjectOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	r, err = store.Get(ctx, "c/identity.db.age", etcdbackup.Key{Identity: identity.String()}, hex.EncodeToString(sum[:]))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.ReadAll(r)
	g.Expect(errors.Is(err, etcdbackup.ErrDecrypt)).To(BeTrue(), "a changed ciphertext fails authentication: %v", err)
}

// readLikeTalos reads r as the Talos client's EtcdRecover does: in 4 KiB reads, stopping at
// io.EOF without looking at what came with it.
func readLikeTalos(r io.Reader) []byte {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if errors.Is(err, io.EOF) || (err != nil) {
			return out
		}
		out = append(out, buf[:n]...)
	}
}

// TestGetRefusesWhatWasNotWritten: an object cut short, or changed, fails its last read
// with ErrChecksum; a missing one is ObjectNotFound.
func TestGetRefusesWhatWasNotWritten(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := s3server.Start(t, host, "backups")
	store := open(t, srv, "backups", s3server.SecretAccessKey)
	data := snapshot(t)
	written, err := store.Put(ctx, "c/snap.db", bytes.NewReader(data), etcdbackup.Key{})
	g.Expect(err).NotTo(HaveOccurred())

	// Someone (or a broken copy) truncated the object in the bucket.
	_, err = srv.Client.PutObject(ctx, "backups", "c/snap.db", bytes.NewReader(data[:len(data)/2]), int64(len(data)/2), minio.PutObjectOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	r, err := store.Get(ctx, "c/snap.db", etcdbackup.Key{}, written.SHA256)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.ReadAll(r)
	g.Expect(errors.Is(err, etcdbackup.ErrChecksum)).To(BeTrue(), "a truncated object fails its checksum: %v", err)

	_, err = store.Get(ctx, "c/missing.db", etcdbackup.Key{}, "")
	var storeErr *etcdbackup.Error
	g.Expect(errors.As(err, &storeErr)).To(BeTrue(), "%v", err)
	g.Expect(storeErr.Reason).To(Equal("ObjectNotFound"))
}

// TestStoreErrorsSayWhatToFix: wrong credentials, a missing bucket and an endpoint nobody
// listens on each fail with a reason and a message naming what to change, and an upload
// that fails leaves no object behind.
func TestStoreErrorsSayWhatToFix(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := s3server.Start(t, host, "backups")

	cases := []struct { //nolint:prealloc // two cases here, a third after Open
		name, reason, message string
		store                 *etcdbackup.Store
	}{
		{"wrong credentials", "CredentialsRejected", "refused the credentials", open(t, srv, "backups", "not-the-secret")},
		{"missing bucket", "BucketNotFound", `bucket "nope" does not exist`, open(t, srv, "nope", s3server.SecretAccessKey)},
	}
	unreachable, err := etcdbackup.Open(etcdbackup.Location{Endpoint: "http://127.0.73.9:1", Bucket: "backups", AccessKeyID: "a", SecretAccessKey: "b"})
	g.Expect(err).NotTo(HaveOccurred())
	cases = append(cases, struct {
		name, reason, message string
		store                 *etcdbackup.Store
	}{"unreachable endpoint", "StoreUnreachable", "cannot reach http://127.0.73.9:1", unreachable})

	for _, tc := range cases {
		_, err := tc.store.Put(ctx, "c/snap.db", bytes.NewReader(snapshot(t)), etcdbackup.Key{})
		var storeErr *etcdbackup.Error
		g.Expect(errors.As(err, &storeErr)).To(BeTrue(), "%s: %v", tc.name, err)
		g.Expect(storeErr.Reason).To(Equal(tc.reason), tc.name)
		g.Expect(storeErr.Message).To(ContainSubstring(tc.message), tc.name)
		g.Expect(storeErr.Permanent).To(Equal(tc.reason != "StoreUnreachable"), tc.name)
	}
	// A node that stops streaming half-way through the second part.
	data := snapshot(t)
	broken := io.MultiReader(bytes.NewReader(data[:etcdbackup.PartSize*3/2]), iotest.ErrReader(errors.New("stream reset by the node")))
	_, err = open(t, srv, "backups", s3server.SecretAccessKey).Put(ctx, "c/snap.db", broken, etcdbackup.Key{})
	g.Expect(err).To(MatchError(ContainSubstring("stream reset by the node")))

	keys, err := open(t, srv, "backups", s3server.SecretAccessKey).List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(BeEmpty(), "no failed upload left an object")
}
