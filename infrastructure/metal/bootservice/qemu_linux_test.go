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
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talon-capi/talon/test/require"
	"github.com/talon-capi/talon/test/sitedhcp"
)

// The firmware files the QEMU test boots with, as Debian installs them (hack/install-test-deps.sh).
const (
	qemuBinary = "qemu-system-x86_64"
	// qemuNICROM is iPXE for QEMU's e1000, legacy and EFI in one ROM (package ipxe-qemu).
	qemuNICROM = "/usr/lib/ipxe/qemu/efi-e1000.rom"
	// ovmfCode and ovmfVars are the UEFI firmware and its variable store template (package ovmf).
	ovmfCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	// qemuBootTimeout bounds one firmware run; TCG takes 20–40 s here on two cores.
	qemuBootTimeout = 120 * time.Second
)

// TestQEMUNetworkBoot network-boots real firmware against the boot service, in full DHCP mode
// and in proxy mode beside the site's DHCP server (dnsmasq on a machine of its own on the
// bridge): QEMU (TCG) runs in a network namespace on a tap device in a bridge, and the
// service's DHCP listens on that bridge, its TFTP and HTTP on the bridge's address. In proxy
// mode the firmware's address comes from dnsmasq, and the service knows it only from the
// DHCPREQUEST the firmware broadcasts to dnsmasq: the install script goes nowhere else. The
// test asserts what the service saw, per firmware:
//
//   - UEFI (OVMF, virtio-net without an option ROM): OVMF's own PXE client is not iPXE, so it
//     is given ipxe.efi and fetches it over TFTP; ipxe.efi then asks DHCP again and is given
//     its script URL. (With iPXE's EFI ROM on the NIC, OVMF would boot that iPXE directly.)
//   - BIOS (SeaBIOS, e1000 with iPXE's ROM): the option ROM already is iPXE and says so (user
//     class "iPXE"), so the service hands it the script URL at once and TFTP is not used.
//     undionly.kpxe is for the PXE ROMs of real NICs, which QEMU does not have; the DHCP and
//     TFTP unit tests cover it.
//
// Both then fetch the iPXE script for the VM's MAC address from the address DHCP leased, and
// the kernel and initramfs it names.
//
// The config URL (talos.config=) is a kernel argument: only a booted Talos kernel would fetch
// it, and iPXE never does. So the stand-in "kernel" is an iPXE script, written by the test
// when the service serves the host's script, that fetches the talos.config URL of that script.
// iPXE runs it at "boot", and the config request comes from the firmware's own network stack
// at the leased address, the way Talos would ask: the test asserts it is answered 200 exactly
// once. What this does not prove is that Talos parses the command line the same way; the
// unit tests of the script cover that.
func TestQEMUNetworkBoot(t *testing.T) {
	require.Layer(t, "qemu", qemuUnavailable(qemuNICROM))
	for _, tc := range []struct {
		name     string
		firmware Firmware
		mode     DHCPMode
		subnet   byte
		// tftp is the iPXE binary the firmware fetches over TFTP, empty for none.
		tftp string
	}{
		{name: "BIOS", firmware: FirmwareBIOS, mode: DHCPModeFull, subnet: 215},
		{name: "UEFI", firmware: FirmwareUEFI, mode: DHCPModeFull, subnet: 216, tftp: BootFileUEFIAMD64},
		{name: "BIOS behind the site's DHCP server", firmware: FirmwareBIOS, mode: DHCPModeProxy, subnet: 217},
		{name: "UEFI behind the site's DHCP server", firmware: FirmwareUEFI, mode: DHCPModeProxy, subnet: 218, tftp: BootFileUEFIAMD64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each VM has a namespace and network of its own.
			t.Parallel()
			if tc.firmware == FirmwareUEFI {
				require.Layer(t, "qemu", qemuUnavailable(ovmfCode, ovmfVars))
			}
			if tc.mode == DHCPModeProxy {
				require.Layer(t, "qemu", sitedhcp.Unavailable())
			}
			runQEMUBoot(t, tc.firmware, tc.mode, tc.subnet, tc.tftp)
		})
	}
}

