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

package bmc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/bougou/go-ipmi/pkg/types"
)

// The IPMI LAN interface: RMCP over UDP, with IPMI v2.0 RMCP+ sessions (ipmi_session.go)
// carrying IPMI messages (ipmi_commands.go). IPMI v1.5 sessions are not offered; IPMI v1.5
// framing is answered only outside a session, for Get Channel Authentication Capabilities,
// which clients send that way before they open an RMCP+ session.

// ipmiState is the IPMI side of a BMC; BMC.mu guards it.
type ipmiState struct {
	// conn is the socket ServeIPMI reads, nil when the BMC does not serve IPMI.
	conn net.PacketConn
	// done is closed when ServeIPMI returns.
	done chan struct{}
	// sessions are the RMCP+ sessions by the BMC's session ID, from Open Session on.
	sessions map[uint32]*ipmiSession
	// opened counts the sessions ever opened, to evict the oldest pending one first.
	opened uint64
	// bootSetInProgress is boot option parameter 0, the lock a client takes while it sets
	// boot options.
	bootSetInProgress bool
}

// maxIPMIPacket is more than any IPMI LAN packet this BMC accepts or sends.
const maxIPMIPacket = 1024

// RMCP header fields (DMTF ASF, used by IPMI LAN).
const (
	rmcpVersion    = 0x06
	rmcpNoAck      = 0xff
	rmcpHeaderSize = 4
	asfIANA        = 4542
	asfPing        = 0x80
	asfPong        = 0x40
)

// StartIPMI serves the BMC's IPMI LAN interface on UDP addr, e.g. "127.0.0.1:0", until
// Close, and returns the address it listens on.
func (b *BMC) StartIPMI(addr string) (string, error) {
	conn, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return "", fmt.Errorf("failed to listen for IPMI on %s: %w", addr, err)
	}
	if err := b.registerIPMI(conn); err != nil {
		_ = conn.Close()
		return "", err
	}
	go func() { _ = b.serveIPMI(conn) }()
	return conn.LocalAddr().String(), nil
}

// ServeIPMI serves the BMC's IPMI LAN interface on conn until Close, which closes conn,
// and returns nil then or the error that made reading conn fail.
//
// The interface controls the first of Config.Systems: an IPMI BMC manages one host. It
// authenticates the Config's user, who has the Administrator privilege, with cipher suite
// 3 (RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128), the one IPMI v2.0 requires of every BMC.
func (b *BMC) ServeIPMI(conn net.PacketConn) error {
	if err := b.registerIPMI(conn); err != nil {
		return err
	}
	return b.serveIPMI(conn)
}

// IPMIAddress is the UDP address the BMC serves IPMI on, or "" when it does not.
func (b *BMC) IPMIAddress() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ipmi.conn == nil {
		return ""
	}
	return b.ipmi.conn.LocalAddr().String()
}

// IPMISessions returns the number of established IPMI sessions: those that completed the
// RAKP handshake and were not closed. Sessions whose handshake is pending do not count;
// the BMC drops the oldest of them when it needs the slot.
func (b *BMC) IPMISessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.ipmi.sessions {
		if s.state == sessionActive {
			n++
		}
	}
	return n
}

func (b *BMC) registerIPMI(conn net.PacketConn) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ipmi.conn != nil {
		return errors.New("bmc: already serving IPMI")
	}
	b.ipmi.conn = conn
	b.ipmi.done = make(chan struct{})
	return nil
}

// closeIPMI stops serving IPMI and waits until the serving goroutine is done.
func (b *BMC) closeIPMI() {
	b.mu.Lock()
	conn, done := b.ipmi.conn, b.ipmi.done
	b.mu.Unlock()
	if conn == nil {
		return
	}
	_ = conn.Close()
	<-done
}

