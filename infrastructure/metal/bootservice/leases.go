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
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// AddressPool is the range full-mode DHCP leases from, and the options that go with a lease.
//
// Leases are kept in memory and never expire: a host keeps its address for the life of the
// process. The pool is meant for the provisioning network's known hosts, not for a general LAN;
// keep the hosts' fixed IPs outside the range.
type AddressPool struct {
	// Start is the first address of the range.
	Start net.IP
	// End is the last address of the range.
	End net.IP
	// Netmask is the subnet mask handed out with each lease.
	Netmask net.IPMask
	// Router is the default gateway handed out, if any.
	Router net.IP
	// DNS are the name servers handed out, if any.
	DNS []net.IP
	// LeaseTime is the lease duration; DefaultLeaseTime when zero.
	LeaseTime time.Duration
}

// DefaultLeaseTime is the full-mode lease time when the pool sets none.
const DefaultLeaseTime = time.Hour

// leases is the full-mode address book.
type leases struct {
	pool       AddressPool
	start, end netip.Addr

	mu    sync.Mutex
	byMAC map[string]netip.Addr
	byIP  map[netip.Addr]string
}

func newLeases(pool AddressPool) (*leases, error) {
	start, ok1 := netip.AddrFromSlice(pool.Start.To4())
	end, ok2 := netip.AddrFromSlice(pool.End.To4())
	if !ok1 || !ok2 || end.Less(start) {
		return nil, fmt.Errorf("invalid DHCP address range %s-%s: want two IPv4 addresses, first to last", pool.Start, pool.End)
	}
	if ones, bits := pool.Netmask.Size(); bits != 32 || ones == 0 {
		return nil, fmt.Errorf("invalid DHCP netmask %s: want an IPv4 mask", pool.Netmask)
	}
	if pool.LeaseTime <= 0 {
		pool.LeaseTime = DefaultLeaseTime
	}
	return &leases{pool: pool, start: start, end: end, byMAC: map[string]netip.Addr{}, byIP: map[netip.Addr]string{}}, nil
}

var errPoolExhausted = errors.New("DHCP address pool exhausted")

// addressFor returns the address of mac: fixed when the host has one, else the one it holds
// or the lowest free address of the pool.
func (l *leases) addressFor(mac net.HardwareAddr, fixed net.IP) (net.IP, error) {
	if fixed != nil {
		if v4 := fixed.To4(); v4 != nil {
			return v4, nil
		}
		return nil, fmt.Errorf("fixed IP %s is not an IPv4 address", fixed)
	}
	key := mac.String()
	l.mu.Lock()
	defer l.mu.Unlock()
	if ip, ok := l.byMAC[key]; ok {
		return net.IP(ip.AsSlice()), nil
	}
	for ip := l.start; ip.IsValid() && !l.end.Less(ip); ip = ip.Next() {
		if _, taken := l.byIP[ip]; !taken {
			l.byMAC[key] = ip
			l.byIP[ip] = key
			return net.IP(ip.AsSlice()), nil
		}
	}
	return nil, errPoolExhausted
}

// lookup returns the pool address mac holds, or nil.
func (l *leases) lookup(mac net.HardwareAddr) net.IP {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ip, ok := l.byMAC[mac.String()]; ok {
		return net.IP(ip.AsSlice())
	}
	return nil
}

// addOptions adds the lease's options to a reply.
func (p *AddressPool) addOptions(reply *dhcpv4.DHCPv4) {
	reply.UpdateOption(dhcpv4.OptSubnetMask(p.Netmask))
	reply.UpdateOption(dhcpv4.OptIPAddressLeaseTime(p.LeaseTime))
	if p.Router != nil {
		reply.UpdateOption(dhcpv4.OptRouter(p.Router))
	}
	if len(p.DNS) > 0 {
		reply.UpdateOption(dhcpv4.OptDNS(p.DNS...))
	}
}

// DefaultAnnouncementTTL is how long an address a host announced in proxy mode stays its
// address for the boot service: its DHCP exchange comes seconds before its script request.
const DefaultAnnouncementTTL = 10 * time.Minute

// announcements are, in proxy mode, the addresses known hosts announced in their DHCP
// exchange: the address a PXE client asks the site's DHCP server for (option 50 of its
// broadcast REQUEST), or presents to this proxy (ciaddr of a ProxyDHCP REQUEST on port 4011).
// That is what the boot service observes of a host's address when it leases none itself; the
// latest announcement of a MAC address wins.
type announcements struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	byMAC map[string]announcement
}

type announcement struct {
	ip netip.Addr
	at time.Time
}

func newAnnouncements(ttl time.Duration, now func() time.Time) *announcements {
	if ttl <= 0 {
		ttl = DefaultAnnouncementTTL
	}
	if now == nil {
		now = time.Now
	}
	return &announcements{ttl: ttl, now: now, byMAC: map[string]announcement{}}
}

// record notes that mac announced ip; addresses that are not unicast IPv4 are ignored.
func (a *announcements) record(mac net.HardwareAddr, ip net.IP) {
	addr, ok := netip.AddrFromSlice(ip.To4())
	if !ok || addr.IsUnspecified() || addr.IsMulticast() || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for key, an := range a.byMAC {
		if now.Sub(an.at) > a.ttl {
			delete(a.byMAC, key)
		}
	}
	a.byMAC[mac.String()] = announcement{ip: addr, at: now}
}

// forget drops what mac announced.
func (a *announcements) forget(mac net.HardwareAddr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byMAC, mac.String())
}

// lookup returns the address mac announced within the TTL, or nil.
func (a *announcements) lookup(mac net.HardwareAddr) net.IP {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	an, ok := a.byMAC[mac.String()]
	if !ok || a.now().Sub(an.at) > a.ttl {
		return nil
	}
	return net.IP(an.ip.AsSlice())
}
