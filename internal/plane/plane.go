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

package plane

import (
	"cmp"
	"context"
	stdx509 "crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/siderolabs/crypto/x509"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/talon-capi/talon/internal/pki"
)

// Binaries a plane runs from its bin directory.
const (
	EtcdBinary              = "etcd"
	APIServerBinary         = "kube-apiserver"
	ControllerManagerBinary = "kube-controller-manager"
)

// stateFile is where a plane records its processes and ports, inside its directory.
const stateFile = "plane.json"

// serviceCIDR is the plane's service range; nothing routes it (the plane runs no Pods).
const serviceCIDR = "10.96.0.0/24"

// ErrNotFound is returned by Open when a directory holds no plane.
var ErrNotFound = errors.New("no management plane")

// Plane is a running local management plane.
type Plane struct {
	dir   string
	state state
	log   io.Writer
	// nodeLock is the lock a plane with a node holds from Start to Stop (see nodeLockPath).
	nodeLock *os.File
	// callerLocked says the caller of Start holds nodeLock and releases it (Options.nodeLock).
	callerLocked bool
}

// state is what plane.json holds.
type state struct {
	BinDir        string    `json:"binDir"`
	APIServerPort int       `json:"apiServerPort"`
	Processes     []Process `json:"processes"`
	Managers      []Manager `json:"managers,omitempty"`
	// External is set for a plane attached to a cluster the plane did not start.
	External bool `json:"external,omitempty"`
	// Node is set for a plane with a node (Options.Node).
	Node *nodeState `json:"node,omitempty"`
}

// Options configure Start.
type Options struct {
	// Dir holds the plane's files; it is created if needed and must not hold a running plane.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and clusterctl.
	BinDir string
	// Log receives one line per step; nil discards them.
	Log io.Writer
	// Node makes the plane a real single-node Kubernetes cluster: kube-scheduler, a
	// kubelet whose Pods are containers of this machine's Docker Engine (through
	// cri-dockerd, on Docker's default bridge) and kube-proxy, with the binaries in BinDir.
	// Providers then run as Deployments, as users run them. It changes the host while it
	// runs (iptables chains, a few sysctls, mounts), and Stop puts all of it back; one
	// Docker Engine runs one such node.
	Node bool
	// PauseImage is the Pod sandbox image of a node; DefaultPauseImage if empty.
	PauseImage string
	// nodeLock is the node lock (takeNodeLock) when the caller holds it already and keeps it
	// past Stop: the package's tests hold it while they look at the host a node changes.
	nodeLock *os.File
}

