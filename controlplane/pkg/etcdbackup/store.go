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

package etcdbackup

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"filippo.io/age"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// PartSize is the size of each part of an upload: the most of a snapshot the manager holds
// in memory at once.
const PartSize = 16 << 20

// Location is a bucket and how to reach it.
type Location struct {
	// Endpoint is the store's URL: http:// or https://host[:port].
	Endpoint string
	Bucket   string
	Region   string
	// AccessKeyID, SecretAccessKey and SessionToken are the credentials.
	AccessKeyID, SecretAccessKey, SessionToken string
	// CABundle is PEM the store's certificate must chain to; empty for the system roots.
	CABundle string
	// InsecureSkipTLSVerify accepts any certificate.
	InsecureSkipTLSVerify bool
}

// Store is a bucket.
type Store struct {
	c      *minio.Client
	bucket string
	// endpoint names the store in errors.
	endpoint string
}

// Open connects to loc's bucket (lazily: nothing is sent before the first call).
func Open(loc Location) (*Store, error) {
	u, err := url.Parse(loc.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q is not an http:// or https:// URL of a host", loc.Endpoint)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: loc.InsecureSkipTLSVerify} //nolint:gosec // the user's explicit choice, documented as for tests only
	if loc.CABundle != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(loc.CABundle)) {
			return nil, errors.New("caBundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	region := loc.Region
	if region == "" {
		region = "us-east-1"
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(loc.AccessKeyID, loc.SecretAccessKey, loc.SessionToken),
		Secure:    u.Scheme == "https",
		Region:    region,
		Transport: transport,
		// Path-style works with every S3-compatible store; virtual hosts need DNS for each bucket.
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", loc.Endpoint, err)
	}
	return &Store{c: c, bucket: loc.Bucket, endpoint: loc.Endpoint}, nil
}

// Written is what an upload wrote.
type Written struct {
	// Size is the object's size (encrypted, when it is).
	Size int64
	// SHA256 is the hex SHA-256 of the snapshot as etcd gave it.
	SHA256 string
}

// Key encrypts and decrypts snapshots with age: an X25519 identity (AGE-SECRET-KEY-1...,
// made by age-keygen), or a passphrase. The zero Key leaves snapshots in clear.
type Key struct {
	Identity   string
	Passphrase string
}

// IsZero says the key encrypts nothing.
func (k Key) IsZero() bool { return k.Identity == "" && k.Passphrase == "" }

// scryptWorkFactor is the scrypt cost of a passphrase: 2^15 needs 32 MiB for a moment, where
// age's default (2^18) needs 256 MiB of the manager for each backup and restore. A
// passphrase should be long and random (docs/backup.md); an identity costs nothing.
const scryptWorkFactor = 15

func (k Key) recipient() (age.Recipient, error) {
	if k.Identity != "" {
		identity, err := age.ParseX25519Identity(strings.TrimSpace(k.Identity))
		if err != nil {
			return nil, fmt.Errorf("the key Secret's identity is not an age X25519 identity (AGE-SECRET-KEY-1...): %w", err)
		}
		return identity.Recipient(), nil
	}
	recipient, err := age.NewScryptRecipient(k.Passphrase)
	if err != nil {
		return nil, err
	}
	recipient.SetWorkFactor(scryptWorkFactor)
	return recipient, nil
}

func (k Key) identity() (age.Identity, error) {
	if k.Identity != "" {
		identity, err := age.ParseX25519Identity(strings.TrimSpace(k.Identity))
		if err != nil {
			return nil, fmt.Errorf("the key Secret's identity is not an age X25519 identity (AGE-SECRET-KEY-1...): %w", err)
		}
		return identity, nil
	}
	return age.NewScryptIdentity(k.Passphrase)
}

// Put streams snapshot to key, encrypted with enc unless it is zero. The object appears
// only when the whole snapshot is in the store: a failed upload is aborted.
func (s *Store) Put(ctx context.Context, key string, snapshot io.Reader, enc Key) (Written, error) {
	sum := sha256.New()
	body := io.TeeReader(snapshot, sum)
	if !enc.IsZero() {
		recipient, err := enc.recipient()
		if err != nil {
			return Written{}, err
		}
		body = encrypting(body, recipient)
	}
	info, err := s.c.PutObject(ctx, s.bucket, key, body, -1, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		PartSize:     PartSize,
		NumThreads:   1,
		UserMetadata: map[string]string{"talon-encrypted": fmt.Sprint(!enc.IsZero())},
	})
	if err != nil {
		return Written{}, s.explain(err, key)
	}
	return Written{Size: info.Size, SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
}

// encrypting is r encrypted with age for recipient, produced as it is read.
func encrypting(r io.Reader, recipient age.Recipient) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		w, err := age.Encrypt(pw, recipient)
		if err == nil {
			_, err = io.Copy(w, r)
		}
		if err == nil {
			err = w.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// ErrChecksum is a snapshot whose SHA-256 is not the one recorded when it was written.
var ErrChecksum = errors.New("snapshot checksum mismatch")

// ErrDecrypt is an encrypted object that the key does not open, or whose ciphertext was
// changed or cut short.
var ErrDecrypt = errors.New("the object cannot be decrypted with this key")

// Get streams the snapshot at key, decrypted with enc unless it is zero. Its last Read
// fails with ErrChecksum when the snapshot's SHA-256 is not wantSHA256 (when given): a
// caller must not act on what it read before that Read returned io.EOF.
func (s *Store) Get(ctx context.Context, key string, enc Key, wantSHA256 string) (io.ReadCloser, error) {
	obj, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.explain(err, key)
	}
	// GetObject is lazy: ask for the object's size now, so that a missing object fails here.
	if _, err := obj.Stat(); err != nil {
		_ = obj.Close()
		return nil, s.explain(err, key)
	}
	source := &RecordingReader{R: obj}
	var r io.Reader = source
	if !enc.IsZero() {
		identity, err := enc.identity()
		if err != nil {
			_ = obj.Close()
			return nil, err
		}
		if r, err = age.Decrypt(source, identity); err != nil {
			_ = obj.Close()
			if source.Err != nil {
				return nil, s.explain(source.Err, key)
			}
			return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
		}
	}
	return &verifying{r: r, source: source, closer: obj, sum: sha256.New(), want: wantSHA256}, nil
}

// verifying hashes what it reads and checks the hash at the end.
type verifying struct {
	r      io.Reader
	source *RecordingReader
	closer io.Closer
	sum    hash.Hash
	want   string
	// end is what Read returns once everything was read: io.EOF, or why it failed.
	end error
}

func (v *verifying) Read(p []byte) (int, error) {
	if v.end != nil {
		return 0, v.end
	}
	n, err := v.r.Read(p)
	v.sum.Write(p[:n])
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF):
		v.end = io.EOF
		if got := hex.EncodeToString(v.sum.Sum(nil)); v.want != "" && got != v.want {
			v.end = fmt.Errorf("%w: the object's SHA-256 is %s, the backup recorded %s", ErrChecksum, got, v.want)
		}
	case v.source.Err == nil:
		// Not the store's error: age found the ciphertext changed or cut short.
		v.end = fmt.Errorf("%w: %v", ErrDecrypt, err)
	default:
		v.end = v.source.Err
	}
	// The last bytes come alone, the end with the next Read: some readers (the Talos
	// client's EtcdRecover) drop what comes with io.EOF.
	if n > 0 {
		return n, nil
	}
	return 0, v.end
}

