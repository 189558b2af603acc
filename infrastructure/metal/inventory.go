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

package metal

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/infrastructure/metal/bootservice"
)

// bootMACIndex indexes MetalHosts by their boot MAC addresses.
const bootMACIndex = "spec.bootMACAddresses"

// maxBootRecords is how many boots a MetalHost's status keeps.
const maxBootRecords = 10

// indexBootMACs is the bootMACIndex function.
func indexBootMACs(o client.Object) []string {
	h, ok := o.(*infrav1.MetalHost)
	if !ok {
		return nil
	}
	return h.Spec.BootMACAddresses
}

// Inventory is the boot service's view of the MetalHosts: which host boots from a MAC and
// what it should do (bootservice.Hosts), the config it gets (bootservice.ConfigSource), and a
// record of what it was served, in the MetalHost's status and events.
type Inventory struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, for read-modify-write retries that the cache may
	// not have caught up with; Client when nil.
	APIReader client.Reader
	// Events records refusals on the MetalHosts.
	Events events.EventRecorder
	// RegisterNamespace, when set, is where PXE clients no MetalHost boots from are registered
	// as new MetalHosts (state Registering, no BMC).
	RegisterNamespace string

	mu sync.Mutex
	// registered are the MACs this process registered (or tried to), at most maxRegistrations.
	registered map[string]bool
}

// maxRegistrations bounds how many hosts one manager process registers automatically, so
// that a flood of spoofed PXE requests cannot fill the API server with MetalHosts.
const maxRegistrations = 256

var (
	_ bootservice.Hosts        = &Inventory{}
	_ bootservice.ConfigSource = &Inventory{}
)

// Lookup returns the host that boots from mac, and what it should do: install while its
// Machine provisions it, wipe while it is being wiped, else boot its disk.
func (i *Inventory) Lookup(ctx context.Context, mac net.HardwareAddr) (*bootservice.Host, error) {
	hosts := &infrav1.MetalHostList{}
	if err := i.Client.List(ctx, hosts, client.MatchingFields{bootMACIndex: mac.String()}); err != nil {
		return nil, err
	}
	if len(hosts.Items) == 0 {
		return nil, nil
	}
	if len(hosts.Items) > 1 {
		return nil, fmt.Errorf("MAC address %s belongs to %d MetalHosts", mac, len(hosts.Items))
	}
	// The index comes from the cache; what the host should do comes from the API server, as a
	// reconciler may have changed it a moment before it power-cycled the host. Without an API
	// server the cached copy serves (DHCP renewals of running nodes go on).
	h := &infrav1.MetalHost{}
	if err := i.reader().Get(ctx, client.ObjectKeyFromObject(&hosts.Items[0]), h); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		ctrl.LoggerFrom(ctx).WithName("bootservice").Info("Cannot read the MetalHost from the API server; using the cached copy",
			"host", client.ObjectKeyFromObject(&hosts.Items[0]).String(), "reason", err.Error())
		h = &hosts.Items[0]
	}
	host := &bootservice.Host{
		Name:     client.ObjectKeyFromObject(h),
		Arch:     bootservice.Arch(h.Spec.Architecture),
		Firmware: bootservice.Firmware(h.Spec.Firmware),
		Action:   bootservice.BootActionDisk,
	}
	if h.Status.BootAssets != nil {
		host.Kernel, host.Initramfs = h.Status.BootAssets.Kernel, h.Status.BootAssets.Initramfs
	}
	switch {
	case h.Status.State == infrav1.MetalHostStateProvisioning && h.Spec.ConsumerRef != nil:
		m := &infrav1.TalosMetalMachine{}
		if err := i.Client.Get(ctx, types.NamespacedName{Namespace: h.Namespace, Name: h.Spec.ConsumerRef.Name}, m); err != nil {
			return nil, fmt.Errorf("failed to read the TalosMetalMachine of MetalHost %s: %w", host.Name, err)
		}
		host.Action = bootservice.BootActionInstall
		host.KernelArgs = m.Spec.ExtraKernelArgs
	case h.Status.State == infrav1.MetalHostStateDeprovisioning && h.Spec.NeedsWipe && h.Spec.ConsumerRef == nil:
		// Released for a wipe: whatever made it boot, it is wiped (never its old disk). Talos
		// reboots once it has wiped the system disk: the next boot of the same wipe is into
		// maintenance mode, where Talon checks the wipe (and wipes the data disks).
		host.Action = bootservice.BootActionWipe
		if r := h.Status.WipeRequested; r != nil && lastBoot(h, infrav1.BootActionWipe, r.Time) != nil {
			host.Action = bootservice.BootActionMaintenance
		}
	}
	return host, nil
}

