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

package talosclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosclient "github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// APIPort is the port of the Talos API on every node.
const APIPort = 50000

// certificateLifetime is how long the client certificates minted for one client live.
const certificateLifetime = time.Hour

// callTimeout bounds every call: a node that does not answer must not hold a reconcile.
const callTimeout = 10 * time.Second

// Member is an etcd member as a node lists it.
type Member struct {
	ID       uint64
	Name     string
	Learner  bool
	PeerURLs []string
}

// MemberStatus is what a member says of itself.
type MemberStatus struct {
	ID     uint64
	Leader uint64
	Errors []string
}

// Client talks to one Talos node.
type Client interface {
	// Version is the Talos version the node runs.
	Version(ctx context.Context) (string, error)
	// Bootstrap starts etcd on the node as the cluster's first member. ErrAlreadyBootstrapped
	// when the node already has etcd data (Talos answers AlreadyExists); ErrNotReady when the
	// node cannot bootstrap yet (FailedPrecondition: still booting, time not in sync).
	Bootstrap(ctx context.Context) error
	// EtcdMembers lists the members of etcd as the node's own member sees them (Talos'
	// query_local: without it Talos asks any control-plane node, and a node of a second etcd
	// cluster could answer with the first one's list).
	EtcdMembers(ctx context.Context) ([]Member, error)
	// EtcdStatus is the node's own member status. Talos reads it from the node's local etcd,
	// so it fails on a node whose etcd is not serving.
	EtcdStatus(ctx context.Context) (MemberStatus, error)
	// EtcdRemoveMember removes a member by ID, through this node.
	EtcdRemoveMember(ctx context.Context, id uint64) error
	// EtcdForfeitLeadership moves leadership away from the node's member if it leads.
	EtcdForfeitLeadership(ctx context.Context) error
	// EtcdSnapshot streams a snapshot of the node's etcd member (Talos' EtcdSnapshot, what
	// talosctl etcd snapshot saves), for EtcdRecover. The caller reads it to the end, which
	// fails when the node has no member serving, and closes it; the transfer is bounded by
	// ctx and transferTimeout.
	EtcdSnapshot(ctx context.Context) (io.ReadCloser, error)
	// EtcdRecover uploads an etcd snapshot to the node (/var/lib/etcd.snapshot) for
	// BootstrapRecover; a new upload replaces the last. Talos answers FailedPrecondition
	// before the node can take it and Unimplemented on a worker.
	EtcdRecover(ctx context.Context, snapshot io.Reader) error
	// BootstrapRecover bootstraps etcd on the node from the snapshot EtcdRecover uploaded:
	// Talos restores the data directory from it as a cluster of this one member and starts
	// etcd on it (talosctl bootstrap --recover-from). skipHashCheck accepts a snapshot
	// without etcd's integrity hash (a copy of a data directory's db file). Talos answers
	// before it restores, so BootstrapRecover then waits for the etcd service: running, or
	// failed, which is ErrRecoveryFailed with the service's reason (no snapshot uploaded, a
	// truncated or corrupt one), after which the node can be bootstrapped again and the
	// snapshot stays. ErrAlreadyBootstrapped and ErrNotReady as for Bootstrap.
	BootstrapRecover(ctx context.Context, skipHashCheck bool) error
	// BootID identifies the node's current boot (/proc/sys/kernel/random/boot_id): it
	// changes at every reboot, so a caller that saw it change knows the node rebooted.
	BootID(ctx context.Context) (string, error)
	// BootstrapManifests are the objects of the bootstrap manifests Talos renders from the
	// node's config (its Manifest resources: kube-proxy, CoreDNS and the rest), in the order
	// of their IDs, as talosctl upgrade-k8s reads them to sync them into the cluster. Talos
	// creates them at bootstrap and never updates them.
	BootstrapManifests(ctx context.Context) ([]*unstructured.Unstructured, error)
	// MachineConfig is the machine config the node runs, as Talos keeps it on its STATE
	// partition.
	MachineConfig(ctx context.Context) ([]byte, error)
	// InstallUpgrade pulls installer into the system namespace of the node's CRI containerd
	// (talosctl upgrade's default) and runs the image the pull pinned (by digest) through
	// LifecycleService.Upgrade, which installs its Talos version for the next boot. It does
	// not drain the node, check etcd or reboot: the node runs its current version until
	// Reboot. It blocks until the installer exits (at most
	// upgradeTimeout). Talos before 1.13 has no LifecycleService and answers Unimplemented.
	// An installer that fails is an *InstallerError with its exit code and last lines.
	InstallUpgrade(ctx context.Context, installer string) error
	// Reboot reboots the node; Talos answers before the node goes down.
	Reboot(ctx context.Context) error
	// ApplyConfiguration makes config the node's machine config: at once without a reboot
	// (Talos' NO_REBOOT mode, which Talos 1.14 also uses for AUTO), or, staged, at the node's
	// next boot (STAGED: the caller reboots it). Talos before 1.14 refuses a config it cannot
	// apply without a reboot (ErrRebootRequired); every version refuses one that does not
	// validate (InvalidArgument).
	ApplyConfiguration(ctx context.Context, config []byte, staged bool) error
	// Reset wipes the node and powers it off, without draining it or leaving etcd: Cluster
	// API drained it and the control plane removed its etcd member before its Machine goes.
	// Talos answers before it is done; the node is off when it has finished.
	Reset(ctx context.Context) error
	// Close releases the connection.
	Close() error
}

