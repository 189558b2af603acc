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

package metal_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/metal"
	"github.com/talon-capi/talon/infrastructure/metal/bootservice"
	"github.com/talon-capi/talon/test/envtest"
)

// laggingCache answers Lists of MetalHosts with the hosts as they were when it was made: a
// manager cache that has not caught up with the API server yet. Everything else goes to the
// API server.
type laggingCache struct {
	client.Client
	hosts []infrav1.MetalHost
}

func (l laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	hosts, ok := list.(*infrav1.MetalHostList)
	if !ok {
		return l.Client.List(ctx, list, opts...)
	}
	hosts.Items = append(hosts.Items[:0], l.hosts...)
	return nil
}

// TestBootActionFollowsTheAPIServer: what a booting host is told to do comes from the
// MetalHost as the API server has it, not from a cache that still shows it before a reconciler
// changed it and power-cycled the host: a host released for a wipe is wiped on its next network
// boot (never booted from its old disk, which holds the previous node's config), whatever
// made it boot; a host whose Machine is still resetting it through Talos, or that is idle,
// boots its disk; a host being provisioned installs with its Machine's kernel args. Without an
// API server the cache answers; a host gone from the API server is unknown.
func TestBootActionFollowsTheAPIServer(t *testing.T) {
	env := envtest.Get(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := env.Client
	namespace := env.NewNamespace(t, "inventory")
	mac, err := net.ParseMAC("02:00:00:00:0a:01")
	g.Expect(err).NotTo(HaveOccurred())

	machine := &infrav1.TalosMetalMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "worker"},
		Spec: infrav1.TalosMetalMachineSpec{
			BootAssets: infrav1.BootAssets{
				Kernel:    &infrav1.Asset{URL: "http://assets.example/vmlinuz", SHA512: strings.Repeat("a", 128)},
				Initramfs: &infrav1.Asset{URL: "http://assets.example/initramfs.xz", SHA512: strings.Repeat("b", 128)},
			},
			ExtraKernelArgs: []string{"console=ttyS1"},
		},
	}
	g.Expect(c.Create(ctx, machine)).To(Succeed())
	host := &infrav1.MetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "host-1"},
		Spec:       infrav1.MetalHostSpec{BootMACAddresses: []string{mac.String()}},
	}
	g.Expect(c.Create(ctx, host)).To(Succeed())
	consumer := &corev1.ObjectReference{
		APIVersion: infrav1.GroupVersion.String(), Kind: "TalosMetalMachine", Namespace: namespace, Name: machine.Name,
	}
	setStatus := func(state infrav1.MetalHostState, consumer *corev1.ObjectReference, needsWipe bool) {
		t.Helper()
		before := host.DeepCopy()
		host.Spec.ConsumerRef = consumer
		host.Spec.NeedsWipe = needsWipe
		g.Expect(c.Patch(ctx, host, client.MergeFrom(before))).To(Succeed())
		before = host.DeepCopy()
		host.Status.State = state
		host.Status.BootAssets = &infrav1.HostBootAssets{Kernel: "kernel-1", Initramfs: "initramfs-1"}
		g.Expect(c.Status().Patch(ctx, host, client.MergeFrom(before))).To(Succeed())
	}

	// The cache still shows the host Provisioned for its Machine.
	setStatus(infrav1.MetalHostStateProvisioned, consumer, false)
	stale := laggingCache{Client: c, hosts: []infrav1.MetalHost{*host.DeepCopy()}}
	inventory := &metal.Inventory{Client: stale, APIReader: c}

	for _, tc := range []struct {
		name      string
		state     infrav1.MetalHostState
		consumer  *corev1.ObjectReference
		needsWipe bool
		action    bootservice.BootAction
	}{
		{name: "released for a wipe", state: infrav1.MetalHostStateDeprovisioning, needsWipe: true, action: bootservice.BootActionWipe},
		{name: "reset through Talos", state: infrav1.MetalHostStateDeprovisioning, consumer: consumer, action: bootservice.BootActionDisk},
		{name: "idle", state: infrav1.MetalHostStateAvailable, action: bootservice.BootActionDisk},
		{name: "provisioning", state: infrav1.MetalHostStateProvisioning, consumer: consumer, action: bootservice.BootActionInstall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			setStatus(tc.state, tc.consumer, tc.needsWipe)
			got, err := inventory.Lookup(ctx, mac)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Action).To(Equal(tc.action))
			g.Expect(got.Kernel).To(Equal("kernel-1"))
			if tc.action == bootservice.BootActionInstall {
				g.Expect(got.KernelArgs).To(Equal([]string{"console=ttyS1"}))
			}
		})
	}

	// Without an API server the cached copy answers (running nodes renew their DHCP leases).
	unreachable, err := client.New(&rest.Config{Host: "https://127.0.0.1:1", Timeout: time.Second}, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	got, err := (&metal.Inventory{Client: stale, APIReader: unreachable}).Lookup(ctx, mac)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).NotTo(BeNil())
	g.Expect(got.Name.Name).To(Equal(host.Name))
	g.Expect(got.Action).To(Equal(bootservice.BootActionDisk))

	// A host deleted a moment ago (still in the cache) is unknown.
	g.Expect(c.Delete(ctx, host)).To(Succeed())
	got, err = inventory.Lookup(ctx, mac)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeNil())
}

