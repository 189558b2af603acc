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
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/infrastructure/metal"
	"github.com/talon-capi/talon/sim/bmc"
	"github.com/talon-capi/talon/test/envtest"
)

// TestHostRecordsSurviveAnUpgrade runs the MetalHost reconciler on running hosts as an
// earlier Talon left them, with the claim and the wipe record in status: the claim moves to
// spec and the host keeps running. A provisioned host whose claim is gone altogether (its
// MetalHost replaced from a manifest without it) is claimed again by the Machine whose
// providerID names it, or else is not made Available but waits for a wipe. No BMC gets a
// power request.
func TestHostRecordsSurviveAnUpgrade(t *testing.T) {
	env := envtest.Get(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	namespace := env.NewNamespace(t, "metal-records")
	consumer := &corev1.ObjectReference{
		APIVersion: infrav1.GroupVersion.String(), Kind: "TalosMetalMachine", Namespace: namespace, Name: "worker-x", UID: "0b6e1b2a-5d1e-4c39-9d2e-000000000001",
	}
	bmcs := map[string]*bmc.BMC{}
	// The Machine whose node runs on host "replaced".
	owner := &infrav1.TalosMetalMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cp-x"},
		Spec: infrav1.TalosMetalMachineSpec{
			ProviderID: metal.ProviderID(namespace, "replaced"),
			BootAssets: infrav1.BootAssets{ImageFactory: &infrav1.ImageFactory{}},
		},
	}
	g.Expect(c.Create(ctx, owner)).To(Succeed())
	for i, name := range []string{"claimed", "unclaimed", "replaced"} {
		b := bmc.NewServer(bmc.Config{Username: "admin", Password: "pw-" + name})
		t.Cleanup(b.Close)
		b.SetPower("1", true)
		bmcs[name] = b
		g.Expect(c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bmc"},
			StringData: map[string]string{"username": "admin", "password": "pw-" + name},
		})).To(Succeed())
		h := &infrav1.MetalHost{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: infrav1.MetalHostSpec{
				BootMACAddresses: []string{fmt.Sprintf("02:42:10:98:00:%02x", i+1)},
				BMC:              &infrav1.BMCSpec{Address: "redfish+http://" + b.Address(), CredentialsName: name + "-bmc"},
			},
		}
		g.Expect(c.Create(ctx, h)).To(Succeed())
		patch := client.MergeFrom(h.DeepCopy())
		h.Status.State = infrav1.MetalHostStateProvisioned
		if name == "claimed" {
			h.Status.DeprecatedConsumerRef = consumer
		}
		g.Expect(c.Status().Patch(ctx, h, patch)).To(Succeed())
	}

	r := &metal.HostReconciler{Client: c, APIReader: c, BMC: metal.NewBMC, BootTimeout: metal.DefaultBootTimeout}
	for range 2 {
		for name := range bmcs {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: namespace, Name: name}})
			g.Expect(err).NotTo(HaveOccurred(), name)
		}
	}

	claimed := &infrav1.MetalHost{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "claimed"}, claimed)).To(Succeed())
	g.Expect(claimed.Spec.ConsumerRef).To(Equal(consumer), "the claim moved to spec")
	g.Expect(claimed.Status.DeprecatedConsumerRef).To(BeNil())
	g.Expect(claimed.Status.State).To(Equal(infrav1.MetalHostStateProvisioned))

	replaced := &infrav1.MetalHost{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "replaced"}, replaced)).To(Succeed())
	g.Expect(replaced.Spec.ConsumerRef).NotTo(BeNil(), "claimed again for the Machine whose node runs there")
	g.Expect(replaced.Spec.ConsumerRef.UID).To(Equal(owner.UID))
	g.Expect(replaced.Spec.NeedsWipe).To(BeFalse())
	g.Expect(replaced.Status.State).To(Equal(infrav1.MetalHostStateProvisioned))

	unclaimed := &infrav1.MetalHost{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "unclaimed"}, unclaimed)).To(Succeed())
	g.Expect(unclaimed.Spec.NeedsWipe).To(BeTrue(), "a provisioned host without a claim may hold a node's data")
	g.Expect(unclaimed.Status.State).NotTo(Equal(infrav1.MetalHostStateAvailable))
	g.Expect(unclaimed.Status.LastError).To(ContainSubstring("needs a wipe"))

	for name, b := range bmcs {
		g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOn), "MetalHost %s keeps running", name)
		g.Expect(b.Resets("1")).To(BeEmpty(), "no power request reached the BMC of %s", name)
	}
}

// TestHostDeletedForMoveKeepsRunning deletes two running, unclaimed MetalHosts: one as
// clusterctl move deletes what it moved (annotated delete-for-move), which keeps running for
// the plane it moved to; one as a person deletes a host, which is powered off first.
func TestHostDeletedForMoveKeepsRunning(t *testing.T) {
	env := envtest.Get(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	namespace := env.NewNamespace(t, "metal-delete")
	r := &metal.HostReconciler{Client: c, APIReader: c, BMC: metal.NewBMC, BootTimeout: metal.DefaultBootTimeout}
	for i, moved := range []bool{true, false} {
		name := fmt.Sprintf("host-%d", i)
		b := bmc.NewServer(bmc.Config{Username: "admin", Password: "pw"})
		t.Cleanup(b.Close)
		b.SetPower("1", true)
		g.Expect(c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bmc"},
			StringData: map[string]string{"username": "admin", "password": "pw"},
		})).To(Succeed())
		h := &infrav1.MetalHost{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: infrav1.MetalHostSpec{
				BootMACAddresses: []string{fmt.Sprintf("02:42:10:97:00:%02x", i+1)},
				BMC:              &infrav1.BMCSpec{Address: "redfish+http://" + b.Address(), CredentialsName: name + "-bmc"},
			},
		}
		g.Expect(c.Create(ctx, h)).To(Succeed())
		key := client.ObjectKeyFromObject(h)
		// The reconciler adds its finalizer.
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Get(ctx, key, h)).To(Succeed())
		g.Expect(h.Finalizers).NotTo(BeEmpty())
		if moved {
			patch := client.MergeFrom(h.DeepCopy())
			h.Annotations = map[string]string{clusterctlv1.DeleteForMoveAnnotation: ""}
			g.Expect(c.Patch(ctx, h, patch)).To(Succeed())
		}
		resets := len(b.Resets("1"))
		g.Expect(c.Delete(ctx, h)).To(Succeed())
		_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(apierrors.IsNotFound(c.Get(ctx, key, h))).To(BeTrue(), "MetalHost %s is gone", name)
		if moved {
			g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOn), "a host deleted for a move keeps running")
			g.Expect(b.Resets("1")).To(HaveLen(resets), "no power request for a host deleted for a move")
		} else {
			g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOff), "a deleted host is powered off")
		}
	}
}