// upgradeTimeout bounds pulling an installer and running it.
const upgradeTimeout = 10 * time.Minute

// installerOutputLines is how many of an installer's last lines an InstallerError keeps.
const installerOutputLines = 20

// InstallerError is an installer that ran on a node and exited with an error.
type InstallerError struct {
	Address  string
	Image    string
	ExitCode int32
	// Output is the installer's last lines.
	Output []string
}

func (e *InstallerError) Error() string {
	return fmt.Sprintf("installer %s failed on %s with exit code %d: %s", e.Image, e.Address, e.ExitCode, strings.Join(e.Output, "; "))
}

// Errors a caller acts on.
var (
	ErrAlreadyBootstrapped = errors.New("etcd is already bootstrapped on this node")
	ErrNotReady            = errors.New("the node is not ready to bootstrap etcd yet")
	ErrRecoveryFailed      = errors.New("etcd failed to recover from the snapshot")
)

// transferTimeout bounds streaming an etcd snapshot from or to a node.
const transferTimeout = 10 * time.Minute

// recoverTimeout bounds BootstrapRecover: the call, restoring the snapshot and starting etcd.
const recoverTimeout = 5 * time.Minute

// Factory makes clients of the nodes of a cluster.
type Factory interface {
	// New is a client of the Talos API at address (an IP or host name; port 50000) that
	// authenticates with a certificate from bundle's OS CA.
	New(ctx context.Context, bundle *secrets.Bundle, address string) (Client, error)
}

// NewFactory is the Factory of real connections.
func NewFactory() Factory { return factory{} }

type factory struct{}

func (factory) New(ctx context.Context, bundle *secrets.Bundle, address string) (Client, error) {
	endpoint := net.JoinHostPort(address, strconv.Itoa(APIPort))
	tc, err := configgen.NewTalosconfig(bundle, "talon", []string{endpoint}, time.Now(), certificateLifetime)
	if err != nil {
		return nil, err
	}
	cfg, err := clientconfig.FromBytes(tc.Data)
	if err != nil {
		return nil, err
	}
	c, err := talosclient.New(ctx, talosclient.WithConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("failed to connect to the Talos API at %s: %w", endpoint, err)
	}
	return &client{c: c, address: address}, nil
}

type client struct {
	c       *talosclient.Client
	address string
}

func (c *client) wrap(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s on %s: %w", what, c.address, err)
}

func (c *client) Version(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	v, err := c.c.Version(ctx)
	if err != nil {
		return "", c.wrap(err, "Talos API Version")
	}
	if len(v.Messages) == 0 || v.Messages[0].Version == nil {
		return "", c.wrap(errors.New("empty answer"), "Talos API Version")
	}
	return v.Messages[0].Version.Tag, nil
}

func (c *client) Bootstrap(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return c.bootstrap(ctx, &machine.BootstrapRequest{}, "bootstrap")
}

