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
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
)

// ConfigSource returns a host's bootstrap data (its Talos machine config).
type ConfigSource interface {
	// BootstrapData returns the config for host, or an error when it has none yet.
	BootstrapData(ctx context.Context, host types.NamespacedName) ([]byte, error)
}

// ErrNoConfig means the host's config could not be read; the token stays valid for a retry.
var ErrNoConfig = errors.New("bootstrap data not available")

// HTTPOptions configure the HTTP side of the boot service.
type HTTPOptions struct {
	// BaseURL is how hosts reach this handler, e.g. "http://10.0.0.1:8081". Required.
	BaseURL string
	// AssetDir holds the kernels and initramfs served under /assets/; nothing is served
	// there when empty.
	AssetDir string
	// Refusals is told about every refused script or config request; optional.
	Refusals Refusals
	// Served is told about every script and config served to a known host; optional.
	Served func(Served)
	// Addresses tells a MAC address's IP address as DHCP shows it (a *DHCPResponder does:
	// the full-mode lease, or the address the host announced in proxy mode). An install
	// script goes only to the host's fixed IP or, without one, to that address; with neither
	// it goes to nobody.
	Addresses Addresses
}

// Served is a script or config the service handed to a known host.
type Served struct {
	// Host is the MetalHost served.
	Host types.NamespacedName
	// MAC is the MAC address the host booted from; nil for a config.
	MAC net.HardwareAddr
	// IP is the address the host asked from.
	IP net.IP
	// Endpoint is "ipxe" for a script, "config" for a config.
	Endpoint string
	// Action is what the script told the host to do; empty for a config.
	Action BootAction
}

// Addresses knows which IP address a MAC address has on the provisioning network.
type Addresses interface {
	// AddressOf returns the address of mac, or nil when it is not known.
	AddressOf(mac net.HardwareAddr) net.IP
}

var (
	// ErrWrongAddress means an install script was asked for from an address other than the
	// one the host has.
	ErrWrongAddress = errors.New("request from an address other than the host's")
	// ErrAddressUnknown means an install script was asked for while the service knows no
	// address of the host: it has no fixed IP and no DHCP request of its MAC address reached
	// the service lately.
	ErrAddressUnknown = errors.New("the host's address is not known: no fixed IP, and no DHCP request from its MAC address reached the boot service in the last minutes")
)

// httpHandler serves iPXE scripts, boot assets and one-time configs.
type httpHandler struct {
	hosts    Hosts
	configs  ConfigSource
	tokens   *Tokens
	baseURL  *url.URL
	assetDir string
	refusals Refusals
	served   func(Served)
	addrs    Addresses
}

// NewHTTPHandler returns the boot service's HTTP handler:
//
//	GET /ipxe?mac=<mac>, /ipxe/<mac>  the iPXE script of the host booting from mac (404 if
//	                                unknown); an install script only to the host's address
//	                                (403 with an empty body otherwise)
//	GET /config/<token>             the host's bootstrap data, once, to the address that fetched
//	                                the script (403 with an empty body otherwise)
//	GET /assets/<name>              a file of the asset directory
//
// The requester's address is the connection's remote address: put no proxy in front of the
// handler, or every host looks like the proxy.
func NewHTTPHandler(hosts Hosts, configs ConfigSource, tokens *Tokens, opts HTTPOptions) (http.Handler, error) {
	if hosts == nil || configs == nil || tokens == nil {
		return nil, errors.New("boot service HTTP handler needs hosts, a config source and tokens")
	}
	base, err := url.Parse(opts.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("invalid boot service base URL %q: %w", opts.BaseURL, err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("invalid boot service base URL %q: want http(s)://host[:port][/path]", opts.BaseURL)
	}
	h := &httpHandler{
		hosts:    hosts,
		configs:  configs,
		tokens:   tokens,
		baseURL:  base,
		assetDir: opts.AssetDir,
		refusals: opts.Refusals,
		served:   opts.Served,
		addrs:    opts.Addresses,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ipxe", h.serveScript)
	mux.HandleFunc("GET /ipxe/{mac}", h.serveScript)
	mux.HandleFunc("GET /config/{token}", h.serveConfig)
	mux.HandleFunc("GET /assets/{name...}", h.serveAsset)
	return countHTTP(mux), nil
}

func (h *httpHandler) serveScript(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log := logr.FromContextOrDiscard(ctx)
	ip := remoteIP(r)
	macParam := r.PathValue("mac")
	if macParam == "" {
		macParam = r.URL.Query().Get("mac")
	}
	mac, err := ParseMAC(macParam)
	if err != nil || ip == nil {
		http.Error(w, "want a MAC address: /ipxe?mac=<mac> or /ipxe/<mac>", http.StatusBadRequest)
		return
	}
	host, err := h.hosts.Lookup(ctx, mac)
	if err != nil {
		log.Error(err, "Failed to look up host", "mac", mac.String())
		http.Error(w, "host lookup failed", http.StatusServiceUnavailable)
		return
	}
	if host == nil {
		h.refuse(Refusal{MAC: mac, IP: ip, Endpoint: "ipxe", Reason: ErrUnknownHost})
		http.NotFound(w, r)
		return
	}
	if err := host.validate(); err != nil {
		h.refuse(Refusal{Host: host.Name, MAC: mac, IP: ip, Endpoint: "ipxe", Reason: err})
		http.Error(w, "host cannot be booted", http.StatusConflict)
		return
	}

	script := diskScript
	if host.Action == BootActionInstall {
		// Whoever gets the script can fetch the config once: it goes only to the address
		// the host has, and nobody gets it while that is unknown. A refused request issues
		// no token, so it cannot replace the host's (see the package documentation).
		want := h.addressOf(host, mac)
		var refused error
		switch {
		case want == nil:
			refused = ErrAddressUnknown
		case !want.Equal(ip):
			refused = fmt.Errorf("%w (%s)", ErrWrongAddress, want)
		}
		if refused != nil {
			h.refuse(Refusal{Host: host.Name, MAC: mac, IP: ip, Endpoint: "ipxe", Reason: refused})
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusForbidden)
			return
		}
		// The token is bound to the address that fetched the script: the host's firmware,
		// whose lease the Talos kernel asks for again.
		token, err := h.tokens.Issue(host.Name, mac, ip)
		if err != nil {
			log.Error(err, "Failed to issue config token", "host", host.Name.String())
			http.Error(w, "failed to issue config token", http.StatusInternalServerError)
			return
		}
		script = installScript(host, h.baseURL, configURL(h.baseURL, token, mac))
	}
	switch host.Action {
	case BootActionWipe:
		script = wipeScript(host, h.baseURL)
	case BootActionMaintenance:
		script = maintenanceScript(host, h.baseURL)
	}
	log.V(4).Info("Serving iPXE script", "host", host.Name.String(), "mac", mac.String(), "action", string(host.Action))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(script)) //nolint:gosec // a text/plain iPXE script, not HTML
	h.tell(Served{Host: host.Name, MAC: mac, IP: ip, Endpoint: "ipxe", Action: host.Action})
}

