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

// Package factorytest is a local Image Factory for tests: the real one
// (https://factory.talos.dev) is out of reach here. It serves the part of the factory's
// documented HTTP API that Talon uses, with the factory's behaviour:
//
//   - GET /version/<version>/extensions/official: a JSON list of {name, ref, digest, author,
//     description}; 404 for a Talos version it does not build;
//   - POST /schematics: a YAML schematic; unknown fields are refused with 400, as the
//     factory's strict decoder does; extension names are not checked (the factory accepts
//     any and fails only when it builds an image); the answer is 201 with {"id": ...}, the
//     SHA-256 of the schematic's canonical encoding, so that one schematic has one ID;
//   - GET /schematics/<id>: the stored schematic, 404 for an unknown ID;
//   - GET /image/<id>/<version>/kernel-<arch> and initramfs-<arch>.xz: boot assets (bytes
//     derived from the schematic, version and name, so that each is distinct) for known
//     schematics and versions, 404 otherwise.
//
// Installer images are served by the factory's registry frontend, which this server does not
// reproduce: tests check the installer reference, not a pull.
package factorytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/talon-capi/talon/internal/imagefactory"
)

// Server is a running local factory.
type Server struct {
	// URL is the server's address.
	URL string

	extensions map[string][]string
	mu         sync.Mutex
	schematics map[string][]byte
	created    atomic.Int32
	down       atomic.Bool
	server     *httptest.Server
}

// SetDown makes the server drop every connection without an answer, as an unreachable
// factory would, until it is set up again.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// DefaultExtensions are the official extensions the server offers for every version it
// builds: a few of the real factory's names.
var DefaultExtensions = []string{"siderolabs/iscsi-tools", "siderolabs/util-linux-tools", "siderolabs/qemu-guest-agent", "siderolabs/intel-ucode"}

// Start starts a factory on the loopback address that builds the given Talos versions,
// each offering DefaultExtensions; it stops when the test ends.
func Start(tb testing.TB, versions ...string) *Server {
	tb.Helper()
	return StartOn(tb, "127.0.0.1", versions...)
}

// StartOn is Start on a port of address, for managers that do not share the test's
// loopback address (Pods).
func StartOn(tb testing.TB, address string, versions ...string) *Server {
	tb.Helper()
	s := &Server{extensions: map[string][]string{}, schematics: map[string][]byte{}}
	for _, v := range versions {
		s.extensions[v] = DefaultExtensions
	}
	listener, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", net.JoinHostPort(address, "0"))
	if err != nil {
		tb.Fatalf("failed to listen on %s: %v", address, err)
	}
	s.server = &httptest.Server{Listener: listener, Config: &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}}
	s.server.Start()
	s.URL = s.server.URL
	tb.Cleanup(s.server.Close)
	return s
}

// SchematicsCreated is how many POST /schematics the server answered with a new ID.
func (s *Server) SchematicsCreated() int { return int(s.created.Load()) }

// Schematic is the stored schematic of id, or nil.
func (s *Server) Schematic(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.schematics[id]
}

// Asset is the content the server serves for a boot asset.
func Asset(schematicID, version, name string) []byte {
	return []byte(fmt.Sprintf("talos %s %s of schematic %s\n", name, version, schematicID))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		if hijacker, ok := w.(http.Hijacker); ok {
			if conn, _, err := hijacker.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && len(parts) == 4 && parts[0] == "version" && parts[2] == "extensions" && parts[3] == "official":
		names, ok := s.extensions[parts[1]]
		if !ok {
			http.Error(w, "version not found", http.StatusNotFound)
			return
		}
		type extension struct {
			Name        string `json:"name"`
			Ref         string `json:"ref"`
			Digest      string `json:"digest"`
			Author      string `json:"author"`
			Description string `json:"description"`
		}
		list := make([]extension, 0, len(names))
		for _, name := range names {
			sum := sha256.Sum256([]byte(name + parts[1]))
			list = append(list, extension{Name: name, Ref: "ghcr.io/" + name + ":" + parts[1], Digest: "sha256:" + hex.EncodeToString(sum[:]), Author: "Sidero Labs"})
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(list); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	case r.Method == http.MethodPost && len(parts) == 1 && parts[0] == "schematics":
		s.createSchematic(w, r)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "schematics":
		if data := s.Schematic(parts[1]); data != nil {
			_, _ = w.Write(data)
			return
		}
		http.Error(w, "schematic not found", http.StatusNotFound)
	case r.Method == http.MethodGet && len(parts) == 4 && parts[0] == "image":
		id, version, name := parts[1], parts[2], parts[3]
		_, known := s.extensions[version]
		if s.Schematic(id) == nil || !known || (!strings.HasPrefix(name, "kernel-") && !strings.HasPrefix(name, "initramfs-")) {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		_, _ = w.Write(Asset(id, version, name))
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

func (s *Server) createSchematic(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var schematic imagefactory.Schematic
	decoder := yaml.NewDecoder(bytes.NewReader(body))
	decoder.KnownFields(true)
	if err := decoder.Decode(&schematic); err != nil && err != io.EOF {
		http.Error(w, "invalid schematic: "+err.Error(), http.StatusBadRequest)
		return
	}
	canonical, err := schematic.Marshal()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(canonical)
	id := hex.EncodeToString(sum[:])
	s.mu.Lock()
	if _, ok := s.schematics[id]; !ok {
		s.schematics[id] = canonical
		s.created.Add(1)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	if err := json.NewEncoder(w).Encode(map[string]string{"id": id}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