// bootstrap calls Bootstrap with req and maps Talos' own codes (machined's Bootstrap):
// AlreadyExists when the etcd data directory is not empty, FailedPrecondition while
// bootstrapping is not possible yet.
func (c *client) bootstrap(ctx context.Context, req *machine.BootstrapRequest, what string) error {
	err := c.c.Bootstrap(ctx, req)
	switch status.Code(err) {
	case codes.AlreadyExists:
		return fmt.Errorf("%w: %w", ErrAlreadyBootstrapped, c.wrap(err, what))
	case codes.FailedPrecondition:
		return fmt.Errorf("%w: %w", ErrNotReady, c.wrap(err, what))
	}
	return c.wrap(err, what)
}

func (c *client) BootstrapRecover(ctx context.Context, skipHashCheck bool) error {
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	const what = "bootstrap from an etcd snapshot"
	req := &machine.BootstrapRequest{RecoverEtcd: true, RecoverSkipHashCheck: skipHashCheck}
	if err := c.bootstrap(ctx, req, what); err != nil {
		return err
	}
	// machined answered once it started its etcd service anew in bootstrap mode; the service
	// restores the snapshot before it runs etcd, and fails if it cannot.
	for {
		services, err := c.c.ServiceInfo(ctx, "etcd")
		if err == nil && len(services) > 0 && services[0].Service != nil {
			svc := services[0].Service
			switch svc.GetState() {
			case "Running":
				return nil
			case "Failed", "Finished", "Skipped":
				reason := svc.GetState()
				if events := svc.GetEvents().GetEvents(); len(events) > 0 {
					reason = events[len(events)-1].GetMsg()
				}
				return c.wrap(fmt.Errorf("%w: %s", ErrRecoveryFailed, reason), what)
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return c.wrap(fmt.Errorf("waiting for etcd to start: %w", err), what)
		case <-time.After(time.Second):
		}
	}
}

func (c *client) EtcdMembers(ctx context.Context) ([]Member, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.c.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{QueryLocal: true})
	if err != nil {
		return nil, c.wrap(err, "etcd member list")
	}
	var out []Member
	for _, msg := range resp.Messages {
		for _, m := range msg.Members {
			out = append(out, Member{ID: m.Id, Name: m.Hostname, Learner: m.IsLearner, PeerURLs: m.PeerUrls})
		}
	}
	return out, nil
}

func (c *client) EtcdStatus(ctx context.Context) (MemberStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.c.EtcdStatus(ctx)
	if err != nil {
		return MemberStatus{}, c.wrap(err, "etcd status")
	}
	if len(resp.Messages) == 0 || resp.Messages[0].MemberStatus == nil {
		return MemberStatus{}, c.wrap(errors.New("empty answer"), "etcd status")
	}
	st := resp.Messages[0].MemberStatus
	return MemberStatus{ID: st.MemberId, Leader: st.Leader, Errors: st.Errors}, nil
}

func (c *client) EtcdRemoveMember(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.wrap(c.c.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: id}), fmt.Sprintf("removing etcd member %x", id))
}

func (c *client) EtcdForfeitLeadership(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.c.EtcdForfeitLeadership(ctx, &machine.EtcdForfeitLeadershipRequest{})
	return c.wrap(err, "etcd forfeit leadership")
}

func (c *client) EtcdSnapshot(ctx context.Context) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	r, err := c.c.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{})
	if err != nil {
		cancel()
		return nil, c.wrap(err, "etcd snapshot")
	}
	return &snapshotReader{r: r, cancel: cancel, c: c}, nil
}

// snapshotReader is a snapshot as it streams: its errors (the node's among them, which come
// with the stream's first read) wrapped as the client's; Close ends the stream.
type snapshotReader struct {
	r      io.ReadCloser
	cancel context.CancelFunc
	c      *client
}

func (s *snapshotReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = s.c.wrap(err, "etcd snapshot")
	}
	return n, err
}

func (s *snapshotReader) Close() error {
	defer s.cancel()
	return s.r.Close()
}

func (c *client) EtcdRecover(ctx context.Context, snapshot io.Reader) error {
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	_, err := c.c.EtcdRecover(ctx, snapshot)
	return c.wrap(err, "uploading an etcd snapshot")
}