// qemuUnavailable says what is missing to run the firmware test, or nil.
func qemuUnavailable(files ...string) error {
	if err := netnsUnavailable(); err != nil {
		return err
	}
	if _, err := exec.LookPath(qemuBinary); err != nil {
		return fmt.Errorf("needs %s (Debian package qemu-system-x86; see hack/install-test-deps.sh)", qemuBinary)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("needs /dev/net/tun for the VM's tap device: %w", err)
	}
	ipxe := []string{filepath.Join(DefaultTFTPDir, BootFileBIOS), filepath.Join(DefaultTFTPDir, BootFileUEFIAMD64), filepath.Join(DefaultTFTPDir, BootFileUEFIAMD64SNP)}
	for _, f := range append(ipxe, files...) {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("needs firmware file %s (Debian packages ipxe, ipxe-qemu, ovmf; see hack/install-test-deps.sh): %w", f, err)
		}
	}
	return nil
}

// runQEMUBoot boots one VM with firmware on the network 10.<subnet>.0.0/24, with the boot
// service in mode (in proxy mode beside the site's DHCP server, dnsmasq, leasing .100 to
// .110), and asserts on the requests the boot service saw; wantTFTP is the iPXE binary the
// firmware must fetch.
func runQEMUBoot(t *testing.T, firmware Firmware, mode DHCPMode, subnet byte, wantTFTP string) {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), qemuBootTimeout)
	defer cancel()

	serverIP := net.IPv4(10, subnet, 0, 1).To4()
	leaseIP := net.IPv4(10, subnet, 0, 100).To4()
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x7a, subnet, 0x01}
	ns := fmt.Sprintf("talon-qemu-%d-%d", subnet, os.Getpid())
	newBridgeNetns(t, ns, fmt.Sprintf("%s/24", serverIP))
	if mode == DHCPModeProxy {
		sitedhcp.Start(t, sitedhcp.Options{
			Name: fmt.Sprintf("tq%d-%d", subnet, os.Getpid()%10000), Netns: ns, Bridge: "br0", Address: fmt.Sprintf("10.%d.0.2/24", subnet),
			First: leaseIP.String(), Last: fmt.Sprintf("10.%d.0.110", subnet),
		})
	}
	baseURL := "http://" + net.JoinHostPort(serverIP.String(), "8081")

	// The service.
	hostName := types.NamespacedName{Namespace: "metal", Name: "qemu-" + strings.ToLower(string(firmware))}
	hosts := NewStaticHosts()
	hosts.Set(mac, Host{
		Name: hostName, Firmware: firmware, Action: BootActionInstall,
		Kernel: "talos/vmlinuz-amd64", Initramfs: "talos/initramfs-amd64.xz",
	})
	assets := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(assets, "talos"), 0o750)).To(Succeed())
	// Rewritten with the config URL when the script is served; see recordingHandler.
	g.Expect(os.WriteFile(filepath.Join(assets, "talos", "vmlinuz-amd64"), []byte("#!ipxe\nexit 1\n"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(assets, "talos", "initramfs-amd64.xz"), []byte("stand-in initramfs\n"), 0o600)).To(Succeed())

	rec := &bootRecorder{}
	dhcp, err := NewDHCPResponder(hosts, DHCPOptions{
		Mode: mode, ServerIP: serverIP, BaseURL: baseURL,
		Pool: &AddressPool{Start: leaseIP, End: net.IPv4(10, subnet, 0, 110), Netmask: net.CIDRMask(24, 32)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	configs := &countingConfigs{data: []byte("version: v1alpha1\n# stand-in machine config\n")}
	handler, err := NewHTTPHandler(hosts, configs, NewTokens(TokensOptions{}), HTTPOptions{
		BaseURL: baseURL, AssetDir: assets, Addresses: dhcp,
		Refusals: func(r Refusal) { rec.addRefusal(r) },
	})
	g.Expect(err).NotTo(HaveOccurred())
	tftp, err := NewTFTPServer(TFTPOptions{Dir: copyIPXEBinaries(t), Log: rec.tftpLogger()})
	g.Expect(err).NotTo(HaveOccurred())
	serveInNetns(t, ns, serverIP, dhcp, tftp, &recordingHandler{next: handler, rec: rec, kernel: filepath.Join(assets, "talos", "vmlinuz-amd64")})

	// The VM.
	serial := filepath.Join(t.TempDir(), "serial.log")
	qemuDone := startQEMU(t, ns, firmware, mac, serial)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(serial)
			t.Logf("Firmware console:\n%s", out)
			t.Logf("Boot service saw:\n%s", rec)
		}
	})

	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for rec.configsServed() == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("The firmware did not fetch its config within %s", qemuBootTimeout)
		case err := <-qemuDone:
			t.Fatalf("QEMU exited before the firmware fetched its config: %v", err)
		case <-tick.C:
		}
	}
	t.Logf("%s firmware fetched its config %s after QEMU started", firmware, time.Since(start).Round(time.Second))

	// The address the VM took: Talon's lease, or the site server's, which the proxy saw the VM
	// ask for (dnsmasq hands out its range from the top, so it need not be .100).
	address := dhcp.AddressOf(mac)
	g.Expect(address).NotTo(BeNil(), "the boot service knows the VM's address")
	if mode == DHCPModeFull {
		g.Expect(address).To(Equal(leaseIP), "full-mode DHCP leased the VM's address")
	}
	g.Expect(address[:3]).To(Equal(leaseIP[:3]))
	g.Expect(address[3]).To(And(BeNumerically(">=", 100), BeNumerically("<=", 110)), "leased %s", address)
	if wantTFTP == "" {
		g.Expect(rec.tftpFiles()).To(BeEmpty(), "an iPXE ROM needs no iPXE binary")
	} else {
		g.Expect(rec.tftpFiles()).To(ContainElement(wantTFTP))
	}
	reqs := rec.requests()
	g.Expect(reqs).To(HaveEach(HaveField("From", address.String())), "every HTTP request comes from the leased address")
	g.Expect(reqs).To(ContainElement(And(
		HaveField("Path", "/ipxe"), HaveField("MAC", mac.String()), HaveField("Status", http.StatusOK))))
	g.Expect(reqs).To(ContainElement(And(HaveField("Path", "/assets/talos/vmlinuz-amd64"), HaveField("Status", http.StatusOK))))
	g.Expect(reqs).To(ContainElement(And(HaveField("Path", "/assets/talos/initramfs-amd64.xz"), HaveField("Status", http.StatusOK))))
	g.Expect(rec.script()).To(ContainSubstring("talos.config=" + baseURL + "/config/"))
	g.Expect(rec.configsServed()).To(Equal(1), "the config is served exactly once")
	g.Expect(configs.count()).To(Equal(1))
	g.Expect(rec.refusals()).To(BeEmpty())
}

