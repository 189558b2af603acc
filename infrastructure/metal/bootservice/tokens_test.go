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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

var (
	hostA = types.NamespacedName{Namespace: "metal", Name: "host-a"}
	macA  = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x0a}
	macB  = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x0b}
	ipA   = net.IPv4(10, 0, 0, 10)
	ipB   = net.IPv4(10, 0, 0, 11)
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newTestTokens() (*Tokens, *fakeClock) {
	clock := &fakeClock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	return NewTokens(TokensOptions{TTL: 10 * time.Minute, Now: clock.Now}), clock
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		name    string
		boundIP net.IP
		// before runs between issue and the redeem under test.
		before  func(g Gomega, tokens *Tokens, token string, clock *fakeClock)
		token   func(issued string) string
		req     Requester
		wantErr error
	}{
		{name: "bound host from its IP and MAC", boundIP: ipA, req: Requester{IP: ipA, MAC: macA}},
		{name: "bound host from its IP, no MAC in the request", boundIP: ipA, req: Requester{IP: ipA}},
		{name: "IPv4-mapped IPv6 form of the bound IP", boundIP: ipA, req: Requester{IP: ipA.To16()}},
		{name: "token bound to no IP, right MAC", req: Requester{IP: ipB, MAC: macA}},
		{name: "just before expiry", boundIP: ipA, req: Requester{IP: ipA},
			before: func(_ Gomega, _ *Tokens, _ string, c *fakeClock) { c.Advance(10*time.Minute - time.Nanosecond) }},
		{name: "second redeem", boundIP: ipA, req: Requester{IP: ipA}, wantErr: ErrTokenUsed,
			before: func(g Gomega, tk *Tokens, token string, _ *fakeClock) {
				_, err := tk.Redeem(token, Requester{IP: ipA})
				g.Expect(err).NotTo(HaveOccurred())
			}},
		{name: "another IP", boundIP: ipA, req: Requester{IP: ipB}, wantErr: ErrTokenWrongRequester},
		{name: "no IP on a bound token", boundIP: ipA, req: Requester{}, wantErr: ErrTokenWrongRequester},
		{name: "right IP, another MAC", boundIP: ipA, req: Requester{IP: ipA, MAC: macB}, wantErr: ErrTokenWrongRequester},
		{name: "right IP, empty MAC", boundIP: ipA, req: Requester{IP: ipA, MAC: net.HardwareAddr{}}, wantErr: ErrTokenWrongRequester},
		{name: "at expiry", boundIP: ipA, req: Requester{IP: ipA}, wantErr: ErrTokenExpired,
			before: func(_ Gomega, _ *Tokens, _ string, c *fakeClock) { c.Advance(10 * time.Minute) }},
		{name: "unknown token", boundIP: ipA, req: Requester{IP: ipA}, wantErr: ErrTokenUnknown,
			token: func(string) string { return "not-a-token" }},
		{name: "empty token", boundIP: ipA, req: Requester{IP: ipA}, wantErr: ErrTokenUnknown,
			token: func(string) string { return "" }},
		{name: "replaced by a newer token for the host", boundIP: ipA, req: Requester{IP: ipA}, wantErr: ErrTokenUnknown,
			before: func(g Gomega, tk *Tokens, _ string, _ *fakeClock) {
				_, err := tk.Issue(hostA, macA, ipA)
				g.Expect(err).NotTo(HaveOccurred())
			}},
		{name: "expired long ago and forgotten", boundIP: ipA, req: Requester{IP: ipA}, wantErr: ErrTokenUnknown,
			before: func(g Gomega, tk *Tokens, _ string, c *fakeClock) {
				c.Advance(25 * time.Minute)
				// Issuing prunes; another host's token so the replacement rule plays no part.
				_, err := tk.Issue(types.NamespacedName{Namespace: "metal", Name: "host-b"}, macB, ipB)
				g.Expect(err).NotTo(HaveOccurred())
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tokens, clock := newTestTokens()
			issued, err := tokens.Issue(hostA, macA, tc.boundIP)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(issued).To(HaveLen(43), "256 random bits, base64url")
			if tc.before != nil {
				tc.before(g, tokens, issued, clock)
			}
			token := issued
			if tc.token != nil {
				token = tc.token(issued)
			}

			_, checkErr := tokens.Check(token, tc.req)
			grant, err := tokens.Redeem(token, tc.req)
			if tc.wantErr != nil {
				g.Expect(checkErr).To(MatchError(tc.wantErr))
				g.Expect(err).To(MatchError(tc.wantErr))
				return
			}
			g.Expect(checkErr).NotTo(HaveOccurred())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(grant.Host).To(Equal(hostA))
			g.Expect(grant.MAC).To(Equal(macA))
			// A successful redeem uses the token up.
			_, err = tokens.Redeem(token, tc.req)
			g.Expect(err).To(MatchError(ErrTokenUsed))
		})
	}
}

func TestTokensRefusalsAreDistinct(t *testing.T) {
	g := NewWithT(t)
	errs := []error{ErrTokenUnknown, ErrTokenUsed, ErrTokenExpired, ErrTokenWrongRequester}
	for i, a := range errs {
		for j, b := range errs {
			g.Expect(errors.Is(a, b)).To(Equal(i == j), "%v vs %v", a, b)
		}
	}
}

func TestTokensConcurrentRedeemHasOneWinner(t *testing.T) {
	g := NewWithT(t)
	tokens, _ := newTestTokens()
	for range 20 {
		token, err := tokens.Issue(hostA, macA, ipA)
		g.Expect(err).NotTo(HaveOccurred())

		const contenders = 32
		var wins, used atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range contenders {
			wg.Go(func() {
				<-start
				_, err := tokens.Redeem(token, Requester{IP: ipA, MAC: macA})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, ErrTokenUsed):
					used.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		g.Expect(wins.Load()).To(Equal(int32(1)))
		g.Expect(used.Load()).To(Equal(int32(contenders - 1)))
	}
}

func TestTokensAreUnique(t *testing.T) {
	g := NewWithT(t)
	tokens, _ := newTestTokens()
	seen := map[string]bool{}
	for i := range 256 {
		token, err := tokens.Issue(types.NamespacedName{Namespace: "metal", Name: "h" + string(rune('a'+i%26))}, macA, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(seen).NotTo(HaveKey(token))
		seen[token] = true
	}
}
