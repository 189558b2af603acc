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

package talosconfig_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/test/envtest"
)

// TestStaticDiskEncryptionKey encrypts a node's volumes with its node ID and a static key
// from a Secret that does not exist yet: the config waits for the Secret, saying which, and
// is rendered as soon as it has the key: the Secret's change reconciles it, though the Secret
// carries no cluster label (the managers' main cache holds only labelled Secrets). The
// passphrase reaches the bootstrap data Secret only: not the TalosConfig, its conditions, an
// Event or a line of the manager's log.
func TestStaticDiskEncryptionKey(t *testing.T) {
	const passphrase = "9f2c-static-disk-passphrase-e71a" //nolint:gosec // the test's own key, looked for where it must not be
	g := NewWithT(t)
	logged := managerLog.record(t)
	env := envtest.Get(t)
	withCore := env.StartManager(t, envtest.ManagerOptions{CoreReconcilers: true, Setup: bootstrapReconcilers()})
	ns := env.NewNamespace(t, "encryption")
	ctx := t.Context()
	cluster := newProvisionedCluster(t, env, ns, "encrypted", nil)
	config := newMachine(t, env, cluster, "encrypted-0", bootstrapv1.TalosConfigSpec{
		GenerateType: bootstrapv1.GenerateTypeWorker,
		TalosVersion: "v1.14",
		DiskEncryption: bootstrapv1.DiskEncryptionSpec{
			Key:                bootstrapv1.DiskEncryptionKeyNodeID,
			StaticKeySecretRef: bootstrapv1.SecretKeyReference{Name: "disk-key", Key: "recovery"},
		},
	})

	c := condition(t, env, config, bootstrapv1.DiskEncryptionKeyUnavailableReason)
	g.Expect(c.Message).To(Equal(`Waiting for Secret disk-key, whose data key "recovery" holds the disk encryption passphrase ` +
		`(spec.diskEncryption.staticKeySecretRef): create it in namespace ` + ns))

	// Cluster API's reconcilers own the Machine and write the Cluster's status, and each of
	// their writes reconciles the config again. From here on only the bootstrap provider
	// runs, so that only the Secret's own changes can wake the config.
	withCore.Stop()
	env.StartManager(t, envtest.ManagerOptions{Setup: bootstrapReconcilers()})

	t.Log("A Secret without the key: the condition says which key is missing")
	// Without the cluster-name label, which the manager's own cache needs to see a Secret.
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "disk-key", Namespace: ns}, Data: map[string][]byte{"passphrase": []byte(passphrase)}}
	g.Expect(env.Client.Create(ctx, key)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
		g.Expect(config.Status.Conditions).To(ContainElement(HaveField("Message",
			`Secret disk-key has no data key "recovery" with the disk encryption passphrase (spec.diskEncryption.staticKeySecretRef): add it`)))
	}).Should(Succeed())

	// Cluster API's rate limiter defers the echo of the status write above by a second:
	// let it pass, so that what follows is the Secret's doing alone.
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
		g.Expect(config.Status.DataSecretName).To(BeNil())
	}).WithTimeout(3 * time.Second).Should(Succeed())
	key.Data = map[string][]byte{"recovery": []byte(passphrase)}
	g.Expect(env.Client.Update(ctx, key)).To(Succeed())
	// Nothing re-checks: only the Secret's update can render the config.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
		g.Expect(config.Status.DataSecretName).NotTo(BeNil())
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	_, cfg := dataSecret(t, env, config)
	for _, volume := range []string{"STATE", "EPHEMERAL"} {
		v, ok := cfg.Volumes().ByName(volume)
		g.Expect(ok).To(BeTrue(), volume)
		keys := v.Encryption().Keys()
		g.Expect(keys).To(HaveLen(2), volume)
		g.Expect(keys[0].NodeID()).NotTo(BeNil(), "%s: slot 0 is derived from the node ID", volume)
		g.Expect(keys[1].Slot()).To(Equal(1))
		g.Expect(string(keys[1].Static().Key())).To(Equal(passphrase), "%s: slot 1 is the Secret's passphrase", volume)
	}

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(config), config)).To(Succeed())
	object, err := json.Marshal(config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(object)).NotTo(ContainSubstring(passphrase), "the TalosConfig")
	events := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Message).NotTo(ContainSubstring(passphrase), "Event %s", e.Name)
	}
	lines := logged()
	g.Expect(lines).NotTo(BeEmpty(), "the manager's log was recorded")
	g.Expect(strings.Join(lines, "\n")).To(ContainSubstring("Waiting for the disk encryption key"))
	for _, line := range lines {
		g.Expect(line).NotTo(ContainSubstring(passphrase))
	}
}