// Start runs etcd, kube-apiserver and kube-controller-manager and returns once the API
// server answers and the controller manager works. On failure it stops what it started.
func Start(ctx context.Context, opts Options) (_ *Plane, err error) {
	if old, err := Open(opts.Dir, opts.Log); err == nil {
		if old.Running() {
			return nil, fmt.Errorf("a management plane already runs from %s (API server on port %d): use it or stop it first", opts.Dir, old.state.APIServerPort)
		}
		// Its record of the host is needed to put the host back: not removed before that.
		if node := old.state.Node; node != nil && !node.Cleaned {
			if err := old.Stop(ctx); err != nil {
				return nil, fmt.Errorf("the plane that ran from %s left its node's changes on this host, and putting them back failed: %w", opts.Dir, err)
			}
		}
	}
	binDir, err := filepath.Abs(opts.BinDir)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{EtcdBinary, APIServerBinary, ControllerManagerBinary} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run 'make tools' first", name, binDir)
		}
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	// A stopped plane's files go: its etcd data is of no use without its certificates' CA.
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &Plane{dir: dir, state: state{BinDir: binDir}, log: opts.Log, nodeLock: opts.nodeLock, callerLocked: opts.nodeLock != nil}
	if p.log == nil {
		p.log = io.Discard
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Stop(context.WithoutCancel(ctx)))
		}
	}()
	pauseImage := cmp.Or(opts.PauseImage, DefaultPauseImage)
	if opts.Node {
		if err := p.prepareNode(ctx, pauseImage); err != nil {
			return nil, err
		}
	}
	if err := p.writePKI(); err != nil {
		return nil, err
	}
	if err := p.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := p.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := p.startControllerManager(ctx); err != nil {
		return nil, err
	}
	if opts.Node {
		if err := p.startNode(ctx, pauseImage); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Attach makes a plane of the existing cluster of kubeconfig: it starts no etcd or API
// server, but keeps its directory, certificates and managers like a plane it started, so
// that InstallCertManagerAPI, Clusterctl and StartManager work the same. The cluster's API
// server must reach this machine's 127.0.0.1 to call the local managers' webhooks, as one
// running on this machine does. Remove stops the managers and leaves the cluster running.
func Attach(ctx context.Context, opts Options, kubeconfig string) (*Plane, error) {
	if running, err := Open(opts.Dir, opts.Log); err == nil && running.Running() {
		return nil, fmt.Errorf("a management plane already runs from %s: use it or stop it first", opts.Dir)
	}
	binDir, err := filepath.Abs(opts.BinDir)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	config, err := os.ReadFile(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to read the kubeconfig of the cluster to attach to: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &Plane{dir: dir, state: state{BinDir: binDir, External: true}, log: opts.Log}
	if p.log == nil {
		p.log = io.Discard
	}
	if err := errors.Join(p.writePKI(), os.WriteFile(p.Kubeconfig(), config, 0o600), p.save()); err != nil {
		return nil, err
	}
	c, err := p.Client(client.Options{})
	if err != nil {
		return nil, err
	}
	if err := c.List(ctx, &corev1.NamespaceList{}, client.Limit(1)); err != nil {
		return nil, fmt.Errorf("cannot reach the cluster of %s: %w", kubeconfig, err)
	}
	p.logf("Attached to the cluster of %s\n", kubeconfig)
	return p, nil
}

// External says whether the plane is attached to a cluster it did not start.
func (p *Plane) External() bool { return p.state.External }

// Open finds the plane recorded in dir, running or not; ErrNotFound if there is none.
func Open(dir string, log io.Writer) (*Plane, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(abs, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNotFound, abs)
	}
	if err != nil {
		return nil, err
	}
	p := &Plane{dir: abs, log: log}
	if p.log == nil {
		p.log = io.Discard
	}
	if err := json.Unmarshal(data, &p.state); err != nil {
		return nil, fmt.Errorf("%s is not a management plane's state: %w", filepath.Join(abs, stateFile), err)
	}
	return p, nil
}

// Dir is the plane's directory.
func (p *Plane) Dir() string { return p.dir }

// BinDir is where the plane's programs come from.
func (p *Plane) BinDir() string { return p.state.BinDir }

// Running says whether the API server of the plane runs (for an attached plane: whether
// its managers do).
func (p *Plane) Running() bool {
	if p.state.External {
		for _, proc := range p.state.Processes {
			if !proc.Alive() {
				return false
			}
		}
		return len(p.state.Processes) > 0
	}
	for _, proc := range p.state.Processes {
		if proc.Name == APIServerBinary {
			return proc.Alive()
		}
	}
	return false
}

// Processes are the processes the plane started, in start order.
func (p *Plane) Processes() []Process { return append([]Process(nil), p.state.Processes...) }

// Kubeconfig is the path of a cluster-admin kubeconfig for the plane's API server.
func (p *Plane) Kubeconfig() string { return filepath.Join(p.dir, "kubeconfig") }

// RESTConfig is a cluster-admin client configuration for the plane's API server.
func (p *Plane) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", p.Kubeconfig())
}

// Client is a cluster-admin client of the plane's API server with scheme's types.
func (p *Plane) Client(opts client.Options) (client.Client, error) {
	cfg, err := p.RESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, opts)
}

// Stop stops every process of the plane, managers first, and keeps its files. A plane
// with a node also removes its Pods' containers and puts the host back as it was.
func (p *Plane) Stop(ctx context.Context) error {
	var errs []error
	for i := len(p.state.Processes) - 1; i >= 0; i-- {
		proc := p.state.Processes[i]
		if proc.Alive() {
			p.logf("Stopping %s (pid %d)\n", proc.Name, proc.PID)
		}
		errs = append(errs, proc.stop(ctx, 20*time.Second))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return p.cleanNode(ctx)
}

// Remove stops the plane and deletes its directory.
func (p *Plane) Remove(ctx context.Context) error {
	if err := p.Stop(ctx); err != nil {
		return err
	}
	return os.RemoveAll(p.dir)
}

// logf reports a step to the plane's log writer.
func (p *Plane) logf(format string, args ...any) { _, _ = fmt.Fprintf(p.log, format, args...) }

// Logf writes a line about p's providers to its log.
func (p *Plane) Logf(format string, args ...any) { p.logf(format, args...) }

// save records the plane's state in its directory.
func (p *Plane) save() error {
	data, err := json.MarshalIndent(p.state, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.dir, stateFile), data, 0o600)
}

