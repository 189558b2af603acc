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

package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/sim"
	"github.com/talon-capi/talon/sim/simtest"
	"github.com/talon-capi/talon/test/envtest"
	"github.com/talon-capi/talon/test/require"
)

// Layer is this suite's layer in TALON_REQUIRE: it needs bin/talosctl (make tools).
const Layer = "talosctl"

// The simulated cluster: three control-plane nodes and a worker on loopback addresses.
var (
	controlPlanes = []string{"127.0.61.1", "127.0.61.2", "127.0.61.3"}
	worker        = "127.0.61.4"
	// unreachable is an address where no node listens.
	unreachable = "127.0.61.9"
)

// talosctl runs bin/talosctl with the cluster's talosconfig.
type talosctl struct {
	t      *testing.T
	binary string
	config string
}

// run runs talosctl with args and returns what it printed (standard output and error).
func (c *talosctl) run(args ...string) (string, error) {
	c.t.Helper()
	return c.runWith(nil, args...)
}

// runWith runs talosctl as run does, with env added to the environment.
func (c *talosctl) runWith(env []string, args ...string) (string, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.binary, append([]string{"--talosconfig", c.config}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	c.t.Logf("talosctl %s (%s):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out.String())
	return out.String(), err
}

// ok runs talosctl and fails the test if it fails.
func (c *talosctl) ok(g Gomega, args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	g.Expect(err).NotTo(HaveOccurred(), "talosctl %s:\n%s", strings.Join(args, " "), out)
	return out
}

// on is the node flags that reach address directly: it is both the endpoint and the node.
func on(address string, args ...string) []string {
	return append([]string{"-e", address, "-n", address}, args...)
}

// TestTalosctl builds a 3 + 1 simulated cluster with talosctl alone and runs talosctl's
// commands against it in order, one subtest per command; a failed step stops the rest.
// conformanceTalosVersion is the Talos version of the simulated nodes: the newest patch of
// talosctl's minor (bin/talosctl is v1.13.0).
const conformanceTalosVersion = "v1.13.3"

func TestTalosctl(t *testing.T) {
	binary, err := envtest.Binary("talosctl")
	require.Layer(t, Layer, err)
	_, err = envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)

	dir := t.TempDir()
	// The worker has a data disk, sdb, holding a file.
	disks := t.TempDir()
	if err := os.MkdirAll(filepath.Join(disks, "sdb"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(disks, "sdb", "data"), []byte("data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, address := range append(append([]string(nil), controlPlanes...), worker) {
		// The worker is a bare-metal node, which Talos upgrades; control-plane nodes run as
		// containers, which it does not.
		mode, disksDir := configgen.ModeContainer, ""
		if address == worker {
			mode, disksDir = configgen.ModeMetal, disks
		}
		// A reboot keeps the node down for 3 s: talosctl's tracker looks for the node's new
		// boot once a second and, finding it up already, would wait only for events newer
		// than its reconnect (a real node takes far longer to reboot).
		// The nodes run the Talos version of the talosctl the suite drives: talosctl refuses to
		// upgrade Kubernetes on nodes newer than itself ("compatibility with version 1.14.1 is
		// not supported"), as it should.
		n, err := sim.NewNode(sim.Options{
			Address: address, StateDir: t.TempDir(), DisksDir: disksDir, BinDir: envtest.BinDir(), RebootDelay: 3 * time.Second, Mode: mode,
			TalosVersion: conformanceTalosVersion,
			Log:          testr.NewWithOptions(t, testr.Options{Verbosity: 1}),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
	}
	tc, err := configgen.NewTalosconfig(simtest.Bundle(), "sim", controlPlanes, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := &talosctl{t: t, binary: binary, config: filepath.Join(dir, "talosconfig")}
	if err := os.WriteFile(c.config, tc.Data, 0o600); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name string
		run  func(g Gomega)
	}{
		{"apply-config --insecure", func(g Gomega) {
			for i, address := range controlPlanes {
				applyInsecure(t, g, c, dir, address, simtest.Render(t, bootstrapv1.GenerateTypeControlPlane, fmt.Sprintf("cp-%d", i), controlPlanes[0]))
			}
			applyInsecure(t, g, c, dir, worker, workerConfig(t))
		}},
		{"version", func(g Gomega) {
			var out string
			g.Eventually(func() error {
				var err error
				out, err = c.run(on(controlPlanes[0], "version")...)
				return err
			}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			// talosctl prints the client's version, then one block per node that answered.
			g.Expect(out).To(MatchRegexp(`(?m)^Client:\n\s+Tag:\s+v1\.13\.0`))
			g.Expect(out).To(MatchRegexp(`(?m)^Server:\n\s+NODE:\s+` + regexp.QuoteMeta(controlPlanes[0]) + `\n\s+Tag:\s+v\d+\.\d+\.\d+`))
		}},
		{"bootstrap", func(g Gomega) {
			c.ok(g, on(controlPlanes[0], "bootstrap")...)
			// A second bootstrap is refused as Talos refuses it: etcd already has data.
			out, err := c.run(on(controlPlanes[0], "bootstrap")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring("AlreadyExists"))
			// A worker has no etcd to bootstrap.
			out, err = c.run(on(worker, "bootstrap")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(Or(ContainSubstring("Unimplemented"), ContainSubstring("PermissionDenied")))
		}},
		{"etcd members", func(g Gomega) {
			g.Eventually(func(g Gomega) {
				out := c.ok(g, on(controlPlanes[0], "etcd", "members")...)
				// NODE  ID  HOSTNAME  PEER URLS  CLIENT URLS  LEARNER
				rows := regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(controlPlanes[0])+`\s+[0-9a-f]{16}\s+(cp-\d)\s+\S+\s+\S+\s+false\s*$`).FindAllStringSubmatch(out, -1)
				g.Expect(rows).To(HaveLen(3), "three voting members")
				hostnames := make([]string, 0, len(rows))
				for _, row := range rows {
					hostnames = append(hostnames, row[1])
				}
				g.Expect(hostnames).To(ConsistOf("cp-0", "cp-1", "cp-2"))
			}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		}},
		{"etcd status", func(g Gomega) {
			members, leader := etcdStatus(g, c)
			g.Expect(members).To(HaveLen(3))
			g.Expect(members).To(HaveKey(leader), "the leader is one of the members")
		}},
		{"node routing", func(g Gomega) {
			members, _ := etcdStatus(g, c)
			ids := map[string]string{}
			for id, address := range members {
				ids[address] = id
			}
			// -e A -n B: A forwards the call to B, and B answers.
			out := c.ok(g, "-e", controlPlanes[0], "-n", controlPlanes[1], "etcd", "status")
			g.Expect(out).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(controlPlanes[1]) + `\s+` + ids[controlPlanes[1]] + `\s`))
			// -n A,B,C: one call, three replies, each naming its node.
			out = c.ok(g, "-e", controlPlanes[0], "-n", strings.Join(controlPlanes, ","), "etcd", "status")
			for _, address := range controlPlanes {
				g.Expect(out).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(address) + `\s+` + ids[address] + `\s`))
			}
			out = c.ok(g, "-e", controlPlanes[0], "-n", strings.Join(controlPlanes, ","), "version")
			g.Expect(regexp.MustCompile(`(?m)^\s+NODE:\s+(\S+)$`).FindAllStringSubmatch(out, -1)).To(HaveLen(3))
			// A node the endpoint cannot reach: the others answer, and talosctl warns with the
			// unreachable node's error, as it does with Talos.
			out = c.ok(g, "-e", controlPlanes[0], "-n", controlPlanes[1]+","+unreachable, "version")
			g.Expect(out).To(MatchRegexp(`(?m)^\s+NODE:\s+` + regexp.QuoteMeta(controlPlanes[1]) + `$`))
			g.Expect(out).To(ContainSubstring("WARNING: 1 error occurred"))
			g.Expect(out).To(MatchRegexp(`\* ` + regexp.QuoteMeta(unreachable) + `: rpc error: code = Unavailable`))
		}},
		{"services", func(g Gomega) {
			out := c.ok(g, "-e", controlPlanes[0], "-n", controlPlanes[0]+","+worker, "services")
			// NODE  SERVICE  STATE  HEALTH  LAST CHANGE  LAST EVENT
			row := func(node, service string) string {
				return `(?m)^` + regexp.QuoteMeta(node) + `\s+` + service + `\s+Running\s+OK\s+\S+ ago\s+Health check successful$`
			}
			for _, service := range []string{"apid", "containerd", "cri", "etcd", "kubelet", "machined", "trustd"} {
				g.Expect(out).To(MatchRegexp(row(controlPlanes[0], service)), "%s on the control-plane node", service)
			}
			for _, service := range []string{"apid", "containerd", "cri", "kubelet", "machined"} {
				g.Expect(out).To(MatchRegexp(row(worker, service)), "%s on the worker", service)
			}
			g.Expect(out).NotTo(MatchRegexp(`(?m)^`+regexp.QuoteMeta(worker)+`\s+(etcd|trustd)\s`), "a worker runs neither etcd nor trustd")
		}},
		{"service etcd", func(g Gomega) {
			out := c.ok(g, on(controlPlanes[0], "service", "etcd")...)
			g.Expect(out).To(MatchRegexp(`(?m)^ID\s+etcd$`))
			g.Expect(out).To(MatchRegexp(`(?m)^STATE\s+Running$`))
			g.Expect(out).To(MatchRegexp(`(?m)^HEALTH\s+OK$`))
			// The events, newest first: the health check after the task started.
			g.Expect(out).To(MatchRegexp(`(?s)\[Running\]: Health check successful .*\[Running\]: Started task etcd .*\[Preparing\]: Running pre state`))
		}},
		{"etcd snapshot", func(g Gomega) {
			path := filepath.Join(dir, "etcd.snapshot")
			out := c.ok(g, on(controlPlanes[0], "etcd", "snapshot", path)...)
			g.Expect(out).To(ContainSubstring("etcd snapshot saved to"))
			info, err := os.Stat(path)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(info.Size()).To(BeNumerically(">", 0))
		}},
		{"kubeconfig", func(g Gomega) {
			path := filepath.Join(dir, "kubeconfig")
			c.ok(g, on(controlPlanes[0], "kubeconfig", path)...)
			cfg, err := clientcmd.LoadFromFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Clusters).To(HaveEach(HaveField("Server", "https://"+controlPlanes[0]+":6443")))
		}},
		{"get", func(g Gomega) {
			// Every node reaches the running stage and is ready once its Node is.
			for _, address := range append(append([]string(nil), controlPlanes...), worker) {
				g.Eventually(func(g Gomega) {
					out := c.ok(g, on(address, "get", "machinestatus", "-o", "yaml")...)
					g.Expect(out).To(MatchRegexp(`(?m)^\s+stage: running$`))
					g.Expect(out).To(MatchRegexp(`(?m)^\s+ready: true$`))
				}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
			}
			cp0 := controlPlanes[0]
			row := func(args ...string) string { return c.ok(g, append(on(cp0, "get"), args...)...) }
			// NODE  NAMESPACE  TYPE  ID  VERSION  <print columns>
			g.Expect(row("nodename")).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(cp0) + `\s+k8s\s+Nodename\s+nodename\s+\d+\s+cp-0$`))
			g.Expect(row("hostnamestatus")).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(cp0) + `\s+network\s+HostnameStatus\s+hostname\s+\d+\s+cp-0\s*$`))
			g.Expect(row("nodeaddress", "current")).To(ContainSubstring(cp0 + "/32"))
			g.Expect(row("members")).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(cp0) + `\s+cluster\s+Member\s+cp-0\s+\d+\s+cp-0\s+controlplane\s+Talos \(v1\.13\.3\)\s+\["` + regexp.QuoteMeta(cp0) + `"\]`))
			g.Expect(row("version")).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(cp0) + `\s+runtime\s+Version\s+version\s+\d+\s+Talos\s+v1\.13\.3$`))
			g.Expect(row("disks")).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(cp0) + `\s+runtime\s+Disk\s+sda\s+\d+\s+22 GB\s`))
			g.Expect(row("volumestatus", "EPHEMERAL")).To(MatchRegexp(`(?m)EPHEMERAL\s+\d+\s+partition\s+ready\s`))
			services := row("services")
			for _, service := range []string{"apid", "etcd", "kubelet", "trustd"} {
				g.Expect(services).To(MatchRegexp(`(?m)^`+regexp.QuoteMeta(cp0)+`\s+runtime\s+Service\s+`+service+`\s+\d+\s+true\s+true\s`), service)
			}
			members, _ := etcdStatus(g, c)
			var memberID string
			for id, address := range members {
				if address == cp0 {
					memberID = id
				}
			}
			g.Expect(row("etcdmember")).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(cp0) + `\s+etcd\s+EtcdMember\s+local\s+\d+\s+` + memberID + `$`))
			g.Eventually(func(g Gomega) {
				out := c.ok(g, append(on(cp0, "get"), "staticpodstatus")...)
				for _, pod := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
					g.Expect(out).To(MatchRegexp(`(?m)^`+regexp.QuoteMeta(cp0)+`\s+k8s\s+StaticPodStatus\s+kube-system/`+pod+`-cp-0\s+\d+\s+True$`), pod)
				}
			}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
			config := row("machineconfig", "-o", "yaml")
			g.Expect(config).To(MatchRegexp(`(?m)^\s+id: v1alpha1$`))
			g.Expect(config).To(ContainSubstring("hostname: cp-0"))
			// talosctl asks each node of -n in turn.
			out := c.ok(g, "-e", cp0, "-n", cp0+","+worker, "get", "nodename")
			g.Expect(out).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(worker) + `\s+k8s\s+Nodename\s+nodename\s+\d+\s+worker-0$`))
			// A type the node does not know, as Talos answers it.
			out, err := c.run(append(on(cp0, "get"), "nosuchresource")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring(`code = NotFound desc = resource "nosuchresource" is not registered`))
		}},
		{"health", func(g Gomega) {
			// Client-side checks: etcd, apid, the nodes' boot, the Kubernetes nodes and the
			// control-plane static pods, each reported OK (kube-proxy and CoreDNS, which the
			// simulator does not run, are skipped as absent).
			out := c.ok(g, on(controlPlanes[0], "health", "--server=false", "--wait-timeout", "2m",
				"--control-plane-nodes", strings.Join(controlPlanes, ","), "--worker-nodes", worker)...)
			for _, check := range []string{
				"etcd to be healthy", "etcd members to be consistent across nodes", "etcd members to be control plane nodes",
				"apid to be ready", "all nodes memory sizes", "all nodes disk sizes", "no diagnostics", "kubelet to be healthy",
				"all nodes to finish boot sequence", "all k8s nodes to report", "all control plane static pods to be running",
				"all control plane components to be ready", "all k8s nodes to report ready", "all k8s nodes to report schedulable",
			} {
				g.Expect(out).To(MatchRegexp(`(?m)^waiting for `+regexp.QuoteMeta(check)+`: OK$`), check)
			}
			g.Expect(out).To(MatchRegexp(`(?m)^waiting for kube-proxy to report ready: SKIP$`))
			// Server-side (talosctl's default): the node runs the same checks and streams
			// their progress; the nodes come from the cluster's Kubernetes Nodes.
			out = c.ok(g, on(controlPlanes[0], "health", "--wait-timeout", "2m")...)
			g.Expect(out).To(ContainSubstring(fmt.Sprintf("discovered nodes: %q", append(append([]string(nil), controlPlanes...), worker))))
			for _, check := range []string{"etcd to be healthy", "apid to be ready", "all nodes to finish boot sequence",
				"all k8s nodes to report", "all control plane components to be ready", "all k8s nodes to report schedulable"} {
				g.Expect(out).To(MatchRegexp(`(?m)^waiting for `+regexp.QuoteMeta(check)+`: OK$`), check)
			}
			g.Expect(out).To(MatchRegexp(`(?m)^waiting for coredns to report ready: SKIP$`))
			// A node that does not answer fails the checks that ask it, until the timeout.
			out, err := c.run(on(controlPlanes[0], "health", "--wait-timeout", "10s",
				"--control-plane-nodes", strings.Join(controlPlanes, ","), "--worker-nodes", worker+","+unreachable)...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(MatchRegexp(`waiting for apid to be ready: 1 error occurred:\s+\* ` + regexp.QuoteMeta(unreachable) + `: rpc error: code = Unavailable`))
			g.Expect(out).To(ContainSubstring("healthcheck error: rpc error: code = DeadlineExceeded"))
			g.Expect(out).NotTo(ContainSubstring("waiting for apid to be ready: OK"))
			// Only a control-plane node runs the cluster's checks.
			out, err = c.run(on(worker, "health", "--wait-timeout", "10s")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring("cluster health check is only available on control plane nodes"))
		}},
		{"read", func(g Gomega) {
			out := c.ok(g, on(worker, "read", "/proc/sys/kernel/random/boot_id")...)
			g.Expect(out).To(MatchRegexp(`^[0-9a-f-]{36}\n$`))
			out = c.ok(g, on(controlPlanes[0], "read", "/system/state/config.yaml")...)
			g.Expect(out).To(ContainSubstring("hostname: cp-0"))
			out, err := c.run(on(worker, "read", "/etc/nosuchfile")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring("code = NotFound desc = stat /etc/nosuchfile: no such file or directory"))
		}},
		{"list", func(g Gomega) {
			out := c.ok(g, on(controlPlanes[0], "list", "/var/lib/etcd", "-r")...)
			// NODE  NAME: etcd's real data directory.
			g.Expect(out).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(controlPlanes[0]) + `\s+member/snap/db$`))
			g.Expect(out).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(controlPlanes[0]) + `\s+member/wal$`))
			out = c.ok(g, on(controlPlanes[0], "list", "/")...)
			g.Expect(out).To(MatchRegexp(`(?m)\s+etc$`))
			g.Expect(out).NotTo(ContainSubstring("os-release"), "without -r only the root's children")
		}},
		{"logs", func(g Gomega) {
			// machined's log is the node's; etcd's is the etcd server's own.
			out := c.ok(g, on(controlPlanes[0], "logs", "machined")...)
			g.Expect(out).To(ContainSubstring("Bootstrapped etcd member=cp-0"))
			out = c.ok(g, on(controlPlanes[0], "logs", "etcd", "--tail", "5")...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			g.Expect(lines).To(HaveLen(5))
			g.Expect(lines).To(HaveEach(ContainSubstring(`"level":`)))
			out, err := c.run(on(controlPlanes[0], "logs", "nosuchservice")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring(`code = Unknown desc = log "nosuchservice" was not registered`))
		}},
		{"dmesg", func(g Gomega) {
			out := c.ok(g, on(controlPlanes[0], "dmesg")...)
			g.Expect(out).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(controlPlanes[0]) + `: daemon:\s+info: \[\S+\]: \[talos\] Bootstrapped etcd member=cp-0$`))
		}},
		{"apply-config", func(g Gomega) {
			file := func(name string, patches ...bootstrapv1.ConfigPatch) string {
				path := filepath.Join(dir, name+".yaml")
				g.Expect(os.WriteFile(path, workerConfig(t, patches...), 0o600)).To(Succeed())
				return path
			}
			apply := func(path string, args ...string) (string, error) {
				return c.run(append(on(worker, "apply-config", "--file", path), args...)...)
			}
			labelled := file("labelled", label("conformance", "no-reboot"))
			// A dry run says which mode it would take and shows the diff; nothing changes.
			out, err := apply(labelled, "--mode", "no-reboot", "--dry-run")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:"))
			g.Expect(out).To(MatchRegexp(`(?m)^\+\s+conformance: no-reboot$`))
			g.Expect(nodeLabels(g, dir)).NotTo(HaveKey("conformance"))
			// no-reboot: applied at once; the Node gets the label.
			out, err = apply(labelled, "--mode", "no-reboot")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("Applied configuration without a reboot"))
			g.Eventually(func(g Gomega) map[string]string { return nodeLabels(g, dir) }).
				WithTimeout(30 * time.Second).WithPolling(time.Second).Should(HaveKeyWithValue("conformance", "no-reboot"))
			// What needs a reboot (the machine's environment) is refused in no-reboot mode,
			// with Talos' message and the diff.
			env := bootstrapv1.ConfigPatch{Op: "add", Path: "/machine/env", Value: &apiextensionsv1.JSON{Raw: []byte(`{"CONFORMANCE":"reboot"}`)}}
			withEnv := file("env", label("conformance", "no-reboot"), env)
			out, err = apply(withEnv, "--mode", "no-reboot")
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring("code = InvalidArgument desc = this config change can't be applied in immediate mode"))
			g.Expect(out).To(MatchRegexp(`(?m)^\+\s+CONFORMANCE: reboot$`))
			// staged: kept for the next boot, not applied now.
			out, err = apply(withEnv, "--mode", "staged")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("Staged configuration to be applied after the next reboot"))
			g.Expect(c.ok(g, on(worker, "read", "/system/state/config.yaml")...)).NotTo(ContainSubstring("CONFORMANCE"))
			// try: applied at once and rolled back after the timeout.
			tried := file("tried", label("conformance", "try"))
			out, err = apply(tried, "--mode", "try", "--timeout", "5s")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("The config is applied in 'try' mode and will be automatically reverted back in 5s"))
			g.Eventually(func(g Gomega) map[string]string { return nodeLabels(g, dir) }).
				WithTimeout(30 * time.Second).WithPolling(time.Second).Should(HaveKeyWithValue("conformance", "try"))
			g.Eventually(func() string { return c.ok(g, on(worker, "read", "/system/state/config.yaml")...) }).
				WithTimeout(30 * time.Second).WithPolling(time.Second).Should(ContainSubstring("conformance: no-reboot"))
			// auto: a change that needs a reboot reboots the node into it.
			before := bootID(g, c, worker)
			out, err = apply(withEnv, "--mode", "auto")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("Applied configuration with a reboot: this config change can't be applied in immediate mode"))
			g.Eventually(func(g Gomega) {
				g.Expect(bootID(g, c, worker)).NotTo(Equal(before))
				g.Expect(c.ok(g, on(worker, "read", "/system/state/config.yaml")...)).To(ContainSubstring("CONFORMANCE: reboot"))
			}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		}},
		{"patch mc", func(g Gomega) {
			// A strategic merge patch: talosctl refuses JSON 6902 patches of a config with
			// several documents (Talon's carries a HostnameConfig), as it does with Talos.
			out := c.ok(g, on(worker, "patch", "mc", "--mode", "no-reboot", "--patch", `{"machine":{"nodeLabels":{"patched":"yes"}}}`)...)
			g.Expect(out).To(ContainSubstring("patched MachineConfigs.config.talos.dev/v1alpha1 at the node " + worker))
			g.Expect(out).To(ContainSubstring("Applied configuration without a reboot"))
			g.Eventually(func(g Gomega) map[string]string { return nodeLabels(g, dir) }).
				WithTimeout(time.Minute).WithPolling(time.Second).Should(HaveKeyWithValue("patched", "yes"))
		}},
		{"edit mc", func(g Gomega) {
			// talosctl opens the config in $EDITOR (here a script that renames the label
			// patched above) and applies what it saves.
			editor := filepath.Join(dir, "editor.sh")
			//nolint:gosec // the editor script must be executable
			g.Expect(os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/patched: \"yes\"/edited: \"yes\"/' \"$1\"\n"), 0o700)).To(Succeed())
			out, err := c.runWith([]string{"EDITOR=" + editor}, on(worker, "edit", "mc", "--mode", "no-reboot")...)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("Applied configuration without a reboot"))
			g.Eventually(func(g Gomega) map[string]string { return nodeLabels(g, dir) }).
				WithTimeout(time.Minute).WithPolling(time.Second).Should(HaveKeyWithValue("edited", "yes"))
		}},
		{"upgrade-k8s", func(g Gomega) {
			// talosctl 1.13 upgrades within the versions Talos 1.13 supports (up to 1.36):
			// a patch release, which the simulator runs with its v1.36 binaries.
			images := func(g Gomega) []string {
				pods, err := kube(g, dir).CoreV1().Pods(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{LabelSelector: "tier=control-plane"})
				g.Expect(err).NotTo(HaveOccurred())
				images := make([]string, 0, len(pods.Items))
				for _, pod := range pods.Items {
					images = append(images, pod.Spec.Containers[0].Image)
				}
				return images
			}
			kubelets := func(g Gomega) []string {
				nodes, err := kube(g, dir).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				versions := make([]string, 0, len(nodes.Items))
				for _, node := range nodes.Items {
					versions = append(versions, node.Status.NodeInfo.KubeletVersion)
				}
				return versions
			}
			out := c.ok(g, on(controlPlanes[0], "upgrade-k8s", "--to", "1.36.4", "--dry-run")...)
			g.Expect(out).To(ContainSubstring("automatically detected the lowest Kubernetes version 1.36.3"))
			g.Expect(out).To(ContainSubstring(`updating "kube-apiserver" to version "1.36.4"`))
			g.Expect(images(g)).To(HaveLen(9))
			g.Expect(images(g)).To(HaveEach(HaveSuffix(":v1.36.3")), "a dry run changes nothing")
			// The bootstrap manifests (the nodes' Manifest resources) are applied; talosctl is
			// not made to wait for kube-proxy and CoreDNS to be ready: the simulator runs no
			// workload Pods (docs/sim.md).
			out = c.ok(g, on(controlPlanes[0], "upgrade-k8s", "--to", "1.36.4", "--manifests-reconcile-timeout", "0")...)
			for _, address := range controlPlanes {
				g.Expect(out).To(ContainSubstring(fmt.Sprintf(`< %q: successfully updated`, address)))
			}
			g.Expect(images(g)).To(HaveEach(HaveSuffix(":v1.36.4")))
			g.Expect(kubelets(g)).To(HaveEach("v1.36.4"))
			g.Expect(kubelets(g)).To(HaveLen(4))
			proxy, err := kube(g, dir).AppsV1().DaemonSets(metav1.NamespaceSystem).Get(context.Background(), "kube-proxy", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred(), "talosctl applied the kube-proxy manifest")
			g.Expect(proxy.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":v1.36.4"))
		}},
		{"reboot", func(g Gomega) {
			// talosctl waits for the node to go down and come back ready with a new boot ID.
			before := bootID(g, c, worker)
			c.ok(g, on(worker, "reboot")...)
			g.Expect(bootID(g, c, worker)).NotTo(Equal(before))
			g.Expect(c.ok(g, on(worker, "get", "machinestatus", "-o", "yaml")...)).To(MatchRegexp(`(?m)^\s+ready: true$`))
		}},
		{"upgrade", func(g Gomega) {
			// Through LifecycleService: the installer image pulled, installed, the node drained
			// and rebooted by talosctl, which waits for it; the node runs the new version.
			before := bootID(g, c, worker)
			// The drain reads the kubeconfig from the endpoint: a control-plane node, as with Talos.
			out := c.ok(g, "-e", controlPlanes[0], "-n", worker, "upgrade", "--image", "ghcr.io/siderolabs/installer:v1.13.4")
			g.Expect(out).NotTo(ContainSubstring("legacy"))
			g.Expect(bootID(g, c, worker)).NotTo(Equal(before))
			g.Expect(c.ok(g, on(worker, "version")...)).To(MatchRegexp(`(?m)^Server:\n\s+NODE:\s+` + regexp.QuoteMeta(worker) + `\n\s+Tag:\s+v1\.13\.4$`))
			// Talos does not upgrade a node running as a container.
			out, err := c.run(on(controlPlanes[1], "upgrade", "--image", "ghcr.io/siderolabs/installer:v1.13.4", "--drain=false")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring("code = FailedPrecondition desc = upgrade is not supported in container mode"))
		}},
		{"reset", func(g Gomega) {
			out, err := c.run(on(worker, "reset", "--system-labels-to-wipe", "NOSUCH", "--graceful=false")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring(`failed to get volume status with label "NOSUCH"`))
			// Wiping EPHEMERAL alone keeps the config: the node comes back configured and its
			// kubelet joins again with a new certificate.
			before := bootID(g, c, worker)
			c.ok(g, on(worker, "reset", "--system-labels-to-wipe", "EPHEMERAL", "--reboot", "--graceful=false")...)
			g.Eventually(func(g Gomega) {
				g.Expect(bootID(g, c, worker)).NotTo(Equal(before))
				g.Expect(c.ok(g, on(worker, "get", "machinestatus", "-o", "yaml")...)).To(MatchRegexp(`(?m)^\s+ready: true$`))
			}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
			// The disk the node runs from is not wiped.
			out, err = c.run(on(worker, "wipe", "disk", "sda")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring(`code = FailedPrecondition desc = blockdevice "sda" is in use by volume`))
			// A full reset with a reboot: talosctl waits until the node answers in maintenance mode.
			c.ok(g, on(worker, "reset", "--reboot", "--graceful=false")...)
			out = c.ok(g, on(worker, "get", "disks", "--insecure")...)
			g.Expect(out).To(MatchRegexp(`(?m)^\s+runtime\s+Disk\s+sda\s`))
			g.Expect(out).To(MatchRegexp(`(?m)^\s+runtime\s+Disk\s+sdb\s`))
			// The reset kept the data disk; in maintenance mode it is wiped on request.
			g.Expect(filepath.Join(disks, "sdb", "data")).To(BeAnExistingFile())
			out, err = c.run(on(worker, "wipe", "disk", "sdz", "--insecure")...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out).To(ContainSubstring(`code = NotFound desc = blockdevice "sdz" not found`))
			c.ok(g, on(worker, "wipe", "disk", "sdb", "--insecure")...)
			g.Expect(filepath.Join(disks, "sdb", "data")).NotTo(BeAnExistingFile())
		}},
		{"etcd forfeit-leadership", func(g Gomega) {
			members, leader := etcdStatus(g, c)
			c.ok(g, on(members[leader], "etcd", "forfeit-leadership")...)
			g.Eventually(func(g Gomega) {
				_, now := etcdStatus(g, c)
				g.Expect(now).NotTo(Equal(leader), "another member leads")
			}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		}},
		{"etcd leave", func(g Gomega) {
			// Right after the leadership change above etcd refuses membership changes for a
			// moment ("etcdserver: unhealthy cluster"): like machined, the node retries.
			c.ok(g, on(controlPlanes[2], "etcd", "leave")...)
			g.Eventually(func(g Gomega) {
				out := c.ok(g, on(controlPlanes[0], "etcd", "members")...)
				g.Expect(out).NotTo(ContainSubstring("cp-2"))
			}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
			out := c.ok(g, on(controlPlanes[2], "service", "etcd")...)
			g.Expect(out).To(MatchRegexp(`(?m)^STATE\s+Finished$`))
			g.Expect(out).To(ContainSubstring("[Finished]: Service finished successfully"))
		}},
		{"etcd remove-member", func(g Gomega) {
			out := c.ok(g, on(controlPlanes[0], "etcd", "members")...)
			row := regexp.MustCompile(`(?m)^\S+\s+([0-9a-f]{16})\s+cp-1\s`).FindStringSubmatch(out)
			g.Expect(row).NotTo(BeNil())
			c.ok(g, on(controlPlanes[0], "etcd", "remove-member", row[1])...)
			out = c.ok(g, on(controlPlanes[0], "etcd", "members")...)
			g.Expect(out).NotTo(ContainSubstring("cp-1"))
			g.Expect(out).To(ContainSubstring("cp-0"))
		}},
		{"shutdown", func(g Gomega) {
			// cp-1 left etcd above; talosctl waits until it has stopped its services.
			c.ok(g, on(controlPlanes[1], "shutdown")...)
			g.Eventually(func() error {
				_, err := c.run(on(controlPlanes[1], "version")...)
				return err
			}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(HaveOccurred())
		}},
	}
	for _, step := range steps {
		if !t.Run(step.name, func(t *testing.T) { step.run(NewWithT(t)) }) {
			t.Fatalf("%q failed; the later steps depend on it", step.name)
		}
	}
}

// applyInsecure writes data to a file and applies it with apply-config --insecure to the
// node at address, which waits in maintenance mode.
func applyInsecure(t *testing.T, g Gomega, c *talosctl, dir, address string, data []byte) {
	t.Helper()
	file := filepath.Join(dir, address+".yaml")
	g.Expect(os.WriteFile(file, data, 0o600)).To(Succeed())
	g.Eventually(func() error {
		_, err := c.run("apply-config", "--insecure", "-e", address, "-n", address, "--file", file)
		return err
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// workerConfig is the worker's config (a bare-metal node installing to /dev/sda) with
// patches.
func workerConfig(t *testing.T, patches ...bootstrapv1.ConfigPatch) []byte {
	t.Helper()
	install := bootstrapv1.ConfigPatch{Op: "add", Path: "/machine/install/disk", Value: &apiextensionsv1.JSON{Raw: []byte(`"/dev/sda"`)}}
	return simtest.RenderFor(t, configgen.ModeMetal, bootstrapv1.GenerateTypeWorker, "worker-0", controlPlanes[0], append([]bootstrapv1.ConfigPatch{install}, patches...)...)
}

// label is a patch that sets a node label in machine.nodeLabels.
func label(key, value string) bootstrapv1.ConfigPatch {
	return bootstrapv1.ConfigPatch{Op: "add", Path: "/machine/nodeLabels", Value: &apiextensionsv1.JSON{Raw: []byte(`{"` + key + `":"` + value + `"}`)}}
}

// kube is a Kubernetes client with the kubeconfig talosctl wrote.
func kube(g Gomega, dir string) *kubernetes.Clientset {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	c, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// nodeLabels are the labels of the worker's Node.
func nodeLabels(g Gomega, dir string) map[string]string {
	node, err := kube(g, dir).CoreV1().Nodes().Get(context.Background(), "worker-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return node.Labels
}

// bootID is the boot ID of the node at address, which talosctl compares across a reboot.
func bootID(g Gomega, c *talosctl, address string) string {
	var id string
	g.Eventually(func() error {
		out, err := c.run(on(address, "read", "/proc/sys/kernel/random/boot_id")...)
		id = strings.TrimSpace(out)
		return err
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return id
}

// etcdStatus runs etcd status on every control-plane node and returns the node of each
// member ID and the leader they all name.
func etcdStatus(g Gomega, c *talosctl) (members map[string]string, leader string) {
	members = map[string]string{}
	leaders := map[string]bool{}
	for _, address := range controlPlanes {
		out := c.ok(g, on(address, "etcd", "status")...)
		// NODE  MEMBER  DB SIZE  IN USE  LEADER  RAFT INDEX  RAFT TERM  RAFT APPLIED INDEX  LEARNER  ...
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(address) + `\s+([0-9a-f]{16})\s+.*?\s([0-9a-f]{16})\s+\d+\s+\d+\s+\d+\s+false\b`).FindStringSubmatch(out)
		g.Expect(row).NotTo(BeNil(), "a status row for %s", address)
		members[row[1]] = address
		leaders[row[2]] = true
	}
	g.Expect(leaders).To(HaveLen(1), "every member names the same leader")
	for id := range leaders {
		leader = id
	}
	return members, leader
}
