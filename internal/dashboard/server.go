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

package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure a dashboard Server.
type Options struct {
	// Config is the caller's: every read and action uses its credentials.
	Config *rest.Config
	// Scheme knows Cluster API's and Talon's types.
	Scheme *runtime.Scheme
	// Namespace limits the dashboard to one namespace; empty shows all.
	Namespace string
	// ReadOnly hides every action and refuses them with 403.
	ReadOnly bool
	// AllowedHosts are the Host headers the server answers besides loopback names and
	// addresses (the name an ingress serves it under). Others get 421, which keeps a web
	// page elsewhere from reaching it through DNS rebinding.
	AllowedHosts []string
	// Debounce is the shortest time between two change notices to a browser tab
	// (default 250ms), so that a burst of updates costs one page refresh.
	Debounce time.Duration
	Log      logr.Logger
}

// Server serves the dashboard.
type Server struct {
	opts    Options
	client  client.Client
	watcher *watcher
	pages   *template.Template
	// token is sent with every action (X-Talon-Token), so that a form on another site
	// cannot act with the caller's credentials.
	token  string
	access *accessCache
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New starts watching with the caller's credentials and returns the Server once the
// caches hold the management cluster's objects.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Debounce == 0 {
		opts.Debounce = 250 * time.Millisecond
	}
	opts.Log = opts.Log.WithName("dashboard")
	c, err := client.New(opts.Config, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create a client for the management cluster: %w", err)
	}
	cacheOpts := ctrlcache.Options{Scheme: opts.Scheme, DefaultTransform: stripManagedFields}
	if opts.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]ctrlcache.Config{opts.Namespace: {}}
	}
	cc, err := ctrlcache.New(opts.Config, cacheOpts)
	if err != nil {
		return nil, fmt.Errorf("failed to create the caches: %w", err)
	}
	w, err := newWatcher(ctx, c, cc, opts.Namespace)
	if err != nil {
		return nil, err
	}
	go func() {
		if err := cc.Start(ctx); err != nil {
			opts.Log.Error(err, "Caches stopped")
		}
	}()
	if !cc.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the caches did not fill: %w", context.Cause(ctx))
	}
	pages, err := template.New("").Funcs(template.FuncMap{"lower": strings.ToLower}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	return &Server{opts: opts, client: c, watcher: w, pages: pages, token: hex.EncodeToString(token),
		access: newAccessCache(c, opts.ReadOnly)}, nil
}

// Handler is the dashboard's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.fleetPage)
	mux.HandleFunc("GET /clusters/{namespace}/{name}", s.clusterPage)
	mux.HandleFunc("GET /updates", s.updates)
	mux.HandleFunc("GET /clusters/{namespace}/{name}/kubeconfig", s.download(kubeconfigDownload))
	mux.HandleFunc("GET /clusters/{namespace}/{name}/talosconfig", s.download(talosconfigDownload))
	mux.HandleFunc("POST /clusters/{namespace}/{name}/controlplane/replicas", s.action(s.scaleControlPlane))
	mux.HandleFunc("POST /clusters/{namespace}/{name}/deployments/{deployment}/replicas", s.action(s.scaleDeployment))
	mux.HandleFunc("POST /clusters/{namespace}/{name}/version", s.action(s.changeVersion))
	mux.HandleFunc("POST /clusters/{namespace}/{name}/backups", s.action(s.backup))
	return s.guard(mux)
}

// guard answers only the hosts the dashboard is served under and sets the headers every
// response carries.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			http.Error(w, fmt.Sprintf("talon dashboard does not answer for host %q; add it with --allowed-host", r.Host), http.StatusMisdirectedRequest)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil && ip.IsLoopback() {
		return true
	}
	return slices.Contains(s.opts.AllowedHosts, host) || slices.Contains(s.opts.AllowedHosts, hostport)
}

// page is what every template gets.
type page struct {
	Title      string
	Token      string
	ReadOnly   bool
	Unreadable []string
	Namespace  string
	Fleet      *fleet
	Cluster    *clusterView
	Can        permissions
}

func (s *Server) fleetPage(w http.ResponseWriter, r *http.Request) {
	snap, err := s.watcher.snapshot(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	f := snap.fleet(time.Now())
	s.render(w, r, http.StatusOK, "fleet", page{Title: "Clusters", Fleet: &f})
}

func (s *Server) clusterPage(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	snap, err := s.watcher.snapshot(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	v := snap.cluster(namespace, name, time.Now())
	can, err := s.access.of(r.Context(), namespace)
	if err != nil {
		s.opts.Log.Error(err, "Failed to ask the API server what the user may do", "namespace", namespace)
	}
	status := http.StatusOK
	if v == nil {
		status = http.StatusNotFound
	}
	s.render(w, r, status, "cluster", page{Title: "Cluster " + name, Namespace: namespace, Cluster: v, Can: can})
}

// render writes a whole page with status, or with the X-Talon-Fragment header only its live
// part, which the page's script swaps in after a change.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Token, p.ReadOnly, p.Unreadable = s.token, s.opts.ReadOnly, s.watcher.unreadable()
	if p.Namespace == "" {
		p.Namespace = s.opts.Namespace
	}
	tmpl := name
	if r.Header.Get("X-Talon-Fragment") != "" {
		tmpl = name + "-live"
	}
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, tmpl, p); err != nil {
		s.opts.Log.Error(err, "Failed to render page", "page", tmpl)
		http.Error(w, "failed to render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// updates is the server-sent event stream of a browser tab: a "change" event after the
// caches change, at most one per Debounce, and a comment every 25 s that keeps proxies
// from closing an idle stream.
func (s *Server) updates(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	changes, cancel := s.watcher.subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()
	keepAlive := time.NewTicker(25 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepAlive.C:
			_, _ = fmt.Fprint(w, ": still here\n\n")
		case <-changes:
			_, _ = fmt.Fprint(w, "event: change\ndata: {}\n\n")
			flusher.Flush()
			// Changes during the pause are coalesced into the next event.
			select {
			case <-r.Context().Done():
				return
			case <-time.After(s.opts.Debounce):
			}
			continue
		}
		flusher.Flush()
	}
}

// validToken says whether an action request carries the page's token.
func (s *Server) validToken(r *http.Request) bool {
	got := r.Header.Get("X-Talon-Token")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}