func (h *httpHandler) serveConfig(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req := Requester{IP: remoteIP(r)}
	if m := r.URL.Query().Get("mac"); m != "" {
		mac, err := ParseMAC(m)
		if err != nil {
			// A MAC the host would never send: refuse like any other mismatch.
			mac = net.HardwareAddr{}
		}
		req.MAC = mac
	}
	token := r.PathValue("token")

	// Check first and redeem only after the data was read, so that a failing config source
	// does not burn the token, and only the winner of a concurrent redeem gets the bytes.
	grant, err := h.tokens.Check(token, req)
	if err != nil {
		h.refuseConfig(w, grant, req, err)
		return
	}
	data, err := h.configs.BootstrapData(ctx, grant.Host)
	if err != nil {
		h.refuse(Refusal{Host: grant.Host, MAC: grant.MAC, IP: req.IP, Endpoint: "config", Reason: fmt.Errorf("%w: %w", ErrNoConfig, err)})
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if grant, err = h.tokens.Redeem(token, req); err != nil {
		h.refuseConfig(w, grant, req, err)
		return
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Serving config", "host", grant.Host.String(), "ip", req.IP.String())
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
	h.tell(Served{Host: grant.Host, IP: req.IP, Endpoint: "config"})
}

// refuseConfig answers 403 without a body, so a refused requester learns nothing.
func (h *httpHandler) refuseConfig(w http.ResponseWriter, grant Grant, req Requester, reason error) {
	h.refuse(Refusal{Host: grant.Host, MAC: req.MAC, IP: req.IP, Endpoint: "config", Reason: reason})
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
}

func (h *httpHandler) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if h.assetDir == "" || !fs.ValidPath(name) || name == "." {
		http.NotFound(w, r)
		return
	}
	// OpenInRoot refuses names, symlinks included, that lead out of the asset directory.
	f, err := os.OpenInRoot(h.assetDir, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", info.ModTime(), f)
}

// addressOf is the address host must ask from, or nil when the service does not know it.
func (h *httpHandler) addressOf(host *Host, mac net.HardwareAddr) net.IP {
	if host.IP != nil {
		return normalizeIP(host.IP)
	}
	if h.addrs != nil {
		if ip := h.addrs.AddressOf(mac); ip != nil {
			return normalizeIP(ip)
		}
	}
	return nil
}

func (h *httpHandler) tell(s Served) {
	if h.served != nil {
		h.served(s)
	}
}

func (h *httpHandler) refuse(r Refusal) {
	if h.refusals != nil {
		h.refusals(r)
	}
}

// remoteIP is the requester's address as the connection shows it.
func remoteIP(r *http.Request) net.IP {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil
	}
	return normalizeIP(ip)
}
