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
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The reasons Tokens refuses a config token. Each is distinct so events and logs say why a host
// did not get its config.
var (
	// ErrTokenUnknown: the token was never issued, was replaced by a newer one for the same host,
	// or expired long enough ago to be forgotten.
	ErrTokenUnknown = errors.New("unknown config token")
	// ErrTokenUsed: the token was already redeemed; configs are handed out once.
	ErrTokenUsed = errors.New("config token already used")
	// ErrTokenExpired: the token's lifetime ended before it was redeemed.
	ErrTokenExpired = errors.New("config token expired")
	// ErrTokenWrongRequester: the token belongs to another host (another IP or MAC address).
	ErrTokenWrongRequester = errors.New("config token belongs to another host")
)

// DefaultTokenTTL is how long a config token stays valid: long enough for a slow firmware to
// load the kernel and initramfs, short enough not to linger.
const DefaultTokenTTL = 15 * time.Minute

// Requester is who presents a token: the IP address of the connection and, when the request
// carries it, a MAC address. A MAC from a request is the client's claim, not proof.
type Requester struct {
	// IP is the requester's address as seen on the connection.
	IP net.IP
	// MAC is the MAC address the request claims, or nil.
	MAC net.HardwareAddr
}

// Grant is a token's binding, returned when it is checked or redeemed.
type Grant struct {
	// Host is the MetalHost the token was issued for.
	Host types.NamespacedName
	// MAC is the MAC address the host booted from.
	MAC net.HardwareAddr
	// IP is the address the token is bound to, or nil when it is bound to none.
	IP net.IP
	// Expires is when the token stops being valid.
	Expires time.Time
}

// TokensOptions tune Tokens.
type TokensOptions struct {
	// TTL is how long a token stays valid; DefaultTokenTTL when zero.
	TTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Tokens issues and redeems one-time config tokens. It is safe for concurrent use.
//
// A host has at most one live token: issuing a new one forgets the old one, so a host that
// fetches its iPXE script twice can only use the newer URL. Used and expired tokens are kept
// for another TTL so that a late request is refused as "used" or "expired", not "unknown".
type Tokens struct {
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	tokens map[string]*tokenState
	byHost map[types.NamespacedName]string
}

type tokenState struct {
	grant Grant
	used  bool
}

// NewTokens returns an empty token store.
func NewTokens(opts TokensOptions) *Tokens {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTokenTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Tokens{
		ttl:    opts.TTL,
		now:    opts.Now,
		tokens: map[string]*tokenState{},
		byHost: map[types.NamespacedName]string{},
	}
}

// Issue returns a new token for host booting from mac, bound to ip unless ip is nil.
func (t *Tokens) Issue(host types.NamespacedName, mac net.HardwareAddr, ip net.IP) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("failed to generate config token for host %s: %w", host, err)
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])

	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.pruneLocked(now)
	if old, ok := t.byHost[host]; ok {
		delete(t.tokens, old)
	}
	g := Grant{Host: host, MAC: cloneMAC(mac), Expires: now.Add(t.ttl)}
	if ip != nil {
		g.IP = normalizeIP(ip)
	}
	t.tokens[token] = &tokenState{grant: g}
	t.byHost[host] = token
	return token, nil
}

// Check reports whether token would be redeemed for r now, without using it up. The Grant
// names the host even when the answer is no, if the token is known.
func (t *Tokens) Check(token string, r Requester) (Grant, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, err := t.checkLocked(token, r)
	if st == nil {
		return Grant{}, err
	}
	return st.grant, err
}

// Redeem uses token up for r: it succeeds once, before expiry, for the requester the token is
// bound to. Concurrent redeems of one token have exactly one winner.
func (t *Tokens) Redeem(token string, r Requester) (Grant, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, err := t.checkLocked(token, r)
	if st == nil {
		return Grant{}, err
	}
	if err != nil {
		return st.grant, err
	}
	st.used = true
	return st.grant, nil
}

func (t *Tokens) checkLocked(token string, r Requester) (*tokenState, error) {
	st, ok := t.tokens[token]
	if !ok {
		return nil, ErrTokenUnknown
	}
	switch {
	case st.used:
		return st, ErrTokenUsed
	case !t.now().Before(st.grant.Expires):
		return st, ErrTokenExpired
	case st.grant.IP != nil && !st.grant.IP.Equal(normalizeIP(r.IP)):
		return st, ErrTokenWrongRequester
	case r.MAC != nil && subtle.ConstantTimeCompare(r.MAC, st.grant.MAC) != 1:
		return st, ErrTokenWrongRequester
	}
	return st, nil
}

// pruneLocked forgets tokens that expired more than a TTL ago.
func (t *Tokens) pruneLocked(now time.Time) {
	for token, st := range t.tokens {
		if now.Sub(st.grant.Expires) > t.ttl {
			delete(t.tokens, token)
			if t.byHost[st.grant.Host] == token {
				delete(t.byHost, st.grant.Host)
			}
		}
	}
}

func cloneMAC(mac net.HardwareAddr) net.HardwareAddr {
	return append(net.HardwareAddr(nil), mac...)
}

// normalizeIP returns the 4-byte form of IPv4 addresses so that comparisons and map keys agree.
func normalizeIP(ip net.IP) net.IP {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}