// TestConfigServedTwiceIsReported: a host's config fetched from one address and, within a
// token's lifetime, from another is reported as a Warning event naming both: one of the two
// took the config without being the host. A host fetching its config once, or again from
// its own address, raises nothing.
func TestConfigServedTwiceIsReported(t *testing.T) {
	env := envtest.Get(t)
	ctx := t.Context()
	c := env.Client
	namespace := env.NewNamespace(t, "inventory")
	for _, tc := range []struct {
		name  string
		boots []infrav1.BootRecord
		from  string
		want  bool
	}{
		{name: "first delivery", from: "10.0.0.10", boots: []infrav1.BootRecord{{Action: infrav1.BootActionInstall, Address: "10.0.0.10"}}},
		{name: "again from the same address", from: "10.0.0.10", boots: []infrav1.BootRecord{
			{Action: infrav1.BootActionInstall, Address: "10.0.0.10", ConfigDelivered: true},
			{Action: infrav1.BootActionInstall, Address: "10.0.0.10"},
		}},
		{name: "another address took it first", from: "10.0.0.10", want: true, boots: []infrav1.BootRecord{
			{Action: infrav1.BootActionInstall, Address: "10.0.0.66", ConfigDelivered: true},
			{Action: infrav1.BootActionInstall, Address: "10.0.0.10"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			host := &infrav1.MetalHost{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "host-"},
				Spec:       infrav1.MetalHostSpec{BootMACAddresses: []string{"02:00:00:00:0b:01"}},
			}
			g.Expect(c.Create(ctx, host)).To(Succeed())
			for j := range tc.boots {
				tc.boots[j].Time = metav1.Now()
			}
			host.Status.Boots = tc.boots
			g.Expect(c.Status().Update(ctx, host)).To(Succeed())

			recorder := events.NewFakeRecorder(10)
			(&metal.Inventory{Client: c, Events: recorder}).Served(bootservice.Served{
				Host: client.ObjectKeyFromObject(host), IP: net.ParseIP(tc.from), Endpoint: "config",
			})
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(host), host)).To(Succeed())
			g.Expect(host.Status.Boots[len(host.Status.Boots)-1].ConfigDelivered).To(BeTrue())
			if !tc.want {
				g.Expect(recorder.Events).To(BeEmpty())
				return
			}
			g.Expect(recorder.Events).To(Receive(And(ContainSubstring("ConfigServedTwice"), ContainSubstring("10.0.0.66"), ContainSubstring("10.0.0.10"))))
		})
	}
}