// BootstrapData returns the Talos config of the Machine that claimed host, with the kubelet's
// --provider-id (so the Node registers linked to its Machine, whatever address it reports)
// and the install disk (installDisk), when one is named, patched in.
func (i *Inventory) BootstrapData(ctx context.Context, host types.NamespacedName) ([]byte, error) {
	h := &infrav1.MetalHost{}
	if err := i.reader().Get(ctx, host, h); err != nil {
		return nil, err
	}
	if h.Spec.ConsumerRef == nil {
		return nil, fmt.Errorf("MetalHost %s is not claimed", host)
	}
	m := &infrav1.TalosMetalMachine{}
	if err := i.Client.Get(ctx, types.NamespacedName{Namespace: h.Namespace, Name: h.Spec.ConsumerRef.Name}, m); err != nil {
		return nil, err
	}
	machine, err := util.GetOwnerMachine(ctx, i.Client, m.ObjectMeta)
	if err != nil {
		return nil, fmt.Errorf("failed to read the Machine of TalosMetalMachine %s: %w", m.Name, err)
	}
	if machine == nil {
		return nil, fmt.Errorf("TalosMetalMachine %s has no Machine", m.Name)
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		return nil, fmt.Errorf("machine %s has no bootstrap data yet", machine.Name)
	}
	secret := &corev1.Secret{}
	if err := i.Client.Get(ctx, types.NamespacedName{Namespace: machine.Namespace, Name: *machine.Spec.Bootstrap.DataSecretName}, secret); err != nil {
		return nil, err
	}
	return servedConfig(ctx, i.Client, machine, m, h, secret)
}

// ServedConfig returns the bootstrap data in secret as Talon's boot service serves it to the
// host of machine, a Machine on a TalosMetalMachine: with the host's provider ID, install
// disk and static network and the cluster's VIP patched in (see patchConfig). The data of a
// Machine on other infrastructure comes back as it is. In-place updates apply it, so that a
// node keeps what the boot service gave it when it installed.
func ServedConfig(ctx context.Context, c client.Reader, machine *clusterv1.Machine, secret *corev1.Secret) ([]byte, error) {
	ref := machine.Spec.InfrastructureRef
	if ref.Kind != "TalosMetalMachine" || ref.APIGroup != infrav1.GroupVersion.Group {
		return secret.Data["value"], nil
	}
	m := &infrav1.TalosMetalMachine{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: machine.Namespace, Name: ref.Name}, m); err != nil {
		return nil, fmt.Errorf("failed to read TalosMetalMachine %s: %w", ref.Name, err)
	}
	host, ok := strings.CutPrefix(m.Spec.ProviderID, ProviderIDPrefix+m.Namespace+"/")
	if !ok {
		// Not a node the boot service served (another provider's machine of this kind, as
		// the control plane's tests run).
		return secret.Data["value"], nil
	}
	h := &infrav1.MetalHost{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: host}, h); err != nil {
		return nil, fmt.Errorf("failed to read MetalHost %s of TalosMetalMachine %s: %w", host, m.Name, err)
	}
	return servedConfig(ctx, c, machine, m, h, secret)
}

