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
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // RAKP-HMAC-SHA1 and HMAC-SHA1-96 are what IPMI cipher suite 3 is
	"encoding/binary"

	"github.com/bougou/go-ipmi/pkg/rmcpplus"
	"github.com/bougou/go-ipmi/pkg/types"
	"github.com/google/uuid"
)

// RMCP+ session setup (IPMI v2.0 13.15-13.33) with cipher suite 3 only: RAKP-HMAC-SHA1
// authentication, HMAC-SHA1-96 integrity and AES-CBC-128 confidentiality. The user's
// password is the key (Kuid); the BMC key Kg is not set, so it is Kuid too.

// The algorithms of cipher suite 3, the only one this BMC offers.
const (
	ipmiAuthAlg      = types.AuthAlg_HMAC_SHA1
	ipmiIntegrityAlg = types.IntegrityAlg_HMAC_SHA1_96
	ipmiCryptAlg     = types.CryptAlg_AES_CBC_128
	ipmiCipherSuite  = types.CipherSuiteID3
)

const (
	// maxIPMISessions is how many sessions, pending or established, the BMC holds at once;
	// real BMCs have a handful of slots.
	maxIPMISessions = 4
	// maxIPMIPassword is the longest IPMI v2.0 password; shorter ones are padded with zeros.
	maxIPMIPassword = 20
	// integrityCodeSize is the length of an HMAC-SHA1-96 AuthCode.
	integrityCodeSize = 12
	// sequenceWindow is how far an inbound session sequence number may be from the highest
	// one received; one behind it is accepted once.
	sequenceWindow = 16
	// nextHeaderRMCPPlus is the session trailer's Next Header value.
	nextHeaderRMCPPlus = 0x07
)

// sessionState is how far an RMCP+ session got.
type sessionState int

const (
	// sessionOpened: Open Session answered, RAKP message 1 expected.
	sessionOpened sessionState = iota
	// sessionChallenged: RAKP message 2 sent, RAKP message 3 expected.
	sessionChallenged
	// sessionActive: RAKP message 4 sent; IPMI messages flow.
	sessionActive
)

// ipmiSession is one RMCP+ session.
type ipmiSession struct {
	id, consoleID uint32
	state         sessionState
	order         uint64
	// limit is the highest privilege Open Session asked for; maxPrivilege the one RAKP
	// message 1 asked for; privilege the current one.
	limit, maxPrivilege, privilege types.PrivilegeLevel
	// role is RAKP message 1's privilege byte, as the key exchange codes use it.
	role                   uint8
	username               []byte
	consoleRand, bmcRand   [16]byte
	sik, k1, k2            []byte
	inSequence, outSeqence uint32
	// seen has bit i set when inSequence-i was received.
	seen uint32
}

// openSession answers an RMCP+ Open Session Request.
func (b *BMC) openSession(payload []byte) []byte {
	var req rmcpplus.OpenSessionRequest
	if err := req.Unpack(payload); err != nil {
		return nil
	}
	res := rmcpplus.OpenSessionResponse{MessageTag: req.MessageTag, RemoteConsoleSessionID: req.RemoteConsoleSessionID}
	limit := req.RequestedMaximumPrivilegeLevel
	if limit == types.PrivilegeLevelUnspecified {
		limit = types.PrivilegeLevelAdministrator
	}
	status := types.RmcpStatusCodeNoErrors
	switch {
	case req.RemoteConsoleSessionID == 0:
		status = types.RmcpStatusCodeInvalidSessionID
	case limit > types.PrivilegeLevelAdministrator:
		status = types.RmcpStatusCodeInvalidRole
	case !offered(req.AuthenticationPayload.PayloadType, 0x00, req.AuthenticationPayload.PayloadLength, req.AuthAlg, uint8(ipmiAuthAlg)):
		status = types.RmcpStatusCodeInvalidAuthAlg
	case !offered(req.IntegrityPayload.PayloadType, 0x01, req.IntegrityPayload.PayloadLength, req.IntegrityAlg, uint8(ipmiIntegrityAlg)):
		status = types.RmcpStatusCodeInvalidIntegrityAlg
	case !offered(req.ConfidentialityPayload.PayloadType, 0x02, req.ConfidentialityPayload.PayloadLength, req.CryptAlg, uint8(ipmiCryptAlg)):
		status = types.RmcpStatusCodeInvalidConfidentAlg
	case !b.freeSessionSlot():
		status = types.RmcpStatusCodeNoResToCreateSess
	}
	if status != types.RmcpStatusCodeNoErrors {
		res.RmcpStatusCode = status
		return res.Pack()
	}
	s := &ipmiSession{id: b.newSessionID(), consoleID: req.RemoteConsoleSessionID, limit: limit, order: b.ipmi.opened}
	b.ipmi.opened++
	b.ipmi.sessions[s.id] = s
	res.MaximumPrivilegeLevel = uint8(limit)
	res.ManagedSystemSessionID = s.id
	res.AuthenticationPayload, res.IntegrityPayload, res.ConfidentialityPayload = rmcpplus.NewAlgorithmPayloads(ipmiAuthAlg, ipmiIntegrityAlg, ipmiCryptAlg)
	return res.Pack()
}

