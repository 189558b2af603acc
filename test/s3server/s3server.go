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

// Package s3server runs a real S3 server for tests: Versity's S3 gateway (bin/versitygw,
// built by make tools from a pinned module) with its POSIX backend, on a loopback address.
package s3server

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// The root user's credentials of every server this package starts.
const (
	AccessKeyID     = "talon-test"
	SecretAccessKey = "talon-test-secret-key" //nolint:gosec // a test server's root user
)

// Server is a running S3 server.
type Server struct {
	// Endpoint is its http:// URL.
	Endpoint string
	// Dir is the directory its buckets live in (one directory each).
	Dir string
	// Client is a client of it with the root user's credentials.
	Client *minio.Client
	cmd    *exec.Cmd
}

// Start starts a server listening on host (e.g. 127.0.69.200) with bucket created; the test
// kills it at its end. It skips (or fails, when envtest is required) without the binary.
func Start(tb testing.TB, host string, bucket string) *Server {
	tb.Helper()
	bin, err := envtest.Binary("versitygw")
	require.Layer(tb, envtest.Layer, err)
	port, err := freePort(host)
	if err != nil {
		tb.Fatal(err)
	}
	address := net.JoinHostPort(host, strconv.Itoa(port))
	dir := tb.TempDir()
	// Not tied to the test's context: the cleanup kills it, after the test's last use.
	cmd := exec.CommandContext(context.WithoutCancel(tb.Context()), bin, "--access", AccessKeyID, "--secret", SecretAccessKey, "--port", address, "--quiet", "posix", dir)
	log, err := os.CreateTemp(tb.TempDir(), "versitygw-*.log")
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("failed to start versitygw: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if tb.Failed() {
			if out, err := os.ReadFile(log.Name()); err == nil {
				tb.Logf("versitygw's output:\n%s", out)
			}
		}
	})
	s := &Server{Endpoint: "http://" + address, Dir: dir, cmd: cmd}
	s.Client, err = minio.New(address, &minio.Options{Creds: credentials.NewStaticV4(AccessKeyID, SecretAccessKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	for {
		err = s.Client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
		if err == nil {
			return s
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("versitygw at %s did not create bucket %s within 30s: %v", address, bucket, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePort is a TCP port free on host now.
func freePort(host string) (int, error) {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("cannot listen on %s: %w", host, err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
