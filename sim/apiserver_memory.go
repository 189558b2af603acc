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
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	inmemoryapi "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server/api"
)

// memAPI is the Kubernetes API of a light cluster: its resource group of Cluster API's
// in-memory API server, which lives as long as the cluster's etcd.
type memAPI struct {
	light *Light
	group string
}

// apiLocked is the cluster's Kubernetes API, made on first use. Callers hold c.mu.
func (c *memEtcd) apiLocked() *memAPI {
	if c.api == nil && !c.forgotten {
		group := fmt.Sprintf("etcd-%x", c.id)
		c.light.manager.AddResourceGroup(group)
		c.api = &memAPI{light: c.light, group: group}
	}
	return c.api
}

// newMemoryAPIHandler is the in-memory API server's handler every light cluster shares: a
// request names its cluster's resource group as its Host (serve sets it), as the in-memory
// server's own listeners name it by port.
func newMemoryAPIHandler(l *Light) http.Handler {
	return inmemoryapi.NewAPIServerHandler(l.manager, l.log, func(host string) (string, error) { return host, nil })
}

// serve serves a request of the cluster's API.
func (a *memAPI) serve(w http.ResponseWriter, r *http.Request) {
	r.Host = a.group
	a.light.apiHandler.ServeHTTP(w, r)
}

// drop deletes the cluster's objects.
func (a *memAPI) drop() { a.light.manager.DeleteResourceGroup(a.group) }

// startMemoryAPIServer serves the Kubernetes API of the node's etcd cluster on the node's
// address, with a serving certificate issued as kube-apiserver's, while the node runs its
// member. Requests fail as kube-apiserver's do while etcd has no leader. It also answers
// what the in-memory API server does not: /readyz, /livez, /healthz and /version (the
// configured kube-apiserver image's version), and writes of the status subresource (the
// in-memory server keeps no separate status: they write the object).
func (n *Node) startMemoryAPIServer(ctx context.Context, cfg talosconfig.Provider) (*component, error) {
	n.mu.Lock()
	member := n.etcd
	n.mu.Unlock()
	if member == nil || member.mem == nil {
		return nil, errors.New("kube-apiserver needs the node's etcd member")
	}
	cluster := member.memCluster
	cluster.mu.Lock()
	api := cluster.apiLocked()
	cluster.mu.Unlock()
	if api == nil {
		return nil, errors.New("kube-apiserver: the cluster's etcd data is gone")
	}

	pem, err := n.apiServerCertificate(cfg)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(pem.Crt, pem.Key)
	if err != nil {
		return nil, err
	}
	gitVersion := imageTag(cfg.K8sAPIServerConfig().Image())
	// Like kube-apiserver against its local etcd: it serves while the node's own member runs,
	// is still a member, and its cluster has a leader.
	id := member.mem.id
	healthy := func() error {
		if !cluster.serves(id) {
			return errors.New("etcdserver: no leader, or this node's member is not serving")
		}
		return nil
	}
	mux := http.NewServeMux()
	check := func(w http.ResponseWriter, _ *http.Request) {
		if err := healthy(); err != nil {
			http.Error(w, "[-]etcd failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
	for _, path := range []string{"/readyz", "/livez", "/healthz"} {
		mux.HandleFunc("GET "+path, check)
	}
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(kubeVersionInfo(gitVersion))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if err := healthy(); err != nil {
			status := apierrors.NewServiceUnavailable(err.Error()).Status()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(status.Code))
			_ = json.NewEncoder(w).Encode(status)
			return
		}
		if (r.Method == http.MethodPut || r.Method == http.MethodPatch) && strings.HasSuffix(r.URL.Path, "/status") {
			r.URL.Path = strings.TrimSuffix(r.URL.Path, "/status")
		}
		fixed := &statusWriter{ResponseWriter: w}
		api.serve(fixed, r)
		fixed.finish()
	})

	address := net.JoinHostPort(n.ip.String(), strconv.Itoa(APIServerPort))
	listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", address, err)
	}
	server := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
		// Handshakes the load balancer's probes cut short are not worth a line each.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	c := inProcessComponent("kube-apiserver", func() { _ = server.Close() })
	go func() {
		defer close(c.done)
		_ = server.ServeTLS(listener, "", "")
	}()
	return c, nil
}

// Serves tells whether the node answers on port now, as a load balancer's health check
// would find without a connection (the in-process load balancers of light nodes ask so):
// its Talos API and trustd while it runs unpartitioned, its kube-apiserver while that is
// ready (for a light node: its etcd member runs, is a member, and has a leader).
func (n *Node) Serves(port int) bool {
	if !n.listening.Load() {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.partitioned {
		return false
	}
	switch port {
	case APIPort, TrustdPort:
		return true
	case APIServerPort:
		if !n.apiServer.running() || n.etcd == nil {
			return false
		}
		return n.etcd.mem == nil || n.etcd.memCluster.serves(n.etcd.mem.id)
	default:
		return false
	}
}

// startMemoryControllerManager stands for kube-controller-manager on a light node: there is
// nothing for it to do (no CSRs to sign, no Pods to schedule), but its static pod runs.
func startMemoryControllerManager() *component {
	c := inProcessComponent("kube-controller-manager", nil)
	c.shutdown = func() { close(c.done) }
	return c
}

// kubeVersionInfo is what kube-apiserver's /version answers for gitVersion (v1.36.3).
func kubeVersionInfo(gitVersion string) version.Info {
	major, rest, _ := strings.Cut(strings.TrimPrefix(gitVersion, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	return version.Info{
		Major: major, Minor: minor, GitVersion: gitVersion, GoVersion: runtime.Version(),
		Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// statusWriter passes a response through, except an error's: the in-memory API server
// writes a Go error value ({"ErrStatus": {...}}) where kube-apiserver writes the
// metav1.Status, which clients read the reason from (AlreadyExists and Conflict share a
// code). finish writes the Status.
type statusWriter struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
	// passed: a response has begun going out (a watch's 200); what follows passes too.
	passed bool
}

func (w *statusWriter) WriteHeader(code int) {
	if code >= http.StatusBadRequest && !w.passed {
		w.code = code
		return
	}
	w.passed = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code != 0 {
		return w.body.Write(b)
	}
	w.passed = true
	return w.ResponseWriter.Write(b)
}

// Flush passes watch events on as they are written.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.code == 0 {
		f.Flush()
	}
}

func (w *statusWriter) finish() {
	if w.code == 0 {
		return
	}
	body := w.body.Bytes()
	var wrapped struct {
		ErrStatus *metav1.Status `json:"ErrStatus"`
	}
	if json.Unmarshal(body, &wrapped) == nil && wrapped.ErrStatus != nil {
		wrapped.ErrStatus.APIVersion, wrapped.ErrStatus.Kind = "v1", "Status"
		if fixed, err := json.Marshal(wrapped.ErrStatus); err == nil {
			body = fixed
			w.Header().Set("Content-Type", "application/json")
		}
	}
	w.ResponseWriter.WriteHeader(w.code)
	_, _ = w.ResponseWriter.Write(body)
}
