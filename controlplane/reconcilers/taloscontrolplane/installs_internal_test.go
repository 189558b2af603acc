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

package taloscontrolplane

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

// TestInstallJobs: an installer runs beside the calls that poll it, outliving the call that
// started it; each call reports "not yet" until it ends, then its result once; an installer
// of another release (the spec changed meanwhile) waits for the running one, then replaces it.
func TestInstallJobs(t *testing.T) {
	g := NewWithT(t)
	var jobs installJobs
	const uid = types.UID("machine")
	started := make(chan string, 4)
	release := map[string]chan error{"a": make(chan error), "b": make(chan error)}
	install := func(installer string) func(context.Context) error {
		return func(ctx context.Context) error {
			started <- installer
			err := <-release[installer]
			return errors.Join(ctx.Err(), err)
		}
	}
	poll := func(installer string) (bool, error) {
		return jobs.poll(t.Context(), uid, installer, install(installer))
	}

	call, endCall := context.WithCancel(t.Context())
	done, err := jobs.poll(call, uid, "a", install("a"))
	g.Expect(done, err).To(BeFalse())
	g.Eventually(started).Should(Receive(Equal("a")))
	endCall()
	g.Expect(poll("a")).To(BeFalse(), "still running")
	g.Expect(poll("b")).To(BeFalse(), "a new release waits for the running installer")
	g.Consistently(started, 100*time.Millisecond).ShouldNot(Receive())

	release["a"] <- errors.New("exit code 1")
	g.Eventually(func(g Gomega) {
		g.Expect(poll("b")).To(BeFalse())
		g.Expect(started).To(Receive(Equal("b")))
	}).Should(Succeed(), "then it replaces it")
	release["b"] <- errors.New("refused")
	g.Eventually(func() error {
		if done, err := poll("b"); done {
			return err
		}
		return nil
	}).Should(MatchError("refused"), "its result is reported")
	g.Consistently(started, 100*time.Millisecond).ShouldNot(Receive(), "once, without running it again")

	call, endCall = context.WithCancel(t.Context())
	done, err = jobs.poll(call, uid, "b", install("b"))
	g.Expect(done, err).To(BeFalse(), "a call after the reported failure tries again")
	g.Eventually(started).Should(Receive(Equal("b")))
	endCall()
	close(release["b"])
	g.Eventually(func() bool { done, err := poll("b"); return done && err == nil }).Should(BeTrue(), "not cancelled with the call")
	g.Expect(started).NotTo(Receive(), "and not run a second time")
}