// offered tells whether an Open Session algorithm record proposes the algorithm this BMC
// has; a record of length 0 leaves the choice to the BMC.
func offered(recordType, wantType, length, alg, want uint8) bool {
	return recordType == wantType && (length == 0 || (length == 8 && alg == want))
}

// freeSessionSlot makes room for a new session by dropping the oldest pending one if all
// slots are taken, and tells whether there is room.
func (b *BMC) freeSessionSlot() bool {
	if len(b.ipmi.sessions) < maxIPMISessions {
		return true
	}
	var oldest *ipmiSession
	for _, s := range b.ipmi.sessions {
		if s.state != sessionActive && (oldest == nil || s.order < oldest.order) {
			oldest = s
		}
	}
	if oldest == nil {
		return false
	}
	delete(b.ipmi.sessions, oldest.id)
	return true
}

// newSessionID is a random session ID that is neither 0 nor in use.
func (b *BMC) newSessionID() uint32 {
	for {
		var id [4]byte
		_, _ = rand.Read(id[:])
		if n := binary.LittleEndian.Uint32(id[:]); n != 0 && b.ipmi.sessions[n] == nil {
			return n
		}
	}
}

// rakp1 answers RAKP Message 1 with RAKP Message 2: the BMC's random number and GUID,
// and a code that proves it knows the user's password. An unknown user gets the status
// Unauthorized Name; a wrong password is noticed by the client, whose code differs.
func (b *BMC) rakp1(payload []byte) []byte {
	// RAKPMessage1.Unpack trusts the user name length; check it first.
	if len(payload) < 28 || len(payload) < 28+int(payload[27]) {
		return nil
	}
	var req rmcpplus.RAKPMessage1
	if err := req.Unpack(payload); err != nil {
		return nil
	}
	res := rmcpplus.RAKPMessage2{MessageTag: req.MessageTag}
	s := b.ipmi.sessions[req.ManagedSystemSessionID]
	if s == nil || s.state != sessionOpened {
		res.RmcpStatusCode = types.RmcpStatusCodeInvalidSessionID
		return res.Pack()
	}
	res.RemoteConsoleSessionID = s.consoleID
	priv := req.RequestedMaximumPrivilegeLevel
	switch {
	case priv < types.PrivilegeLevelCallback || priv > types.PrivilegeLevelAdministrator:
		res.RmcpStatusCode = types.RmcpStatusCodeInvalidRole
	case priv > s.limit:
		res.RmcpStatusCode = types.RmcpStatusCodeUnauthorizedRoleOfPriLevel
	case len(req.Username) > rmcpplus.MaxUserNameLength:
		res.RmcpStatusCode = types.RmcpStatusCodeInvalidNameLength
	case string(req.Username) != b.cfg.Username:
		res.RmcpStatusCode = types.RmcpStatusCodeUnauthorizedName
	}
	if res.RmcpStatusCode != types.RmcpStatusCodeNoErrors {
		delete(b.ipmi.sessions, s.id)
		return res.Pack()
	}
	s.state, s.maxPrivilege, s.role = sessionChallenged, priv, payload[24]
	s.username, s.consoleRand = req.Username, req.RemoteConsoleRandomNumber
	_, _ = rand.Read(s.bmcRand[:])
	guid := b.ipmiGUID()
	res.ManagedSystemRandomNumber, res.ManagedSystemGUID = s.bmcRand, guid
	res.KeyExchangeAuthenticationCode = hmacSHA1(b.userKey(),
		le32(s.consoleID), le32(s.id), s.consoleRand[:], s.bmcRand[:], guid[:], s.userBytes())
	return res.Pack()
}

