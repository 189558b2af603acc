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
	"testing"

	"github.com/bougou/go-ipmi/pkg/rmcpplus"
	"github.com/bougou/go-ipmi/pkg/types"
)

// FuzzIPMIPacket feeds arbitrary UDP payloads to the IPMI packet handler: it must not
// panic, and whatever it answers must be an RMCP packet.
func FuzzIPMIPacket(f *testing.F) {
	getAuthCaps := ipmiRequest{responderAddr: 0x20, netFn: types.NetFnAppRequest, requesterAddr: 0x81, command: 0x38, data: []byte{0x8e, 0x04}}
	f.Add(append([]byte{rmcpVersion, 0, rmcpNoAck, types.MessageClassIPMI, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}, requestMessage(getAuthCaps)...))
	auth, integrity, crypt := rmcpplus.NewAlgorithmPayloads(ipmiAuthAlg, ipmiIntegrityAlg, ipmiCryptAlg)
	open := &rmcpplus.OpenSessionRequest{RemoteConsoleSessionID: 0xa0a1a2a3, AuthenticationPayload: auth, IntegrityPayload: integrity, ConfidentialityPayload: crypt}
	f.Add(rmcpPlusPacket(&types.SessionHeader20{AuthType: types.AuthTypeRMCPPlus, PayloadType: types.PayloadTypeRmcpOpenSessionRequest}, open.Pack(), nil))
	rakp1 := make([]byte, 28)
	rakp1[27] = 0xff // a user name longer than the message
	f.Add(rmcpPlusPacket(&types.SessionHeader20{AuthType: types.AuthTypeRMCPPlus, PayloadType: types.PayloadTypeRAKPMessage1}, rakp1, nil))
	f.Add(rmcpPlusPacket(&types.SessionHeader20{AuthType: types.AuthTypeRMCPPlus, PayloadType: types.PayloadTypeRAKPMessage3}, make([]byte, 8), nil))
	f.Add(rmcpPlusPacket(&types.SessionHeader20{AuthType: types.AuthTypeRMCPPlus, PayloadType: types.PayloadTypeIPMI, PayloadAuthenticated: true, PayloadEncrypted: true, SessionID: 1, Sequence: 1}, make([]byte, 32), nil))
	f.Add([]byte{rmcpVersion, 0, rmcpNoAck, types.MessageClassASF, 0, 0, 0x11, 0xbe, asfPing, 0, 0, 0})

	b := New(Config{Username: "root", Password: "calvin-test"})
	f.Fuzz(func(t *testing.T, packet []byte) {
		reply, _ := b.handleIPMIPacket(packet)
		if len(reply) > 0 && (len(reply) < rmcpHeaderSize || reply[0] != rmcpVersion) {
			t.Fatalf("reply is not an RMCP packet: %x", reply)
		}
	})
}

// requestMessage packs a request message with its checksums, as a client does.
func requestMessage(r ipmiRequest) []byte {
	msg := []byte{r.responderAddr, uint8(r.netFn)<<2 | r.responderLUN, 0, r.requesterAddr, r.sequence<<2 | r.requesterLUN, r.command}
	msg[2] = -checksum(msg[:2])
	msg = append(msg, r.data...)
	return append(msg, -checksum(msg[3:]))
}