// servedConfig is the bootstrap data in secret, of machine on m, as served to h.
func servedConfig(ctx context.Context, c client.Reader, machine *clusterv1.Machine, m *infrav1.TalosMetalMachine, h *infrav1.MetalHost, secret *corev1.Secret) ([]byte, error) {
	served := servedPatch{
		providerID: ProviderID(h.Namespace, h.Name), disk: installDisk(h, m),
		installer: secret.Annotations[bootstrapv1.ImageFactoryInstallerAnnotation], network: h.Spec.Network,
	}
	if util.IsControlPlaneMachine(machine) {
		var err error
		if served.vip, err = controlPlaneVIP(ctx, c, machine); err != nil {
			return nil, err
		}
		if served.vip != nil {
			if served.vipLink, err = vipLink(h, served.vip); err != nil {
				return nil, err
			}
		}
	}
	return patchConfig(secret.Data["value"], served)
}

// controlPlaneVIP is the VIP of the TalosMetalCluster of machine's Cluster, nil when it asks
// for none.
func controlPlaneVIP(ctx context.Context, c client.Reader, machine *clusterv1.Machine) (*infrav1.ControlPlaneVIP, error) {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: machine.Namespace, Name: machine.Spec.ClusterName}, cluster); err != nil {
		return nil, fmt.Errorf("failed to read the Cluster of Machine %s: %w", machine.Name, err)
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != "TalosMetalCluster" || ref.APIGroup != infrav1.GroupVersion.Group {
		return nil, nil
	}
	mc := &infrav1.TalosMetalCluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: ref.Name}, mc); err != nil {
		return nil, fmt.Errorf("failed to read TalosMetalCluster %s: %w", ref.Name, err)
	}
	return mc.Spec.ControlPlaneVIP, nil
}

// installDisk is the disk a host installs Talos to, when one is named: the host's own, the
// most particular, or else the TalosMetalMachine's (a template's default for hosts that name
// none).
func installDisk(h *infrav1.MetalHost, m *infrav1.TalosMetalMachine) string {
	return cmp.Or(h.Spec.InstallDisk, m.Spec.InstallDisk)
}

// servedPatch is what the boot service writes into the config of the Machine it serves to a
// host.
type servedPatch struct {
	// providerID is the kubelet's --provider-id.
	providerID string
	// disk is the install disk, "" when none is named.
	disk string
	// installer is the Image Factory installer the bootstrap provider resolved, "" for none.
	installer string
	// network is the host's static network settings, nil for DHCP.
	network *infrav1.HostNetwork
	// vip is the cluster's control-plane VIP, for a control-plane host; vipLink the host's
	// link that holds it.
	vip     *infrav1.ControlPlaneVIP
	vipLink string
}

