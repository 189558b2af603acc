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
	"net"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// ErrUnknownHost means no host boots from the MAC address a request named.
var ErrUnknownHost = errors.New("unknown host")

// Refusal is one request the service turned down, for events and logs.
type Refusal struct {
	// Host is the MetalHost concerned; zero when the request named no known host.
	Host types.NamespacedName
	// MAC is the MAC address the request came from or named, if any.
	MAC net.HardwareAddr
	// IP is the requester's address, if known.
	IP net.IP
	// Endpoint is what was asked for: "dhcp", "ipxe" or "config".
	Endpoint string
	// Reason is why, one of the Err* values of this package wrapped or as is.
	Reason error
}

// Refusals is told about every refused request, e.g. to record a Kubernetes event on the
// MetalHost. It must not block.
type Refusals func(Refusal)

// requiredKernelArgs are the arguments Talos needs on metal, for every architecture.
var requiredKernelArgs = []string{"talos.platform=metal", "slab_nomerge"}

// defaultKernelArgs are the hardening defaults Talos 1.13's boot assets are built with.
var defaultKernelArgs = []string{
	"init_on_alloc=1", "consoleblank=0", "nvme_core.io_timeout=4294967295", "printk.devkmsg=on",
	"selinux=1", "module.sig_enforce=1", "proc_mem.force_override=never",
	// Do not boot the PXE image again on a host that already installed Talos.
	"talos.halt_if_installed=1",
}

// defaultConsoles are used when the host's kernel arguments name no console.
var defaultConsoles = map[Arch][]string{
	ArchAMD64: {"console=tty0", "console=ttyS0,115200n8"},
	ArchARM64: {"console=tty0", "console=ttyAMA0,115200n8"},
}

// initramfsName is the name iPXE gives the initramfs, so that the EFI stub finds it via initrd=.
const initramfsName = "initramfs.xz"

// diskScript makes iPXE return to the firmware, which boots the next device.
const diskScript = "#!ipxe\n# Talon: boot from disk\nexit\n"

// kernelArgs returns the full kernel command line for host, without talos.config.
func kernelArgs(host *Host) []string {
	args := []string{"initrd=" + initramfsName}
	args = append(args, requiredKernelArgs...)
	if host.arch() == ArchAMD64 {
		args = append(args, "pti=on")
	}
	args = append(args, defaultKernelArgs...)
	hasConsole := false
	for _, a := range host.KernelArgs {
		if strings.HasPrefix(a, "console=") {
			hasConsole = true
		}
	}
	if !hasConsole {
		args = append(args, defaultConsoles[host.arch()]...)
	}
	return append(args, host.KernelArgs...)
}

// WipeKernelArg makes Talos wipe the system disk before it starts.
const WipeKernelArg = "talos.experimental.wipe=system"

// installScript returns the iPXE script that boots host's Talos kernel with configURL.
func installScript(host *Host, baseURL *url.URL, configURL string) string {
	return bootScript(host, baseURL, "install", "talos.config="+configURL)
}

// wipeScript returns the iPXE script that boots host's Talos kernel to wipe the system disk;
// Talos reboots when it is done.
func wipeScript(host *Host, baseURL *url.URL) string {
	return bootScript(host, baseURL, "wipe", WipeKernelArg)
}

// maintenanceScript returns the iPXE script that boots host's Talos kernel with no config,
// into maintenance mode.
func maintenanceScript(host *Host, baseURL *url.URL) string {
	return bootScript(host, baseURL, "maintenance")
}

// bootScript returns the iPXE script that boots host's Talos kernel with extra as its last
// kernel arguments; what names the boot in a comment.
func bootScript(host *Host, baseURL *url.URL, what string, extra ...string) string {
	args := append(kernelArgs(host), extra...)
	var b strings.Builder
	b.WriteString("#!ipxe\n")
	fmt.Fprintf(&b, "# Talon: %s %s\n", what, host.Name)
	fmt.Fprintf(&b, "kernel %s %s\n", assetURL(baseURL, host.Kernel), strings.Join(args, " "))
	fmt.Fprintf(&b, "initrd --name %s %s\n", initramfsName, assetURL(baseURL, host.Initramfs))
	b.WriteString("boot\n")
	return b.String()
}

// assetURL is where the service serves the asset called name.
func assetURL(baseURL *url.URL, name string) string {
	return baseURL.JoinPath("assets", name).String()
}

// configURL is the one-time URL of a host's config. The MAC is a consistency check, not proof.
func configURL(baseURL *url.URL, token string, mac net.HardwareAddr) string {
	u := baseURL.JoinPath("config", token)
	u.RawQuery = url.Values{"mac": {mac.String()}}.Encode()
	return u.String()
}

// ScriptURL is the URL of the iPXE script for the host booting from mac, under the boot
// service's base URL; the DHCP responder hands it to iPXE clients.
func ScriptURL(baseURL *url.URL, mac net.HardwareAddr) string {
	u := baseURL.JoinPath("ipxe")
	u.RawQuery = url.Values{"mac": {mac.String()}}.Encode()
	return u.String()
}