// rakp3 checks RAKP Message 3, the client's proof that it knows the password, and answers
// with RAKP Message 4, which activates the session.
func (b *BMC) rakp3(payload []byte) []byte {
	if len(payload) < 8 {
		return nil
	}
	var req rmcpplus.RAKPMessage3
	res := rmcpplus.RAKPMessage4{MessageTag: payload[0]}
	s := b.ipmi.sessions[binary.LittleEndian.Uint32(payload[4:8])]
	if s == nil || s.state != sessionChallenged {
		res.RmcpStatusCode = types.RmcpStatusCodeInvalidSessionID
		return res.Pack()
	}
	res.MgmtConsoleSessionID = s.consoleID
	if types.RmcpStatusCode(payload[1]) != types.RmcpStatusCodeNoErrors {
		// The client gave up on the session (it did not trust RAKP Message 2).
		delete(b.ipmi.sessions, s.id)
		return nil
	}
	want := hmacSHA1(b.userKey(), s.bmcRand[:], le32(s.consoleID), s.userBytes())
	if err := req.Unpack(payload, ipmiAuthAlg); err != nil || !hmac.Equal(req.KeyExchangeAuthenticationCode, want) {
		delete(b.ipmi.sessions, s.id)
		res.RmcpStatusCode = types.RmcpStatusCodeInvalidIntegrityCheckValue
		return res.Pack()
	}
	s.sik = hmacSHA1(b.userKey(), s.consoleRand[:], s.bmcRand[:], s.userBytes())
	s.k1 = hmacSHA1(s.sik, bytes.Repeat([]byte{0x01}, sha1.Size))
	s.k2 = hmacSHA1(s.sik, bytes.Repeat([]byte{0x02}, sha1.Size))
	s.state = sessionActive
	s.privilege = min(types.PrivilegeLevelUser, s.maxPrivilege)
	guid := b.ipmiGUID()
	res.IntegrityCheckValue = hmacSHA1(s.sik, s.consoleRand[:], le32(s.id), guid[:])[:integrityCodeSize]
	return res.Pack()
}

// userKey is Kuid: the password, zero-padded to 20 bytes.
func (b *BMC) userKey() []byte {
	key := make([]byte, maxIPMIPassword)
	copy(key, b.cfg.Password)
	return key
}

// ipmiGUID is the BMC's GUID, the Redfish service UUID.
func (b *BMC) ipmiGUID() [16]byte {
	return uuid.MustParse(b.serviceUUID())
}

// userBytes is the role, user name length and user name, as the RAKP codes cover them.
func (s *ipmiSession) userBytes() []byte {
	return append([]byte{s.role, byte(len(s.username))}, s.username...)
}

// open checks and decrypts an inbound session packet: the header and payload, trailer
// the bytes after them. It accepts only packets authenticated and encrypted with the
// session's keys, with a sequence number in the window.
func (s *ipmiSession) open(headerAndPayload, trailer []byte, flags uint8) ([]byte, bool) {
	if flags&types.PayloadFlagAuthenticated == 0 || flags&types.PayloadFlagEncrypted == 0 {
		return nil, false
	}
	pad := types.IntegrityPadLen(12, len(headerAndPayload)-12)
	if len(trailer) != pad+2+integrityCodeSize || int(trailer[pad]) != pad || trailer[pad+1] != nextHeaderRMCPPlus {
		return nil, false
	}
	signed := append(append([]byte{}, headerAndPayload...), trailer[:pad+2]...)
	if !hmac.Equal(trailer[pad+2:], hmacSHA1(s.k1, signed)[:integrityCodeSize]) {
		return nil, false
	}
	if !s.acceptSequence(binary.LittleEndian.Uint32(headerAndPayload[6:10])) {
		return nil, false
	}
	return s.decrypt(headerAndPayload[12:])
}