func (b *BMC) serveIPMI(conn net.PacketConn) error {
	b.mu.Lock()
	done := b.ipmi.done
	b.mu.Unlock()
	defer close(done)
	buf := make([]byte, maxIPMIPacket+1)
	for {
		n, from, err := conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("failed to read IPMI packet: %w", err)
		}
		if n > maxIPMIPacket || b.isUnreachable() {
			continue
		}
		reply, events := b.handleIPMIPacket(buf[:n])
		// As with Redfish, hooks see a power change before the client sees the answer.
		b.notify(events)
		if reply != nil {
			_, _ = conn.WriteTo(reply, from)
		}
	}
}

func (b *BMC) isUnreachable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.release != nil
}

// handleIPMIPacket answers one UDP payload: the reply to send, if any, and the power
// changes it caused. Like a real BMC it drops, without an answer, what it cannot parse or
// authenticate.
func (b *BMC) handleIPMIPacket(packet []byte) ([]byte, []PowerEvent) {
	if len(packet) < rmcpHeaderSize+1 || packet[0] != rmcpVersion {
		return nil, nil
	}
	class := packet[3]
	if class&0x80 != 0 { // an RMCP ACK; this BMC never asks for one
		return nil, nil
	}
	switch class & 0x1f {
	case types.MessageClassASF:
		return asfPresencePong(packet), nil
	case types.MessageClassIPMI:
	default:
		return nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ipmi.sessions == nil {
		b.ipmi.sessions = map[uint32]*ipmiSession{}
	}
	if types.AuthType(packet[4]) == types.AuthTypeRMCPPlus {
		return b.handleRMCPPlus(packet[rmcpHeaderSize:])
	}
	return b.handleIPMI15(packet[rmcpHeaderSize:]), nil
}

// asfPresencePong answers an ASF Presence Ping (DSP0136 3.2.4.3), which tells a client
// that IPMI is supported here.
func asfPresencePong(packet []byte) []byte {
	asf := packet[rmcpHeaderSize:]
	if len(asf) < 8 || binary.BigEndian.Uint32(asf) != asfIANA || asf[4] != asfPing {
		return nil
	}
	pong := []byte{rmcpVersion, 0, rmcpNoAck, types.MessageClassASF}
	pong = binary.BigEndian.AppendUint32(pong, asfIANA)
	pong = append(pong, asfPong, asf[5], 0, 16)
	pong = binary.BigEndian.AppendUint32(pong, asfIANA) // no OEM capabilities
	pong = append(pong,
		0, 0, 0, 0, // OEM-defined
		0x81, 0, // IPMI supported, ASF 1.0; no security extensions
		0, 0, 0, 0, 0, 0) // reserved
	return pong
}

// handleIPMI15 answers an IPMI v1.5 packet. Only session-less messages (authentication
// type none, session 0) are accepted, as this BMC offers no v1.5 sessions.
func (b *BMC) handleIPMI15(packet []byte) []byte {
	// Authentication type, sequence number, session ID, message length.
	if len(packet) < 10 || types.AuthType(packet[0]) != types.AuthTypeNone || binary.LittleEndian.Uint32(packet[5:9]) != 0 {
		return nil
	}
	length := int(packet[9])
	if len(packet) < 10+length {
		return nil
	}
	req, ok := parseIPMIRequest(packet[10 : 10+length])
	if !ok {
		return nil
	}
	msg := b.dispatchIPMI(nil, req).message
	out := []byte{rmcpVersion, 0, rmcpNoAck, types.MessageClassIPMI, byte(types.AuthTypeNone)}
	out = append(out, make([]byte, 8)...) // sequence number and session ID: none
	out = append(out, byte(len(msg)))
	return append(out, msg...)
}

// handleRMCPPlus answers an IPMI v2.0 packet: session setup outside a session, or an IPMI
// message inside one.
func (b *BMC) handleRMCPPlus(packet []byte) ([]byte, []PowerEvent) {
	const headerSize = 12
	if len(packet) < headerSize {
		return nil, nil
	}
	flags := packet[1]
	payloadType := types.PayloadType(flags & 0x3f)
	if payloadType == types.PayloadTypeOEM {
		return nil, nil
	}
	sessionID := binary.LittleEndian.Uint32(packet[2:6])
	length := int(binary.LittleEndian.Uint16(packet[10:12]))
	if len(packet) < headerSize+length {
		return nil, nil
	}
	payload := packet[headerSize : headerSize+length]

	if sessionID == 0 {
		if flags&(types.PayloadFlagEncrypted|types.PayloadFlagAuthenticated) != 0 {
			return nil, nil
		}
		var replyType types.PayloadType
		var reply []byte
		switch payloadType {
		case types.PayloadTypeRmcpOpenSessionRequest:
			replyType, reply = types.PayloadTypeRmcpOpenSessionResponse, b.openSession(payload)
		case types.PayloadTypeRAKPMessage1:
			replyType, reply = types.PayloadTypeRAKPMessage2, b.rakp1(payload)
		case types.PayloadTypeRAKPMessage3:
			replyType, reply = types.PayloadTypeRAKPMessage4, b.rakp3(payload)
		case types.PayloadTypeIPMI:
			req, ok := parseIPMIRequest(payload)
			if !ok {
				return nil, nil
			}
			replyType, reply = types.PayloadTypeIPMI, b.dispatchIPMI(nil, req).message
		}
		if reply == nil {
			return nil, nil
		}
		return rmcpPlusPacket(&types.SessionHeader20{AuthType: types.AuthTypeRMCPPlus, PayloadType: replyType}, reply, nil), nil
	}

	s := b.ipmi.sessions[sessionID]
	if s == nil || s.state != sessionActive || payloadType != types.PayloadTypeIPMI {
		return nil, nil
	}
	plain, ok := s.open(packet[:headerSize+length], packet[headerSize+length:], flags)
	if !ok {
		return nil, nil
	}
	req, ok := parseIPMIRequest(plain)
	if !ok {
		return nil, nil
	}
	result := b.dispatchIPMI(s, req)
	return s.seal(result.message), result.events
}

// rmcpPlusPacket is an RMCP packet around an IPMI v2.0 session header, payload and
// session trailer (nil outside a session).
func rmcpPlusPacket(header *types.SessionHeader20, payload []byte, trailer *types.SessionTrailer) []byte {
	header.PayloadLength = uint16(len(payload))
	out := append([]byte{rmcpVersion, 0, rmcpNoAck, types.MessageClassIPMI}, header.Pack()...)
	out = append(out, payload...)
	if trailer != nil {
		out = append(out, trailer.Pack()...)
	}
	return out
}

// ipmiRequest is an IPMI LAN request message (IPMI v2.0 Table 13-8 and 5.1).
type ipmiRequest struct {
	responderAddr, responderLUN uint8
	netFn                       types.NetFn
	requesterAddr, requesterLUN uint8
	sequence                    uint8
	command                     uint8
	data                        []byte
}

// parseIPMIRequest parses a request message and checks its two checksums.
func parseIPMIRequest(msg []byte) (ipmiRequest, bool) {
	if len(msg) < 7 || checksum(msg[:3]) != 0 || checksum(msg[3:]) != 0 || (msg[1]>>2)&1 != 0 {
		return ipmiRequest{}, false
	}
	return ipmiRequest{
		responderAddr: msg[0],
		netFn:         types.NetFn(msg[1] >> 2),
		responderLUN:  msg[1] & 0x03,
		requesterAddr: msg[3],
		sequence:      msg[4] >> 2,
		requesterLUN:  msg[4] & 0x03,
		command:       msg[5],
		data:          msg[6 : len(msg)-1],
	}, true
}

// response is the response message to the request with a completion code and data.
func (r ipmiRequest) response(cc types.CompletionCode, data []byte) []byte {
	msg := []byte{r.requesterAddr, uint8(r.netFn|1)<<2 | r.requesterLUN, 0, r.responderAddr, r.sequence<<2 | r.responderLUN, r.command, uint8(cc)}
	msg[2] = -checksum(msg[:2])
	msg = append(msg, data...)
	return append(msg, -checksum(msg[3:]))
}

// checksum is the IPMI 8-bit checksum's sum: a message part with its checksum sums to 0.
func checksum(data []byte) uint8 {
	var sum uint8
	for _, d := range data {
		sum += d
	}
	return sum
}