// run starts a process of the plane and records it, in place of an earlier process of the
// same name that has exited; it refuses to start a second one while that process runs.
func (p *Plane) run(name, path string, args, env []string) (Process, error) {
	i := slices.IndexFunc(p.state.Processes, func(proc Process) bool { return proc.Name == name })
	if i >= 0 && p.state.Processes[i].Alive() {
		return Process{}, fmt.Errorf("%s already runs (pid %d)", name, p.state.Processes[i].PID)
	}
	proc, err := spawn(p.dir, name, path, args, env)
	if err != nil {
		return proc, err
	}
	if i >= 0 {
		p.state.Processes[i] = proc
	} else {
		p.state.Processes = append(p.state.Processes, proc)
	}
	return proc, p.save()
}

// pki is where the plane's certificates live.
func (p *Plane) pki(name string) string { return filepath.Join(p.dir, "pki", name) }

// WebhookCertDir holds tls.crt and tls.key, the serving certificate every local manager's
// webhook server uses (for 127.0.0.1 and localhost).
func (p *Plane) WebhookCertDir() string { return filepath.Join(p.dir, "pki", "webhook") }

// writePKI makes the plane's CA and, signed by it, the API server's serving certificate, an
// admin client certificate, the webhook serving certificate and the service-account key.
func (p *Plane) writePKI() error {
	ca, err := pki.NewCA("talon-local-plane")
	if err != nil {
		return err
	}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)}
	serving, err := pki.Issue(ca, "kube-apiserver", append(loopback, p.nodeSANs()...),
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		[]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth})
	if err != nil {
		return err
	}
	admin, err := pki.Issue(ca, "talon-admin", nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}, "system:masters")
	if err != nil {
		return err
	}
	webhook, err := pki.Issue(ca, "talon-local-webhooks", loopback[:1], []string{"localhost"}, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth})
	if err != nil {
		return err
	}
	sa, err := x509.NewRSAKey()
	if err != nil {
		return err
	}
	// A node's kubelet is who the Node authorizer and NodeRestriction know it as.
	kubelet, err := pki.Issue(ca, "system:node:"+NodeName, nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}, "system:nodes")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		p.pki("kubelet.crt"): kubelet.Crt, p.pki("kubelet.key"): kubelet.Key,
		p.pki("ca.crt"): ca.Crt, p.pki("ca.key"): ca.Key,
		p.pki("apiserver.crt"): serving.Crt, p.pki("apiserver.key"): serving.Key,
		p.pki("admin.crt"): admin.Crt, p.pki("admin.key"): admin.Key,
		p.pki("sa.key"): sa.KeyPEM,
		filepath.Join(p.WebhookCertDir(), "tls.crt"): webhook.Crt, filepath.Join(p.WebhookCertDir(), "tls.key"): webhook.Key,
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// CA is the plane's certificate authority (PEM), which signs the API server's and the
// webhooks' serving certificates.
func (p *Plane) CA() ([]byte, error) { return os.ReadFile(p.pki("ca.crt")) }