// acceptSequence tells whether an inbound sequence number is new and within the window,
// and records it.
func (s *ipmiSession) acceptSequence(seq uint32) bool {
	switch {
	case seq == 0:
		return false
	case seq > s.inSequence:
		shift := seq - s.inSequence
		if shift > sequenceWindow {
			return false
		}
		s.seen = s.seen<<shift | 1
		s.inSequence = seq
		return true
	default:
		back := s.inSequence - seq
		if back >= sequenceWindow || s.seen&(1<<back) != 0 {
			return false
		}
		s.seen |= 1 << back
		return true
	}
}

// decrypt undoes AES-CBC-128 (IPMI v2.0 13.29): a 16-byte IV, then the data, pad bytes
// 1, 2, ... and the pad length, encrypted with the first 16 bytes of K2.
func (s *ipmiSession) decrypt(payload []byte) ([]byte, bool) {
	if len(payload) < 2*aes.BlockSize || len(payload)%aes.BlockSize != 0 {
		return nil, false
	}
	block, err := aes.NewCipher(s.k2[:16])
	if err != nil {
		return nil, false
	}
	plain := make([]byte, len(payload)-aes.BlockSize)
	cipher.NewCBCDecrypter(block, payload[:aes.BlockSize]).CryptBlocks(plain, payload[aes.BlockSize:])
	pad := int(plain[len(plain)-1])
	if pad >= aes.BlockSize {
		return nil, false
	}
	data := plain[:len(plain)-1-pad]
	for i, p := range plain[len(data) : len(plain)-1] {
		if int(p) != i+1 {
			return nil, false
		}
	}
	return data, true
}

// seal wraps an IPMI message for the client: encrypted, authenticated, and numbered with
// the BMC's own sequence, in a packet addressed to the client's session ID.
func (s *ipmiSession) seal(msg []byte) []byte {
	padLen := aes.BlockSize - (len(msg)+1)%aes.BlockSize
	if padLen == aes.BlockSize {
		padLen = 0
	}
	plain := append([]byte{}, msg...)
	for i := range padLen {
		plain = append(plain, byte(i+1))
	}
	plain = append(plain, byte(padLen))
	payload := make([]byte, aes.BlockSize+len(plain))
	_, _ = rand.Read(payload[:aes.BlockSize])
	block, _ := aes.NewCipher(s.k2[:16])
	// The IV is the random first block of payload.
	cipher.NewCBCEncrypter(block, payload[:aes.BlockSize]).CryptBlocks(payload[aes.BlockSize:], plain) //nolint:gosec // the IV is random, from crypto/rand

	s.outSeqence++
	header := &types.SessionHeader20{
		AuthType:             types.AuthTypeRMCPPlus,
		PayloadEncrypted:     true,
		PayloadAuthenticated: true,
		PayloadType:          types.PayloadTypeIPMI,
		SessionID:            s.consoleID,
		Sequence:             s.outSeqence,
		PayloadLength:        uint16(len(payload)),
	}
	pad := types.IntegrityPadLen(12, len(payload))
	trailer := &types.SessionTrailer{IntegrityPAD: bytes.Repeat([]byte{0xff}, pad), PadLength: uint8(pad), NextHeader: nextHeaderRMCPPlus}
	signed := append(append(header.Pack(), payload...), trailer.Pack()...)
	trailer.AuthCode = hmacSHA1(s.k1, signed)[:integrityCodeSize]
	return rmcpPlusPacket(header, payload, trailer)
}

func hmacSHA1(key []byte, parts ...[]byte) []byte {
	mac := hmac.New(sha1.New, key)
	for _, p := range parts {
		mac.Write(p)
	}
	return mac.Sum(nil)
}

func le32(v uint32) []byte {
	return binary.LittleEndian.AppendUint32(nil, v)
}