func (c *client) BootID(ctx context.Context) (string, error) {
	data, err := c.read(ctx, "/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", c.wrap(err, "reading the boot ID")
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return "", c.wrap(errors.New("empty answer"), "reading the boot ID")
	}
	return id, nil
}

func (c *client) BootstrapManifests(ctx context.Context) ([]*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	list, err := safe.StateListAll[*k8s.Manifest](ctx, c.c.COSI)
	if err != nil {
		return nil, c.wrap(err, "listing the bootstrap manifests")
	}
	var out []*unstructured.Unstructured
	for manifest := range list.All() {
		for _, item := range manifest.TypedSpec().Items {
			out = append(out, &unstructured.Unstructured{Object: item.Object})
		}
	}
	return out, nil
}

// configPath is where Talos keeps the node's active machine config (the STATE partition).
const configPath = "/system/state/config.yaml"

func (c *client) MachineConfig(ctx context.Context) ([]byte, error) {
	data, err := c.read(ctx, configPath)
	return data, c.wrap(err, "reading the machine config")
}

// read reads a file of the node.
func (c *client) read(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	r, err := c.c.Read(ctx, path)
	if err != nil {
		return nil, err
	}
	defer r.Close() //nolint:errcheck // read-only stream
	return io.ReadAll(r)
}

func (c *client) InstallUpgrade(ctx context.Context, installer string) error {
	ctx, cancel := context.WithTimeout(ctx, upgradeTimeout)
	defer cancel()
	// The CRI containerd's system namespace, as talosctl upgrade's default.
	system := &common.ContainerdInstance{Driver: common.ContainerDriver_CRI, Namespace: common.ContainerdNamespace_NS_SYSTEM}
	pull, err := c.c.ImageClient.Pull(ctx, &machine.ImageServicePullRequest{Containerd: system, ImageRef: installer})
	if err != nil {
		return c.wrap(err, "pulling "+installer)
	}
	var pinned string
	for {
		resp, err := pull.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return c.wrap(err, "pulling "+installer)
		}
		if name := resp.GetName(); name != "" {
			pinned = name
		}
	}
	if pinned == "" {
		return c.wrap(errors.New("the pull named no image"), "pulling "+installer)
	}
	upgrade, err := c.c.LifecycleClient.Upgrade(ctx, &machine.LifecycleServiceUpgradeRequest{
		Containerd: system, Source: &machine.InstallArtifactsSource{ImageName: pinned},
	})
	if err != nil {
		return c.wrap(err, "installing "+installer)
	}
	var output []string
	for {
		resp, err := upgrade.Recv()
		if errors.Is(err, io.EOF) {
			err = errors.New("the installer's output ended without an exit code")
		}
		if err != nil {
			return c.wrap(err, "installing "+installer)
		}
		switch progress := resp.GetProgress().GetResponse().(type) {
		case *machine.LifecycleServiceInstallProgress_Message:
			output = append(output, progress.Message)
			if len(output) > installerOutputLines {
				output = output[len(output)-installerOutputLines:]
			}
		case *machine.LifecycleServiceInstallProgress_ExitCode:
			if progress.ExitCode == 0 {
				return nil
			}
			return &InstallerError{Address: c.address, Image: installer, ExitCode: progress.ExitCode, Output: output}
		}
	}
}

func (c *client) Reboot(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.wrap(c.c.Reboot(ctx), "reboot")
}

// ErrRebootRequired is a config Talos cannot apply without a reboot.
var ErrRebootRequired = errors.New("the node needs a reboot to apply this config")

func (c *client) ApplyConfiguration(ctx context.Context, config []byte, staged bool) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	mode := machine.ApplyConfigurationRequest_NO_REBOOT
	if staged {
		mode = machine.ApplyConfigurationRequest_STAGED
	}
	_, err := c.c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: config, Mode: mode})
	if status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), "reboot") {
		err = fmt.Errorf("%w: %w", ErrRebootRequired, err)
	}
	return c.wrap(err, "applying the machine config")
}

func (c *client) Reset(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := c.c.ResetGeneric(ctx, &machine.ResetRequest{Graceful: false, Reboot: false, Mode: machine.ResetRequest_ALL})
	return c.wrap(err, "reset")
}

func (c *client) Close() error { return c.c.Close() }
