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

package bootservice

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/pin/tftp/v3"
)

// startTFTP serves a temporary directory with fake iPXE binaries on 127.0.0.1 and returns
// the server's address. timeout and retries bound how long abandoned transfers keep the server busy.
func startTFTP(tb testing.TB, timeout time.Duration, retries int) string {
	tb.Helper()
	root := tb.TempDir()
	dir := filepath.Join(root, "ipxe")
	if err := os.Mkdir(dir, 0o750); err != nil {
		tb.Fatal(err)
	}
	for name, size := range map[string]int{BootFileUEFIAMD64: 3000, BootFileBIOS: 512, BootFileUEFIAMD64SNP: 10} {
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte(name[:1]), size), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("outside"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "secret"), filepath.Join(dir, "escape.efi")); err != nil {
		tb.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o750); err != nil {
		tb.Fatal(err)
	}

	server, err := NewTFTPServer(TFTPOptions{Dir: dir, Timeout: timeout, Retries: retries})
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- server.Serve(conn) }()
	tb.Cleanup(func() {
		server.Shutdown()
		if err := <-done; err != nil {
			tb.Errorf("TFTP server: %v", err)
		}
	})
	return conn.LocalAddr().String()
}

func tftpClient(tb testing.TB, addr string) *tftp.Client {
	tb.Helper()
	c, err := tftp.NewClient(addr)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetTimeout(time.Second)
	c.SetRetries(1)
	c.RequestTSize(true)
	return c
}

func TestTFTPServesFiles(t *testing.T) {
	addr := startTFTP(t, time.Second, 0)
	for _, tc := range []struct {
		name     string
		wantSize int
	}{
		{name: "ipxe.efi", wantSize: 3000},
		{name: "/ipxe.efi", wantSize: 3000},
		{name: "undionly.kpxe", wantSize: 512},
		{name: "snponly.efi", wantSize: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			wt, err := tftpClient(t, addr).Receive(tc.name, "octet")
			g.Expect(err).NotTo(HaveOccurred())
			size, ok := wt.(tftp.IncomingTransfer).Size()
			g.Expect(ok).To(BeTrue(), "the server announces tsize")
			g.Expect(size).To(BeEquivalentTo(tc.wantSize))
			var buf bytes.Buffer
			n, err := wt.WriteTo(&buf)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n).To(BeEquivalentTo(tc.wantSize))
		})
	}
}

func TestTFTPRefusesPathsOutsideTheDirectory(t *testing.T) {
	addr := startTFTP(t, time.Second, 0)
	for _, name := range []string{
		"../secret", "/../secret", "..", ".", "", "sub", "sub/../ipxe.efi", "./ipxe.efi",
		"escape.efi", `..\secret`, "missing.efi", "/etc/passwd", "//etc/passwd",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			wt, err := tftpClient(t, addr).Receive(name, "octet")
			if err == nil {
				// The library may only report the error when the data is read.
				var buf bytes.Buffer
				_, err = wt.WriteTo(&buf)
				g.Expect(buf.String()).NotTo(ContainSubstring("outside"))
			}
			g.Expect(err).To(MatchError(ContainSubstring("file not found")))
		})
	}
}

func TestTFTPRefusesWrites(t *testing.T) {
	g := NewWithT(t)
	addr := startTFTP(t, time.Second, 0)
	rf, err := tftpClient(t, addr).Send("ipxe.efi", "octet")
	if err == nil {
		_, err = rf.ReadFrom(bytes.NewReader([]byte("overwritten")))
	}
	g.Expect(err).To(MatchError(ContainSubstring("does not support write")))

	// The file is unchanged.
	wt, err := tftpClient(t, addr).Receive("ipxe.efi", "octet")
	g.Expect(err).NotTo(HaveOccurred())
	var buf bytes.Buffer
	_, err = wt.WriteTo(&buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(buf.Len()).To(Equal(3000))
}

func TestTFTPFileName(t *testing.T) {
	g := NewWithT(t)
	for requested, want := range map[string]string{"ipxe.efi": "ipxe.efi", "/undionly.kpxe": "undionly.kpxe"} {
		got, ok := tftpFileName(requested)
		g.Expect(ok).To(BeTrue(), requested)
		g.Expect(got).To(Equal(want))
	}
	for _, bad := range []string{"", "/", "..", "/..", "a/b", "a\\b", "a\x00b", "//x"} {
		_, ok := tftpFileName(bad)
		g.Expect(ok).To(BeFalse(), bad)
	}
}

func TestNewTFTPServerNeedsADirectory(t *testing.T) {
	g := NewWithT(t)
	_, err := NewTFTPServer(TFTPOptions{Dir: filepath.Join(t.TempDir(), "missing")})
	g.Expect(err).To(MatchError(ContainSubstring("failed to read TFTP directory")))
	file := filepath.Join(t.TempDir(), "file")
	g.Expect(os.WriteFile(file, nil, 0o600)).To(Succeed())
	_, err = NewTFTPServer(TFTPOptions{Dir: file})
	g.Expect(err).To(MatchError(ContainSubstring("is not a directory")))
}