// copyIPXEBinaries copies Debian's iPXE binaries into a directory of their own. Debian's
// /usr/lib/ipxe/ipxe.efi is a symlink to /boot/ipxe.efi, and the TFTP server refuses, by
// design, symlinks that lead out of its directory: served from DefaultTFTPDir as is, UEFI
// firmware gets "file not found" for ipxe.efi.
func copyIPXEBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{BootFileBIOS, BootFileUEFIAMD64, BootFileUEFIAMD64SNP} {
		data, err := os.ReadFile(filepath.Join(DefaultTFTPDir, name))
		if err != nil {
			t.Fatalf("Failed to read iPXE binary: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatalf("Failed to copy iPXE binary: %v", err)
		}
	}
	return dir
}

// newBridgeNetns creates the network namespace ns with a bridge br0 holding addr and a tap
// device tap0 in it for the VM, and deletes the namespace when the test ends.
func newBridgeNetns(t *testing.T, ns, addr string) {
	t.Helper()
	ipCmd(t, "netns", "add", ns)
	t.Cleanup(func() { ipCmd(t, "netns", "del", ns) })
	ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	ipCmd(t, "-n", ns, "link", "add", "br0", "type", "bridge", "forward_delay", "0")
	ipCmd(t, "-n", ns, "addr", "add", addr, "dev", "br0")
	ipCmd(t, "-n", ns, "tuntap", "add", "dev", "tap0", "mode", "tap")
	ipCmd(t, "-n", ns, "link", "set", "tap0", "master", "br0")
	ipCmd(t, "-n", ns, "link", "set", "tap0", "up")
	ipCmd(t, "-n", ns, "link", "set", "br0", "up")
}

