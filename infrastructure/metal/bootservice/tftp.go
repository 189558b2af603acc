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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/pin/tftp/v3"
)

// The iPXE binaries the DHCP responder names, as Debian's ipxe package ships them in
// /usr/lib/ipxe (the arm64 binary comes from the arm64 build of iPXE, renamed).
const (
	// BootFileBIOS chain-loads iPXE through the PXE ROM's UNDI driver on BIOS.
	BootFileBIOS = "undionly.kpxe"
	// BootFileUEFIAMD64 is iPXE with its own drivers for x86-64 UEFI.
	BootFileUEFIAMD64 = "ipxe.efi"
	// BootFileUEFIAMD64SNP is iPXE on the firmware's network driver (SNP), for NICs iPXE lacks
	// a driver for.
	BootFileUEFIAMD64SNP = "snponly.efi"
	// BootFileUEFIARM64 is iPXE for arm64 UEFI.
	BootFileUEFIARM64 = "ipxe-arm64.efi"
)

// DefaultTFTPDir is where Debian's ipxe package installs the iPXE binaries.
const DefaultTFTPDir = "/usr/lib/ipxe"

// errTFTPNotFound is the error a TFTP client sees for any name the server does not serve.
var errTFTPNotFound = errors.New("file not found")

// TFTPOptions configure the TFTP server.
type TFTPOptions struct {
	// Dir holds the iPXE binaries; only regular files directly in it are served. Required.
	Dir string
	// Timeout is how long a transfer waits for the client; 5 s when zero.
	Timeout time.Duration
	// Retries is how often a packet is sent again before a transfer is given up; 5 when zero.
	Retries int
	// Log receives a line for each request; discarded when unset.
	Log logr.Logger
}

// TFTPServer serves iPXE binaries read-only over TFTP. Write requests are refused.
type TFTPServer struct {
	dir    string
	log    logr.Logger
	server *tftp.Server
}

// NewTFTPServer returns a TFTP server for the files in opts.Dir.
func NewTFTPServer(opts TFTPOptions) (*TFTPServer, error) {
	info, err := os.Stat(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("failed to read TFTP directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("TFTP directory %s is not a directory", opts.Dir)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	s := &TFTPServer{dir: opts.Dir, log: opts.Log}
	if s.log.GetSink() == nil {
		s.log = logr.Discard()
	}
	// A nil write handler makes the library answer every write request with an error.
	s.server = tftp.NewServer(s.read, nil)
	s.server.SetTimeout(opts.Timeout)
	if opts.Retries > 0 {
		s.server.SetRetries(opts.Retries)
	}
	return s, nil
}

// Serve answers requests on conn until Shutdown. Each transfer uses a port of its own, as
// TFTP does.
func (s *TFTPServer) Serve(conn net.PacketConn) error {
	return s.server.Serve(conn)
}

// Shutdown stops serving and waits for running transfers.
func (s *TFTPServer) Shutdown() {
	s.server.Shutdown()
}

func (s *TFTPServer) read(filename string, rf io.ReaderFrom) (err error) {
	defer func() {
		switch {
		case err == nil:
			countRequest("tftp", "file", "sent")
		case errors.Is(err, errTFTPNotFound):
			countRequest("tftp", "file", "not_found")
		default:
			countRequest("tftp", "file", "failed")
		}
	}()
	log := s.log.WithValues("file", filename)
	if t, ok := rf.(tftp.OutgoingTransfer); ok {
		addr := t.RemoteAddr()
		log = log.WithValues("client", addr.String())
	}
	name, ok := tftpFileName(filename)
	if !ok {
		log.V(2).Info("Refusing TFTP request for a name outside the directory")
		return errTFTPNotFound
	}
	// OpenInRoot also refuses symlinks that lead out of the directory.
	f, err := os.OpenInRoot(s.dir, name)
	if err != nil {
		log.V(2).Info("Refusing TFTP request for a missing file")
		return errTFTPNotFound
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return errTFTPNotFound
	}
	if t, ok := rf.(tftp.OutgoingTransfer); ok {
		t.SetSize(info.Size())
	}
	n, err := rf.ReadFrom(f)
	if err != nil {
		return fmt.Errorf("failed to send %s: %w", name, err)
	}
	log.V(4).Info("Sent file over TFTP", "bytes", n)
	return nil
}

// tftpFileName maps a requested name to a file directly in the served directory. Clients
// write names with or without a leading slash; anything with another path element, a
// backslash or a NUL is refused.
func tftpFileName(requested string) (string, bool) {
	name := strings.TrimPrefix(requested, "/")
	if name == "" || strings.ContainsAny(name, "/\\\x00") || !fs.ValidPath(name) || name == "." || name == ".." {
		return "", false
	}
	return name, true
}
