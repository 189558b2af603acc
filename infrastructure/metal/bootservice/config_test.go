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

package bootservice

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestConfigEndpoint(t *testing.T) {
	const hostIP = "10.0.0.10:40000"
	for _, tc := range []struct {
		name string
		// fetch returns what the test fetches, from where, after host A fetched its script.
		fetch      func(g Gomega, f *httpFixture, configPath string) (path, remote string)
		configs    ConfigSource
		wantCode   int
		wantReason error
	}{
		{name: "first fetch from the host", wantCode: http.StatusOK,
			fetch: func(_ Gomega, _ *httpFixture, p string) (string, string) { return p, hostIP }},
		{name: "second fetch", wantCode: http.StatusForbidden, wantReason: ErrTokenUsed,
			fetch: func(g Gomega, f *httpFixture, p string) (string, string) {
				code, body := f.get(p, hostIP)
				g.Expect(code).To(Equal(http.StatusOK))
				g.Expect(body).To(Equal("config of metal/host-a"))
				return p, hostIP
			}},
		{name: "another IP", wantCode: http.StatusForbidden, wantReason: ErrTokenWrongRequester,
			fetch: func(_ Gomega, _ *httpFixture, p string) (string, string) { return p, "10.0.0.66:40000" }},
		{name: "the host's IP, another MAC", wantCode: http.StatusForbidden, wantReason: ErrTokenWrongRequester,
			fetch: func(_ Gomega, _ *httpFixture, p string) (string, string) {
				return strings.TrimSuffix(p, "0a") + "0b", hostIP
			}},
		{name: "unknown token", wantCode: http.StatusForbidden, wantReason: ErrTokenUnknown,
			fetch: func(_ Gomega, _ *httpFixture, _ string) (string, string) {
				return "/config/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", hostIP
			}},
		{name: "token of a replaced script", wantCode: http.StatusForbidden, wantReason: ErrTokenUnknown,
			fetch: func(g Gomega, f *httpFixture, p string) (string, string) {
				f.fetchScript(g)
				return p, hostIP
			}},
		{name: "config source fails, token survives", wantCode: http.StatusServiceUnavailable, wantReason: ErrNoConfig,
			configs: fakeConfigs{err: errors.New("secret not found")},
			fetch:   func(_ Gomega, _ *httpFixture, p string) (string, string) { return p, hostIP }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			configs := tc.configs
			if configs == nil {
				configs = fakeConfigs{}
			}
			f := newHTTPFixture(t, configs)
			path, remote := tc.fetch(g, f, f.fetchScript(g))
			code, body := f.get(path, remote)
			g.Expect(code).To(Equal(tc.wantCode))
			if tc.wantReason == nil {
				g.Expect(body).To(Equal("config of metal/host-a"))
				g.Expect(f.refusals.all()).To(BeEmpty())
				return
			}
			g.Expect(body).To(BeEmpty(), "a refused requester gets no bytes")
			g.Expect(f.refusals.all()).To(ConsistOf(And(
				HaveField("Endpoint", "config"),
				HaveField("Reason", MatchError(tc.wantReason)),
			)))
		})
	}
}

func TestConfigEndpointExpiredToken(t *testing.T) {
	g := NewWithT(t)
	clock := &fakeClock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	refusals := &refusalLog{}
	h, err := NewHTTPHandler(testHosts(), fakeConfigs{}, NewTokens(TokensOptions{TTL: time.Minute, Now: clock.Now}),
		HTTPOptions{BaseURL: testBaseURL, Refusals: refusals.record, Addresses: leasedAddresses{macA.String(): net.IPv4(10, 0, 0, 10)}})
	g.Expect(err).NotTo(HaveOccurred())
	f := &httpFixture{handler: h, refusals: refusals}
	path := f.fetchScript(g)
	clock.Advance(time.Minute)
	code, body := f.get(path, "10.0.0.10:1")
	g.Expect(code).To(Equal(http.StatusForbidden))
	g.Expect(body).To(BeEmpty())
	g.Expect(refusals.all()).To(ConsistOf(And(
		HaveField("Host", hostA),
		HaveField("Reason", MatchError(ErrTokenExpired)),
	)))
}

func TestConfigEndpointConcurrentFetchesHaveOneWinner(t *testing.T) {
	g := NewWithT(t)
	f := newHTTPFixture(t, fakeConfigs{})
	path := f.fetchScript(g)
	const fetchers = 16
	codes := make(chan int, fetchers)
	bodies := make(chan string, fetchers)
	var wg sync.WaitGroup
	for range fetchers {
		wg.Go(func() {
			code, body := f.get(path, "10.0.0.10:40000")
			codes <- code
			bodies <- body
		})
	}
	wg.Wait()
	close(codes)
	close(bodies)
	var ok, forbidden int
	for code := range codes {
		switch code {
		case http.StatusOK:
			ok++
		case http.StatusForbidden:
			forbidden++
		}
	}
	g.Expect(ok).To(Equal(1))
	g.Expect(forbidden).To(Equal(fetchers - 1))
	var withBytes int
	for body := range bodies {
		if body != "" {
			withBytes++
		}
	}
	g.Expect(withBytes).To(Equal(1), "only the winner gets the config")
	g.Expect(f.refusals.all()).To(HaveLen(fetchers - 1))
	g.Expect(f.refusals.all()).To(HaveEach(HaveField("Reason", MatchError(ErrTokenUsed))))
}