// serveInNetns runs the boot service's DHCP on br0 (and in proxy mode on port 4011 of
// serverIP), and its TFTP and HTTP on serverIP, in the
// network namespace ns until the test ends. The TFTP server opens a socket per transfer, so it
// serves from a thread that stays in the namespace.
func serveInNetns(t *testing.T, ns string, serverIP net.IP, dhcp *DHCPResponder, tftp *TFTPServer, handler http.Handler) {
	t.Helper()
	g := NewWithT(t)
	var (
		dhcpConn, pxeConn, tftpConn net.PacketConn
		httpLn                      net.Listener
	)
	g.Expect(inNetns(ns, func() error {
		var err error
		if dhcpConn, err = ListenDHCP("br0"); err != nil {
			return err
		}
		if dhcp.opts.Mode == DHCPModeProxy {
			if pxeConn, err = ListenPXE(serverIP); err != nil {
				return err
			}
		}
		var lc net.ListenConfig
		if tftpConn, err = lc.ListenPacket(context.Background(), "udp4", net.JoinHostPort(serverIP.String(), "69")); err != nil {
			return err
		}
		httpLn, err = lc.Listen(context.Background(), "tcp4", net.JoinHostPort(serverIP.String(), "8081"))
		return err
	})).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	dhcpServers := 1
	dhcpDone := make(chan error, 2)
	go func() { dhcpDone <- dhcp.ServeDHCP(ctx, dhcpConn) }()
	if pxeConn != nil {
		dhcpServers++
		go func() { dhcpDone <- dhcp.ServeDHCP(ctx, pxeConn) }()
	}
	tftpDone := make(chan error, 1)
	go func() { tftpDone <- inNetns(ns, func() error { return tftp.Serve(tftpConn) }) }()
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(httpLn) }()

	t.Cleanup(func() {
		cancel()
		for range dhcpServers {
			if err := <-dhcpDone; err != nil {
				t.Errorf("DHCP server: %v", err)
			}
		}
		tftp.Shutdown()
		if err := <-tftpDone; err != nil {
			t.Errorf("TFTP server: %v", err)
		}
		_ = tftpConn.Close()
		_ = srv.Close()
		if err := <-httpDone; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("HTTP server: %v", err)
		}
	})
}

// startQEMU boots a VM with firmware from the network on tap0 of ns, its serial console in
// serialLog, and kills it when the test ends. The channel reports when QEMU exits.
func startQEMU(t *testing.T, ns string, firmware Firmware, mac net.HardwareAddr, serialLog string) <-chan error {
	t.Helper()
	args := []string{"netns", "exec", ns, qemuBinary,
		"-accel", "tcg", "-m", "256", "-nographic", "-nodefaults", "-no-reboot",
		"-monitor", "none", "-serial", "file:" + serialLog,
		"-netdev", "tap,id=net0,ifname=tap0,script=no,downscript=no",
		"-boot", "n",
	}
	if firmware == FirmwareBIOS {
		args = append(args, "-device", fmt.Sprintf("e1000,netdev=net0,mac=%s,romfile=%s,bootindex=1", mac, qemuNICROM))
	} else {
		// No option ROM: OVMF's own virtio-net driver and PXE client boot, as a server's
		// UEFI would. With iPXE's EFI ROM, OVMF would run that iPXE and never use TFTP.
		args = append(args, "-device", fmt.Sprintf("virtio-net-pci,netdev=net0,mac=%s,romfile=,bootindex=1", mac))
		vars := filepath.Join(t.TempDir(), "OVMF_VARS.fd")
		data, err := os.ReadFile(ovmfVars)
		if err != nil {
			t.Fatalf("Failed to read the OVMF variable store: %v", err)
		}
		if err := os.WriteFile(vars, data, 0o600); err != nil {
			t.Fatalf("Failed to copy the OVMF variable store: %v", err)
		}
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
	}
	// ip netns exec execs QEMU in place: the process is QEMU's, to kill by its PID.
	cmd := exec.CommandContext(context.Background(), "ip", args...)
	cmd.Stdin = nil
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("Failed to start QEMU: %v", err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
		done <- err
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return done
}

// httpRecord is one request the boot service's HTTP handler answered.
type httpRecord struct {
	// Path is the URL path.
	Path string
	// MAC is the mac query parameter, normalised, if any.
	MAC string
	// From is the requester's IP address.
	From string
	// Status is the response status.
	Status int
}

// bootRecorder records what the boot service saw. It is safe for concurrent use.
type bootRecorder struct {
	mu        sync.Mutex
	tftp      []string
	tftpLog   []string
	http      []httpRecord
	served    string
	refused   []Refusal
	configsOK int
}

var tftpFileRE = regexp.MustCompile(`"file"="([^"]*)"`)

// tftpLogger records the files the TFTP server sent, from its log.
func (b *bootRecorder) tftpLogger() logr.Logger {
	return funcr.New(func(_, args string) {
		b.mu.Lock()
		b.tftpLog = append(b.tftpLog, args)
		b.mu.Unlock()
		if !strings.Contains(args, `"msg"="Sent file over TFTP"`) {
			return
		}
		if m := tftpFileRE.FindStringSubmatch(args); m != nil {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.tftp = append(b.tftp, m[1])
		}
	}, funcr.Options{Verbosity: 4})
}

func (b *bootRecorder) addRefusal(r Refusal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refused = append(b.refused, r)
}

func (b *bootRecorder) tftpFiles() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.tftp...)
}

