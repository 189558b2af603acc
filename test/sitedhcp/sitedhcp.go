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

// Package sitedhcp runs a site's DHCP server for tests of Talon's boot service in proxy mode:
// Debian's dnsmasq, on a machine of its own (a network namespace) joined to a test's bridge,
// leasing addresses and nothing else, as a site's DHCP server that leaves network boot to a
// proxy does.
package sitedhcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Unavailable says why the server cannot run here, or nil.
func Unavailable() error {
	if _, err := dnsmasq(); err != nil {
		return errors.New("needs dnsmasq as the site's DHCP server (Debian package dnsmasq-base; make test-deps installs it)")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return errors.New("needs iptables to let a bridge forward between its ports")
	}
	return nil
}

func dnsmasq() (string, error) {
	if path, err := exec.LookPath("dnsmasq"); err == nil {
		return path, nil
	}
	return exec.LookPath("/usr/sbin/dnsmasq")
}

// Options say where the server runs and what it leases.
type Options struct {
	// Name names the server's network namespace (talon-dhcp-<Name>) and its link on the
	// bridge (<Name>d); at most 12 characters.
	Name string
	// Netns is the network namespace of the bridge; empty for the test's own.
	Netns string
	// Bridge is the bridge the server joins.
	Bridge string
	// Address is the server's address with its prefix, e.g. 10.99.7.2/24.
	Address string
	// First and Last are the range it leases, e.g. 10.99.7.100 and 10.99.7.150; the mask is
	// Address's.
	First, Last string
}

// Start runs the server until the test ends, and logs what it logged if the test failed.
func Start(t *testing.T, o Options) {
	t.Helper()
	path, err := dnsmasq()
	if err != nil {
		t.Fatal(Unavailable())
	}
	ns, link := "talon-dhcp-"+o.Name, o.Name+"d"
	// ip in the bridge's namespace.
	ip := func(args ...string) {
		t.Helper()
		if o.Netns != "" {
			args = append([]string{"-n", o.Netns}, args...)
		}
		if out, err := exec.CommandContext(context.Background(), "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(context.Background(), "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	// A namespace a killed run left behind goes first.
	_ = exec.CommandContext(context.Background(), "ip", "netns", "del", ns).Run()
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.CommandContext(context.Background(), "ip", "netns", "del", ns).Run() })
	add := []string{"link", "add", link}
	if o.Netns != "" {
		add = append(add, "netns", o.Netns)
	}
	run(append(add, "type", "veth", "peer", "name", "eth0", "netns", ns)...)
	ip("link", "set", link, "master", o.Bridge)
	ip("link", "set", link, "up")
	run("-n", ns, "address", "add", o.Address, "dev", "eth0")
	run("-n", ns, "link", "set", "eth0", "up")
	run("-n", ns, "link", "set", "lo", "up")
	// Frames between two ports of a bridge pass iptables' FORWARD chain (br_netfilter), whose
	// policy Docker sets to DROP in the machine's own namespace.
	if o.Netns == "" {
		forward := []string{"FORWARD", "-i", o.Bridge, "-o", o.Bridge, "-j", "ACCEPT"}
		if out, err := exec.CommandContext(context.Background(), "iptables", append([]string{"-I"}, forward...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables: %v: %s", err, out)
		}
		t.Cleanup(func() {
			_ = exec.CommandContext(context.Background(), "iptables", append([]string{"-D"}, forward...)...).Run()
		})
	}

	dir := t.TempDir()
	_, prefix, err := parseCIDR(o.Address)
	if err != nil {
		t.Fatal(err)
	}
	log := &bytes.Buffer{}
	cmd := exec.CommandContext(context.Background(), "ip", "netns", "exec", ns, path,
		"--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--user=root",
		"--interface=eth0", "--bind-interfaces", "--no-ping", "--dhcp-authoritative", "--log-dhcp", "--log-facility=-",
		fmt.Sprintf("--dhcp-range=%s,%s,%s,1h", o.First, o.Last, prefix),
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file="+filepath.Join(dir, "pid"))
	cmd.Stdout, cmd.Stderr = log, log
	// dnsmasq dies with the test process, even when no cleanup runs (a test timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// ip netns exec execs dnsmasq in place: the process is dnsmasq's.
	if err := cmd.Start(); err != nil {
		t.Fatalf("dnsmasq: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		exit := <-done
		if t.Failed() {
			t.Logf("The site's DHCP server (dnsmasq, %v) logged:\n%s", exit, log)
		}
	})
	select {
	case err := <-done:
		t.Fatalf("dnsmasq exited: %v: %s", err, log)
	case <-time.After(200 * time.Millisecond):
	}
}

// parseCIDR returns the address and the dotted netmask of an IPv4 prefix.
func parseCIDR(cidr string) (string, string, error) {
	ip, network, err := net.ParseCIDR(cidr)
	if err != nil || ip.To4() == nil {
		return "", "", fmt.Errorf("%q is not an IPv4 address with a prefix", cidr)
	}
	return ip.String(), net.IP(network.Mask).String(), nil
}
