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

package manager

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// TestStoppedWhileStarting stops a manager whose cache cannot sync, as a SIGTERM reaches a
// manager whose API server does not answer: the manager must still return, so that the
// process exits instead of spinning until it is killed.
func TestStoppedWhileStarting(t *testing.T) {
	// An API server address where nothing listens, and a mapper that needs no discovery, so
	// that the cache's Pod informer lists in vain.
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		GracefulShutdownTimeout: ptr.To(time.Second),
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
			return mapper, nil
		},
	})
	if err != nil {
		t.Fatalf("Failed to create the manager: %v", err)
	}
	if _, err := mgr.GetCache().GetInformer(t.Context(), &corev1.Pod{}); err != nil {
		t.Fatalf("Failed to get a Pod informer: %v", err)
	}

	ctx, stop := context.WithCancel(t.Context())
	returned := make(chan error, 1)
	go func() { returned <- startUntilStopped(ctx, mgr.Start, 3*time.Second) }()
	time.Sleep(500 * time.Millisecond)
	stop()
	select {
	case err := <-returned:
		if err == nil || !strings.Contains(err.Error(), "did not stop") {
			t.Fatalf("A manager stopped while its cache could not sync returned %v, want an error saying it did not stop", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("A manager stopped while its cache could not sync did not return within 20s")
	}
}

// TestStoppedAfterStart stops a manager whose start returns: its result is Run's.
func TestStoppedAfterStart(t *testing.T) {
	ctx, stop := context.WithCancel(t.Context())
	stop()
	err := startUntilStopped(ctx, func(ctx context.Context) error { <-ctx.Done(); return nil }, time.Minute)
	if err != nil {
		t.Fatalf("A manager that stopped cleanly returned %v", err)
	}
}
