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
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Run(m)) }

// TestApplyWaitsForWebhooks: an object applied while the webhook the API server must call
// does not listen yet (as right after the providers' install, or while one's Pod restarts)
// is applied once the webhook answers; one the webhook refuses fails at once, asked once.
func TestApplyWaitsForWebhooks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env := envtest.Get(t)
	ns := env.NewNamespace(t, "webhooks")
	host, port, certDir := env.WebhookServing()

	var asked atomic.Int32
	refuse := atomic.Bool{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		review := &admissionv1.AdmissionReview{}
		if err := json.NewDecoder(r.Body).Decode(review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: !refuse.Load()}
		if refuse.Load() {
			review.Response.Result = &metav1.Status{Message: "refused by the test's webhook", Code: http.StatusForbidden}
		}
		review.Request = nil
		if err := json.NewEncoder(w).Encode(review); err != nil {
			t.Errorf("failed to answer the review: %v", err)
		}
	})
	url := "https://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/validate"
	webhook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "talon-up-test-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "configmaps.talon-up-test.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: env.WebhookCA()},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](2),
		}},
	}
	g.Expect(env.Client.Create(ctx, webhook)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, webhook) })

	configMap := func(name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("ConfigMap")
		o.SetNamespace(ns)
		o.SetName(name)
		return o
	}

	t.Log("The webhook starts listening 5s after the apply began")
	server := &http.Server{Addr: net.JoinHostPort(host, strconv.Itoa(port)), Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		time.Sleep(5 * time.Second)
		_ = server.ListenAndServeTLS(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	}()
	t.Cleanup(func() { _ = server.Close() })
	g.Expect(applyWhenWebhooksAnswer(ctx, env.Client, configMap("late"), io.Discard)).To(Succeed())
	g.Expect(asked.Load()).To(BeNumerically(">=", 1), "the object went through the webhook")

	t.Log("A refusal is returned at once")
	refuse.Store(true)
	asked.Store(0)
	err := applyWhenWebhooksAnswer(ctx, env.Client, configMap("refused"), io.Discard)
	g.Expect(err).To(MatchError(ContainSubstring("refused by the test's webhook")))
	g.Expect(asked.Load()).To(BeEquivalentTo(1), "a refusal is not asked again")
}