// startEtcd runs a single-member etcd on loopback ports.
func (p *Plane) startEtcd(ctx context.Context) error {
	clientPort, err := freePort(ctx)
	if err != nil {
		return err
	}
	peerPort, err := freePort(ctx)
	if err != nil {
		return err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p.logf("Starting etcd on %s\n", clientURL)
	proc, err := p.run(EtcdBinary, filepath.Join(p.state.BinDir, EtcdBinary), []string{
		"--name=talon", "--data-dir=" + filepath.Join(p.dir, "etcd"),
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=talon=" + peerURL,
		// A local plane trades durability for speed, as envtest does.
		"--unsafe-no-fsync=true",
	}, nil)
	if err != nil {
		return err
	}
	err = waitFor(ctx, proc, 60*time.Second, "healthy", func(ctx context.Context) error {
		return answersOK(ctx, clientURL+"/health")
	})
	if err != nil {
		return err
	}
	// The API server finds etcd here.
	return os.WriteFile(filepath.Join(p.dir, "etcd-url"), []byte(clientURL), 0o600)
}

// startAPIServer runs kube-apiserver on a loopback port against the plane's etcd and writes
// the admin kubeconfig.
func (p *Plane) startAPIServer(ctx context.Context) error {
	etcdURL, err := os.ReadFile(filepath.Join(p.dir, "etcd-url"))
	if err != nil {
		return err
	}
	port, err := freePort(ctx)
	if err != nil {
		return err
	}
	p.state.APIServerPort = port
	server := "https://127.0.0.1:" + strconv.Itoa(port)
	p.logf("Starting kube-apiserver on %s\n", server)
	bind, advertise, authorization := "127.0.0.1", "127.0.0.1", "RBAC"
	if node := p.state.Node; node != nil {
		// Pods reach the API server at the host's address, behind the kubernetes Service,
		// and the kubelet is authorized as a node.
		bind, advertise, authorization = "0.0.0.0", node.HostIP, "Node,RBAC"
	}
	args := []string{
		"--etcd-servers=" + string(etcdURL),
		"--bind-address=" + bind, "--advertise-address=" + advertise, "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + p.pki("apiserver.crt"), "--tls-private-key-file=" + p.pki("apiserver.key"),
		"--client-ca-file=" + p.pki("ca.crt"),
		"--service-account-key-file=" + p.pki("sa.key"), "--service-account-signing-key-file=" + p.pki("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=" + authorization, "--allow-privileged=true",
		"--profiling=false", "--v=0",
	}
	if p.state.Node != nil {
		// The API server reaches the kubelet (logs, exec) at the node's address.
		args = append(args, "--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate="+p.pki("admin.crt"), "--kubelet-client-key="+p.pki("admin.key"),
			"--kubelet-preferred-address-types=InternalIP,Hostname")
	}
	proc, err := p.run(APIServerBinary, filepath.Join(p.state.BinDir, APIServerBinary), args, nil)
	if err != nil {
		return err
	}
	if err := p.writeKubeconfig(p.Kubeconfig(), server, "talon-admin", "admin"); err != nil {
		return err
	}
	if p.state.Node != nil {
		if err := p.writeKubeconfig(filepath.Join(p.dir, "kubelet.kubeconfig"), server, "system:node:"+NodeName, "kubelet"); err != nil {
			return err
		}
	}
	if err := p.save(); err != nil {
		return err
	}
	cfg, err := p.RESTConfig()
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	rc, err := rest.UnversionedRESTClientFor(withCodecs(cfg))
	if err != nil {
		return err
	}
	return waitFor(ctx, proc, 90*time.Second, "ready", func(ctx context.Context) error {
		body, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return err
		}
		if string(body) != "ok" {
			return fmt.Errorf("/readyz: %s", body)
		}
		return nil
	})
}

// startControllerManager runs kube-controller-manager (garbage collection, namespace
// deletion, service-account tokens) and waits until it has published the root CA into the
// default namespace, which shows that its controllers run.
func (p *Plane) startControllerManager(ctx context.Context) error {
	p.logf("Starting kube-controller-manager\n")
	proc, err := p.run(ControllerManagerBinary, filepath.Join(p.state.BinDir, ControllerManagerBinary), []string{
		"--kubeconfig=" + p.Kubeconfig(),
		// The plane is reached through its kubeconfig only.
		"--secure-port=0",
		"--service-account-private-key-file=" + p.pki("sa.key"), "--root-ca-file=" + p.pki("ca.crt"),
		"--cluster-signing-cert-file=" + p.pki("ca.crt"), "--cluster-signing-key-file=" + p.pki("ca.key"),
		"--leader-elect=false", "--profiling=false", "--v=0",
		// Each controller acts as its own service account, as in a real cluster (it
		// matters to RBAC only where Pods run).
		"--use-service-account-credentials=" + strconv.FormatBool(p.state.Node != nil),
	}, nil)
	if err != nil {
		return err
	}
	c, err := p.Client(client.Options{})
	if err != nil {
		return err
	}
	return waitFor(ctx, proc, 90*time.Second, "running its controllers", func(ctx context.Context) error {
		return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kube-root-ca.crt"}, &corev1.ConfigMap{})
	})
}

// writeKubeconfig writes a kubeconfig for server with the plane's client certificate
// pki/<cert>.crt (and .key) as user.
func (p *Plane) writeKubeconfig(path, server, user, cert string) error {
	ca, err := p.CA()
	if err != nil {
		return err
	}
	kubeconfig, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"talon-local": {Server: server, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {ClientCertificate: p.pki(cert + ".crt"), ClientKey: p.pki(cert + ".key")}},
		Contexts:       map[string]*clientcmdapi.Context{"talon-local": {Cluster: "talon-local", AuthInfo: user}},
		CurrentContext: "talon-local",
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, kubeconfig, 0o600)
}

// withCodecs fills in what an unversioned REST client needs.
func withCodecs(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}