func (b *bootRecorder) requests() []httpRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]httpRecord(nil), b.http...)
}

func (b *bootRecorder) refusals() []Refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Refusal(nil), b.refused...)
}

func (b *bootRecorder) script() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.served
}

func (b *bootRecorder) configsServed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.configsOK
}

// String lists what was recorded, for the log of a failed test.
func (b *bootRecorder) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	fmt.Fprintf(&s, "TFTP: %v\n", b.tftp)
	for _, l := range b.tftpLog {
		fmt.Fprintf(&s, "TFTP log: %s\n", l)
	}
	for _, r := range b.http {
		fmt.Fprintf(&s, "HTTP: %s %s mac=%s -> %d\n", r.From, r.Path, r.MAC, r.Status)
	}
	for _, r := range b.refused {
		fmt.Fprintf(&s, "Refused: %s %s %s: %v\n", r.Endpoint, r.IP, r.MAC, r.Reason)
	}
	fmt.Fprintf(&s, "Script:\n%s", b.served)
	return s.String()
}

// recordingHandler records each request to the boot service's handler. When the handler
// serves an install script, it writes the stand-in kernel: an iPXE script that fetches the
// script's talos.config URL, as the Talos kernel would.
type recordingHandler struct {
	next   http.Handler
	rec    *bootRecorder
	kernel string
}

var talosConfigRE = regexp.MustCompile(`talos\.config=(\S+)`)

// ServeHTTP implements http.Handler.
func (h *recordingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp := httptest.NewRecorder()
	h.next.ServeHTTP(resp, r)
	body := resp.Body.Bytes()

	entry := httpRecord{Path: r.URL.Path, From: remoteIP(r).String(), Status: resp.Code}
	if mac, err := ParseMAC(r.URL.Query().Get("mac")); err == nil {
		entry.MAC = mac.String()
	}
	h.rec.mu.Lock()
	h.rec.http = append(h.rec.http, entry)
	if strings.HasPrefix(r.URL.Path, "/config/") && resp.Code == http.StatusOK {
		h.rec.configsOK++
	}
	if r.URL.Path == "/ipxe" && resp.Code == http.StatusOK {
		h.rec.served = string(body)
	}
	h.rec.mu.Unlock()

	if m := talosConfigRE.FindSubmatch(body); r.URL.Path == "/ipxe" && m != nil {
		standIn := fmt.Sprintf("#!ipxe\necho Talon stand-in kernel: fetching talos.config\nimgfetch %s\necho Talon stand-in kernel: config fetched\nshell\n", m[1])
		if err := os.WriteFile(h.kernel, []byte(standIn), 0o600); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	for k, v := range resp.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.Code)
	_, _ = w.Write(body)
}

// countingConfigs is a ConfigSource that counts how often it was asked.
type countingConfigs struct {
	mu    sync.Mutex
	data  []byte
	calls int
}

// BootstrapData implements ConfigSource.
func (c *countingConfigs) BootstrapData(context.Context, types.NamespacedName) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.data, nil
}

func (c *countingConfigs) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}
