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
	ctx, cancel := context.WithTimeout(c.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.binary, append([]string{"--talosconfig", c.config}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	c.t.Logf("talosctl %s:\n%s", strings.Join(args, " "), out.String())
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
func TestTalosctl(t *testing.T) {
	binary, err := envtest.Binary("talosctl")
	require.Layer(t, Layer, err)
	_, err = envtest.Binary("kube-apiserver")
	require.Layer(t, envtest.Layer, err)

	dir := t.TempDir()
	for _, address := range append(append([]string(nil), controlPlanes...), worker) {
		n, err := sim.NewNode(sim.Options{
			Address: address, StateDir: t.TempDir(), BinDir: envtest.BinDir(), RebootDelay: 500 * time.Millisecond,
			Log: testr.NewWithOptions(t, testr.Options{Verbosity: 1}),
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
			applyInsecure(t, g, c, dir, worker, simtest.Render(t, bootstrapv1.GenerateTypeWorker, "worker-0", controlPlanes[0]))
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
