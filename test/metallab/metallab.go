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

// Package metallab is a provisioning network for tests of the bare-metal provider: a
// bridge carrying the boot service's address and simulated hosts (sim.Host) on veth pairs,
// each with a Redfish or IPMI BMC of its own (sim/bmc), registered as MetalHosts; and the
// objects of Talon's metal cluster template.
package metallab

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/bmc"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/sitedhcp"
)

// Layer is the test layer of root networking (TALON_REQUIRE).
const Layer = "netns"

// RootNetworking says why this machine cannot make the bridge and veth pairs of the
// provisioning network, or nil.
func RootNetworking() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root to create bridges and veth pairs and to serve DHCP")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("needs the ip command (Debian package iproute2)")
	}
	return nil
}

// IP runs the ip command, failing the test if it fails.
func IP(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.CommandContext(context.Background(), "ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// Lab is a provisioning network with simulated hosts and their BMCs.
type Lab struct {
	t *testing.T
	// Bridge is the network's bridge, which carries ServerIP.
	Bridge string
	// ServerIP is the boot service's address, .1 of the network.
	ServerIP net.IP
	// Prefix is the network's first three octets and a dot, e.g. "10.99.7.".
	Prefix string
	// Namespace is where the hosts' MetalHosts and BMC Secrets are registered.
	Namespace string
	// Hosts are the hosts by name.
	Hosts map[string]*Host
}

// Host is a simulated host on the lab's network and its BMC.
type Host struct {
	Name string
	// NIC is the host's end of its veth pair, where it network-boots.
	NIC string
	MAC net.HardwareAddr
	BMC *bmc.BMC
	// Address is the BMC's, as a MetalHost names it (redfish+http://... or ipmi://...).
	Address  string
	Password string
	Sim      *sim.Host
	// StateDir is the host's system disk.
	StateDir string
	// DisksDir holds the host's data disk, sdb, which holds a file from the start.
	DisksDir string
	// WipeDataDisks is the MetalHost's spec.wipeDataDisks.
	WipeDataDisks bool
	// InstallDisk is the MetalHost's install-disk hint, if any.
	InstallDisk string
	// Network is the MetalHost's static network settings, if any.
	Network *infrav1.HostNetwork
}

// New makes a bridge with the boot service's address; it is deleted when the test ends.
func New(t *testing.T, namespace string) *Lab {
	t.Helper()
	id := make([]byte, 2)
	_, _ = rand.Read(id)
	tag := hex.EncodeToString(id)
	l := &Lab{t: t, Bridge: "tm" + tag, Prefix: fmt.Sprintf("10.99.%d.", id[0]), Namespace: namespace, Hosts: map[string]*Host{}}
	l.ServerIP = net.ParseIP(l.Prefix + "1").To4()
	IP(t, "link", "add", l.Bridge, "type", "bridge")
	t.Cleanup(func() { _ = exec.CommandContext(context.Background(), "ip", "link", "del", l.Bridge).Run() })
	IP(t, "address", "add", l.Prefix+"1/24", "dev", l.Bridge)
	IP(t, "link", "set", l.Bridge, "up")
	return l
}

// AddNIC adds network interface number i (1-254) on the network: one end of a veth pair whose
// other end is on the bridge. It returns the interface's name and MAC address; it is deleted
// when the test ends.
func (l *Lab) AddNIC(i int) (string, net.HardwareAddr) {
	t := l.t
	t.Helper()
	mac := net.HardwareAddr{0x02, 0x42, 0x10, 0x99, l.ServerIP[2], byte(i)}
	nic, peer := fmt.Sprintf("%sh%d", l.Bridge, i), fmt.Sprintf("%sp%d", l.Bridge, i)
	IP(t, "link", "add", nic, "address", mac.String(), "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.CommandContext(context.Background(), "ip", "link", "del", nic).Run() })
	IP(t, "link", "set", peer, "master", l.Bridge)
	IP(t, "link", "set", peer, "up")
	IP(t, "link", "set", nic, "up")
	return nic, mac
}

// DHCPServerUnavailable says why the site's DHCP server cannot run here, or nil.
func DHCPServerUnavailable() error {
	if err := sitedhcp.Unavailable(); err != nil {
		return err
	}
	return RootNetworking()
}

// StartDHCPServer runs the site's DHCP server on the network (sitedhcp): dnsmasq on a machine
// of its own at .2, leasing .first to .last and no boot file. It stops when the test ends.
func (l *Lab) StartDHCPServer(first, last int) {
	l.t.Helper()
	sitedhcp.Start(l.t, sitedhcp.Options{
		Name: l.Bridge, Bridge: l.Bridge, Address: l.Prefix + "2/24",
		First: fmt.Sprintf("%s%d", l.Prefix, first), Last: fmt.Sprintf("%s%d", l.Prefix, last),
	})
}

// AddHost adds simulated host number i on the network, with a Redfish or IPMI BMC on the
// loopback address; the host runs until ctx ends or the test ends.
func (l *Lab) AddHost(ctx context.Context, name string, i int, ipmi bool, log logr.Logger) *Host {
	t := l.t
	t.Helper()
	nic, mac := l.AddNIC(i)
	h := &Host{Name: name, NIC: nic, MAC: mac, Password: "pw-" + rand.Text()[:12]}
	h.StateDir, h.DisksDir = t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(h.DisksDir, DataDisk), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.DisksDir, DataDisk, "data"), []byte("an earlier owner's data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	h.Sim, err = sim.NewHost(sim.HostOptions{
		Interface: h.NIC, StateDir: h.StateDir, DisksDir: h.DisksDir, BinDir: envtest.BinDir(),
		OnPowerOff: func() { h.BMC.SetPower("1", false) },
		Log:        log.WithValues("name", name),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.BMC = bmc.New(bmc.Config{Username: "admin", Password: h.Password, OnPowerChange: func(e bmc.PowerEvent) {
		if !e.On {
			h.Sim.PowerOff()
			return
		}
		h.Sim.PowerOn(ctx, e.Boot.Enabled != bmc.OverrideDisabled && e.Boot.Target == "Pxe")
	}})
	if ipmi {
		address, err := h.BMC.StartIPMI("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h.Address = "ipmi://" + address
	} else {
		listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h.BMC.Start(listener)
		h.Address = "redfish+http://" + listener.Addr().String()
	}
	t.Cleanup(func() {
		h.Sim.PowerOff()
		h.BMC.Close()
	})
	l.Hosts[name] = h
	return h
}

// DataDisk is the data disk every lab host has, as Talos names it.
const DataDisk = "sdb"

// DataDiskHoldsData reports whether h's data disk holds anything.
func (h *Host) DataDiskHoldsData() bool {
	entries, err := os.ReadDir(filepath.Join(h.DisksDir, DataDisk))
	return err == nil && len(entries) > 0
}

// Register creates the MetalHost and BMC credentials Secret of h, labelled with role.
func (l *Lab) Register(c client.Client, h *Host, role string) {
	t := l.t
	t.Helper()
	g := gomega.NewWithT(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: h.Name + "-bmc"},
		StringData: map[string]string{"username": "admin", "password": h.Password},
	}
	g.Expect(c.Create(t.Context(), secret)).To(gomega.Succeed())
	host := &infrav1.MetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: h.Name, Labels: map[string]string{"talon.dev/role": role}},
		Spec: infrav1.MetalHostSpec{
			BootMACAddresses: []string{h.MAC.String()},
			BMC:              &infrav1.BMCSpec{Address: h.Address, CredentialsName: secret.Name},
			InstallDisk:      h.InstallDisk,
			Network:          h.Network,
			WipeDataDisks:    h.WipeDataDisks,
		},
	}
	g.Expect(c.Create(t.Context(), host)).To(gomega.Succeed())
}

// Addresses are the addresses of the network from .first to .last, e.g. a lease pool's.
func (l *Lab) Addresses(first, last int) []string {
	var addresses []string
	for i := first; i <= last; i++ {
		addresses = append(addresses, fmt.Sprintf("%s%d", l.Prefix, i))
	}
	return addresses
}

// BootAssets serves stand-in kernel and initramfs files on the loopback address and
// returns the template variables naming them.
func BootAssets(t *testing.T) map[string]string {
	t.Helper()
	files := map[string][]byte{"/vmlinuz-amd64": []byte("stand-in Talos kernel\n"), "/initramfs-amd64.xz": []byte("stand-in Talos initramfs\n")}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(server.Close)
	sum := func(name string) string {
		s := sha512.Sum512(files[name])
		return hex.EncodeToString(s[:])
	}
	return map[string]string{
		"TALOS_KERNEL_URL": server.URL + "/vmlinuz-amd64", "TALOS_KERNEL_SHA512": sum("/vmlinuz-amd64"),
		"TALOS_INITRAMFS_URL": server.URL + "/initramfs-amd64.xz", "TALOS_INITRAMFS_SHA512": sum("/initramfs-amd64.xz"),
	}
}

// Template is templates/cluster-template-metal.yaml with variables, as clusterctl
// generate cluster processes it.
func Template(t *testing.T, variables map[string]string) []byte {
	t.Helper()
	g := gomega.NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "templates", "cluster-template-metal.yaml"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	processed, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if v, ok := variables[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("variable %s is not set", name)
	})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return processed
}