// RecordingReader is R that remembers the error other than io.EOF it failed with, so that
// a caller can tell its failures from those of what reads it.
type RecordingReader struct {
	R   io.Reader
	Err error
}

func (r *RecordingReader) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		r.Err = err
	}
	return n, err
}

func (v *verifying) Close() error { return v.closer.Close() }

// List lists the keys under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for obj := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, s.explain(obj.Err, prefix)
		}
		keys = append(keys, obj.Key)
	}
	return keys, nil
}

// Delete removes key; a key already gone is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return s.explain(err, key)
	}
	return nil
}

// Error is a store's refusal or a failure to reach it, with what an operator can do.
type Error struct {
	// Reason is a condition reason: StoreUnreachable, CredentialsRejected, BucketNotFound,
	// ObjectNotFound or StoreError.
	Reason string
	// Permanent is true when retrying cannot help until someone changes something.
	Permanent bool
	Err       error
	Message   string
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// explain turns a store's error into an *Error.
func (s *Store) explain(err error, key string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken":
		return &Error{Reason: "CredentialsRejected", Permanent: true, Err: err, Message: fmt.Sprintf(
			"%s refused the credentials (%s: %s): check the credentials Secret's accessKeyID and secretAccessKey, and that they may write to bucket %q",
			s.endpoint, resp.Code, resp.Message, s.bucket)}
	case "NoSuchBucket":
		return &Error{Reason: "BucketNotFound", Permanent: true, Err: err, Message: fmt.Sprintf(
			"bucket %q does not exist at %s: create it (Talon never creates buckets) or fix storage.s3.bucket", s.bucket, s.endpoint)}
	case "NoSuchKey":
		return &Error{Reason: "ObjectNotFound", Permanent: true, Err: err, Message: fmt.Sprintf(
			"object %q is not in bucket %q at %s", key, s.bucket, s.endpoint)}
	}
	var netErr net.Error
	var urlErr *url.Error
	if errors.As(err, &netErr) || errors.As(err, &urlErr) {
		return &Error{Reason: "StoreUnreachable", Err: err, Message: fmt.Sprintf(
			"cannot reach %s: %v; check storage.s3.endpoint and that the manager's network reaches it", s.endpoint, err)}
	}
	return &Error{Reason: "StoreError", Err: err, Message: fmt.Sprintf("%s answered for %q: %v", s.endpoint, key, err)}
}