// patchConfig sets the kubelet's provider-id and, unless p.disk is empty, the install disk in
// a Talos config, each where the config's contract keeps it: the KubeletConfig and
// UnattendedInstallConfig documents under the v1.14 contract, machine.kubelet and
// machine.install before (writing both forms is refused by Talos). A v1.14 config that would
// install nothing (no disk and no UnattendedInstallConfig) installs to DefaultInstallDisk. An
// UnattendedInstallConfig it adds carries p.installer, the Image Factory installer the
// bootstrap provider resolved; one the config has already gets only the disk selector. The
// host's static network and the control-plane VIP go in as networkPatches says.
func patchConfig(config []byte, p servedPatch) ([]byte, error) {
	providerID, disk, installer := p.providerID, p.disk, p.installer
	cfg, err := configloader.NewFromBytes(config)
	if err != nil {
		return nil, fmt.Errorf("failed to load the config to patch in the provider ID: %w", err)
	}
	kinds := map[string]bool{}
	for _, d := range cfg.Documents() {
		kinds[d.Kind()] = true
	}
	legacy, err := configgen.LegacyFields(cfg)
	if err != nil {
		return nil, err
	}
	var docs []string
	if kinds["KubeletConfig"] {
		docs = append(docs, "apiVersion: v1alpha1\nkind: KubeletConfig\nextraArgs:\n  provider-id: "+strconv.Quote(providerID)+"\n")
	} else {
		docs = append(docs, "machine:\n  kubelet:\n    extraArgs:\n      provider-id: "+strconv.Quote(providerID)+"\n")
	}
	contract := configgen.NewestKind(cfg)
	docs = append(docs, networkPatches(cfg, contract != nil && contract.MultidocNetworkConfigSupported(), p.network, p.vip, p.vipLink)...)
	v114 := kinds["UnattendedInstallConfig"] || (kinds["KubeletConfig"] && !slices.Contains(legacy, ".machine.install"))
	if disk == "" && v114 && !kinds["UnattendedInstallConfig"] {
		// Under the v1.14 contract a config without an UnattendedInstallConfig installs
		// nothing, and a PXE-booted host would boot the network image forever.
		disk = configgen.DefaultInstallDisk
	}
	switch {
	case disk == "":
	case v114:
		doc := "apiVersion: v1alpha1\nkind: UnattendedInstallConfig\nprovisioning:\n  diskSelector:\n    match: " +
			strconv.Quote("disk.dev_path == "+strconv.Quote(disk)) + "\n"
		if !kinds["UnattendedInstallConfig"] {
			// wipe: false as machinery's generation writes it (Talos' default is to wipe the
			// disk); a config's own document keeps its wipe and installer.
			doc += "  wipe: false\n"
			if installer != "" {
				doc += "installer:\n  image: " + strconv.Quote(installer) + "\n"
			}
		}
		docs = append(docs, doc)
	default:
		docs = append(docs, "machine:\n  install:\n    disk: "+strconv.Quote(disk)+"\n")
	}
	patches := make([]configpatcher.Patch, 0, len(docs))
	for _, doc := range docs {
		patch, err := configpatcher.LoadPatch([]byte(doc))
		if err != nil {
			return nil, err
		}
		patches = append(patches, patch)
	}
	out, err := configpatcher.Apply(configpatcher.WithBytes(config), patches)
	if err != nil {
		return nil, fmt.Errorf("failed to patch the provider ID and install disk into the config: %w", err)
	}
	return out.Bytes()
}

// Served records a served script or config in the MetalHost's status.boots.
func (i *Inventory) Served(s bootservice.Served) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var h *infrav1.MetalHost
	var earlier *infrav1.BootRecord
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		h = &infrav1.MetalHost{}
		if err := i.reader().Get(ctx, s.Host, h); err != nil {
			return err
		}
		before := h.DeepCopy()
		switch s.Endpoint {
		case "config":
			earlier = nil
			for j := len(h.Status.Boots) - 1; j >= 0; j-- {
				if h.Status.Boots[j].Action == infrav1.BootActionInstall {
					h.Status.Boots[j].ConfigDelivered = true
					earlier = deliveredEarlier(h.Status.Boots[:j], h.Status.Boots[j].Address, time.Now())
					break
				}
			}
		default:
			h.Status.Boots = append(h.Status.Boots, infrav1.BootRecord{
				Time: metav1.Now(), Action: infrav1.BootAction(s.Action), Address: s.IP.String(),
			})
			h.Status.Boots = trimBoots(h.Status.Boots)
			h.Status.Addresses = []string{s.IP.String()}
		}
		return i.Client.Status().Patch(ctx, h, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		ctrl.Log.WithName("bootservice").Error(err, "Failed to record a boot", "host", s.Host.String(), "endpoint", s.Endpoint)
		return
	}
	if earlier != nil && i.Events != nil {
		// Only one of the two was the host: the other took its config.
		i.Events.Eventf(h, nil, corev1.EventTypeWarning, "ConfigServedTwice", "Deliver",
			"The host's config was served to %s at %s and again, to %s: if %s is not this host, another machine on the provisioning network took the config (docs/metal.md, Threat model)",
			earlier.Address, earlier.Time.UTC().Format(time.RFC3339), s.IP, earlier.Address)
	}
}

