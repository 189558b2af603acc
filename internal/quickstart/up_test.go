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

package quickstart

import (
	"io"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestBadInput: what a user can get wrong on the command line gets an error that says what
// to do, before anything is started or deleted.
func TestBadInput(t *testing.T) {
	out := t.TempDir()
	up := func(change func(*Options)) error {
		o := Options{Name: "demo", Namespace: "default", ControlPlanes: 1, Workers: 2, KubernetesVersion: "v1.36.3",
			BinDir: t.TempDir(), ClusterctlConfig: "none.yaml", OutDir: out, Out: io.Discard}
		change(&o)
		_, err := Up(t.Context(), o)
		return err
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"even control planes", up(func(o *Options) { o.ControlPlanes = 2 }), "--control-planes must be odd and at least 1 (etcd needs a majority), got 2"},
		{"no control plane", up(func(o *Options) { o.ControlPlanes = 0 }), "--control-planes must be odd and at least 1"},
		{"negative workers", up(func(o *Options) { o.Workers = -1 }), "--workers must not be negative, got -1"},
		{"unknown runtime", up(func(o *Options) { o.Runtime = "podman" }), `--runtime must be docker, sim or sim-light, got "podman"`},
		{"tools not built", up(func(o *Options) { o.Runtime = RuntimeSim }), "clusterctl not found in"},
		{"an API port out of range", up(func(o *Options) { o.APIPort = 70000 }), "--api-port must be a port number (1-65535), got 70000"},
		{"a subnet that is no CIDR", up(func(o *Options) { o.Subnet = "172.30.0.0" }), "--subnet must be a CIDR such as 172.30.0.0/24"},
		{"an API port for simulated nodes", up(func(o *Options) { o.Runtime, o.APIPort = RuntimeSim, 6444 }), "--api-port and --subnet apply to Docker nodes"},
		{"managers as Pods for simulated nodes", up(func(o *Options) { o.Runtime, o.ManagersAsPods = RuntimeSim, true }), "--managers pods runs the managers in a local kubelet-run cluster, for Docker nodes"},
		{"managers as Pods on a cluster of one's own", up(func(o *Options) { o.Runtime, o.ManagersAsPods, o.Kubeconfig = RuntimeSim, true, "kubeconfig" }), "and without --kubeconfig"},
		{"down of an unknown cluster", Down(t.Context(), DownOptions{OutDir: out, Name: "nope", Out: io.Discard}), `talon up made no cluster "nope" in`},
		{"status of an unknown cluster", func() error { _, err := StatusOf(t.Context(), out, "nope"); return err }(), `talon up made no cluster "nope" in`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(tt.err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
	t.Run("down with nothing made is a no-op", func(t *testing.T) {
		NewWithT(t).Expect(Down(t.Context(), DownOptions{OutDir: t.TempDir(), Out: io.Discard})).To(Succeed())
	})
}

// TestWithHostContext: every context gets a twin named <context>-host that reaches the
// API server at the published host port with the same credentials and CA; adding it again
// changes nothing.
func TestWithHostContext(t *testing.T) {
	g := NewWithT(t)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["demo"] = &clientcmdapi.Cluster{Server: "https://10.5.0.2:6443", CertificateAuthorityData: []byte("ca")}
	cfg.AuthInfos["admin@demo"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("crt"), ClientKeyData: []byte("key")}
	cfg.Contexts["admin@demo"] = &clientcmdapi.Context{Cluster: "demo", AuthInfo: "admin@demo"}
	cfg.CurrentContext = "admin@demo"
	data, err := clientcmd.Write(*cfg)
	g.Expect(err).NotTo(HaveOccurred())

	withHost, err := WithHostContext(data, 6444)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := clientcmd.Load(withHost)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.CurrentContext).To(Equal("admin@demo"), "the default context is unchanged")
	g.Expect(got.Clusters["demo"].Server).To(Equal("https://10.5.0.2:6443"))
	g.Expect(got.Contexts).To(HaveKeyWithValue("admin@demo-host", HaveField("AuthInfo", "admin@demo")))
	host := got.Clusters[got.Contexts["admin@demo-host"].Cluster]
	g.Expect(host.Server).To(Equal("https://127.0.0.1:6444"))
	g.Expect(host.CertificateAuthorityData).To(Equal([]byte("ca")))
	g.Expect(host.InsecureSkipTLSVerify).To(BeFalse())

	again, err := WithHostContext(withHost, 6444)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(withHost))
}