// ApplyTemplate creates the objects of Template(variables).
func ApplyTemplate(t *testing.T, c client.Client, variables map[string]string) {
	t.Helper()
	g := gomega.NewWithT(t)
	objs, err := utilyaml.ToUnstructured(Template(t, variables))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for i := range objs {
		g.Expect(c.Create(t.Context(), &objs[i])).To(gomega.Succeed(), "create %s %s", objs[i].GetKind(), objs[i].GetName())
	}
}

// Generate runs "clusterctl generate cluster name --flavor flavor" into namespace with
// variables, from the local repository `make release-manifests` writes (out/clusterctl.yaml)
// and without a management cluster, and returns the objects it prints.
func Generate(t *testing.T, name, flavor, namespace string, variables map[string]string) []unstructured.Unstructured {
	t.Helper()
	g := gomega.NewWithT(t)
	clusterctl, err := envtest.Binary("clusterctl")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	root := envtest.RepoRoot()
	versions, err := os.ReadDir(filepath.Join(root, "out", "repository", "infrastructure-talon"))
	g.Expect(err).NotTo(gomega.HaveOccurred(), "run 'make release-manifests' first")
	g.Expect(versions).To(gomega.HaveLen(1))
	cmd := exec.CommandContext(t.Context(), clusterctl, "generate", "cluster", name, "--flavor", flavor,
		"--config", filepath.Join(root, "out", "clusterctl.yaml"), "--infrastructure", "talon:"+versions[0].Name(),
		"--target-namespace", namespace)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	for k, v := range variables {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	g.Expect(err).NotTo(gomega.HaveOccurred(), "clusterctl generate cluster: %s", stderr.String())
	objs, err := utilyaml.ToUnstructured(out)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return objs
}