// deliveredEarlier is the latest of boots that fetched a config from an address other than
// address within the last config token lifetime, or nil: a host fetches its config once per
// install boot, from the address it booted with.
func deliveredEarlier(boots []infrav1.BootRecord, address string, now time.Time) *infrav1.BootRecord {
	for j := len(boots) - 1; j >= 0; j-- {
		b := boots[j]
		if b.Action == infrav1.BootActionInstall && b.ConfigDelivered && b.Address != address && now.Sub(b.Time.Time) < bootservice.DefaultTokenTTL {
			return &b
		}
	}
	return nil
}

// reader is APIReader, or Client without one.
func (i *Inventory) reader() client.Reader {
	if i.APIReader != nil {
		return i.APIReader
	}
	return i.Client
}

// trimBoots keeps the newest maxBootRecords boots, and the last Install among older ones: it
// holds the address the node was installed with, which reset and Node linking need.
func trimBoots(boots []infrav1.BootRecord) []infrav1.BootRecord {
	n := len(boots)
	if n <= maxBootRecords {
		return boots
	}
	kept := boots[n-maxBootRecords:]
	if slices.ContainsFunc(kept, func(b infrav1.BootRecord) bool { return b.Action == infrav1.BootActionInstall }) {
		return kept
	}
	for i := n - maxBootRecords - 1; i >= 0; i-- {
		if boots[i].Action == infrav1.BootActionInstall {
			return append([]infrav1.BootRecord{boots[i]}, kept[1:]...)
		}
	}
	return kept
}

// Refused records a refused request as a Warning event on the MetalHost it concerns.
func (i *Inventory) Refused(r bootservice.Refusal) {
	log := ctrl.Log.WithName("bootservice")
	log.Info("Refused a boot service request", "host", r.Host.String(), "mac", r.MAC.String(), "ip", r.IP.String(), "endpoint", r.Endpoint, "reason", r.Reason.Error())
	if r.Host.Name == "" || i.Events == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := &infrav1.MetalHost{}
	if err := i.Client.Get(ctx, r.Host, h); err != nil {
		return
	}
	i.Events.Eventf(h, nil, corev1.EventTypeWarning, "BootRequestRefused", "Refuse",
		"Refused %s request from %s: %v", r.Endpoint, r.IP, r.Reason)
}

// Register creates a MetalHost in Registering state for a PXE client no host boots from.
func (i *Inventory) Register(ctx context.Context, mac net.HardwareAddr) {
	if i.RegisterNamespace == "" {
		return
	}
	i.mu.Lock()
	if i.registered == nil {
		i.registered = map[string]bool{}
	}
	seen, full := i.registered[mac.String()], len(i.registered) >= maxRegistrations
	if !seen && !full {
		i.registered[mac.String()] = true
	}
	i.mu.Unlock()
	if seen {
		return
	}
	if full {
		ctrl.Log.WithName("bootservice").Info("Not registering another host: this manager registered its maximum", "mac", mac.String(), "maximum", maxRegistrations)
		return
	}
	name := "host-" + strings.ReplaceAll(mac.String(), ":", "")
	h := &infrav1.MetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: i.RegisterNamespace, Name: name,
			Labels: map[string]string{"infrastructure.cluster.x-k8s.io/registered-by": "talon-boot-service"}},
		Spec: infrav1.MetalHostSpec{BootMACAddresses: []string{mac.String()}},
	}
	if err := i.Client.Create(ctx, h); err != nil && !apierrors.IsAlreadyExists(err) {
		ctrl.Log.WithName("bootservice").Error(err, "Failed to register a host", "mac", mac.String())
		return
	}
}

// hostConsumerRef is an ObjectReference to a TalosMetalMachine, for a MetalHost's consumerRef.
func hostConsumerRef(m *infrav1.TalosMetalMachine) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: infrav1.GroupVersion.String(), Kind: "TalosMetalMachine",
		Namespace: m.Namespace, Name: m.Name, UID: m.UID,
	}
}
