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

package bmc_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/talon-capi/talon/sim/bmc"
)

// startIPMI starts a BMC that serves only IPMI on 127.0.0.1 and stops it when the test
// ends.
func startIPMI(t *testing.T, cfg bmc.Config) *bmc.BMC {
	t.Helper()
	cfg.Username, cfg.Password = user, password
	b := bmc.New(cfg)
	if _, err := b.StartIPMI("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// ipmiClient returns a go-ipmi lanplus client for the BMC, not yet connected.
func ipmiClient(t *testing.T, b *bmc.BMC, username, pass string) *client.Client {
	t.Helper()
	host, port, err := net.SplitHostPort(b.IPMIAddress())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	c, err := client.NewClient(host, p, username, pass)
	if err != nil {
		t.Fatal(err)
	}
	return c.WithTimeout(200 * time.Millisecond).WithRetry(1)
}

// connect logs in to the BMC and logs out when the test ends.
func connect(t *testing.T, b *bmc.BMC) *client.Client {
	t.Helper()
	c := ipmiClient(t, b, user, password)
	if err := c.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// completionCode is the IPMI completion code of a go-ipmi error, or 0.
func completionCode(err error) types.CompletionCode {
	if rerr, ok := types.IsResponseError(err); ok {
		return rerr.CompletionCode()
	}
	return 0
}

// events records a BMC's power events.
type events struct {
	mu   sync.Mutex
	list []bmc.PowerEvent
}

func (e *events) record(event bmc.PowerEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, event)
}

func (e *events) get() []bmc.PowerEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]bmc.PowerEvent(nil), e.list...)
}

func (e *events) on() []bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	on := make([]bool, 0, len(e.list))
	for _, event := range e.list {
		on = append(on, event.On)
	}
	return on
}

// TestIPMIChassis: the chassis commands change the first system's power as the
// matching Redfish resets do, and Get Chassis Status reads it back.
func TestIPMIChassis(t *testing.T) {
	g := NewWithT(t)
	rec := &events{}
	b := startIPMI(t, bmc.Config{Systems: []string{"blade-1", "blade-2"}, OnPowerChange: rec.record})
	c := connect(t, b)
	ctx := t.Context()
	powerIsOn := func() bool {
		status, err := c.GetChassisStatus(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		return status.PowerIsOn
	}

	g.Expect(powerIsOn()).To(BeFalse())
	_, err := c.ChassisControl(ctx, chassis.ChassisControlPowerCycle)
	g.Expect(completionCode(err)).To(Equal(types.CodeNotSupported), "a power cycle needs a system that is on")
	_, err = c.ChassisControl(ctx, chassis.ChassisControlPowerUp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(powerIsOn()).To(BeTrue())
	g.Expect(b.PowerState("blade-1")).To(Equal(bmc.PowerOn))
	g.Expect(b.PowerState("blade-2")).To(Equal(bmc.PowerOff))

	_, err = c.ChassisControl(ctx, chassis.ChassisControlPowerCycle)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.ChassisControl(ctx, chassis.ChassisControlHardReset)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.ChassisControl(ctx, chassis.ChassisControlPowerDown)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(powerIsOn()).To(BeFalse())
	_, err = c.ChassisControl(ctx, chassis.ChassisControlHardReset)
	g.Expect(completionCode(err)).To(Equal(types.CodeNotSupported))

	g.Expect(b.Resets("blade-1")).To(Equal([]string{"On", "PowerCycle", "ForceRestart", "ForceOff"}))
	g.Expect(rec.on()).To(Equal([]bool{true, false, true, false, true, false}))

	b.SetIgnorePower(true)
	_, err = c.ChassisControl(ctx, chassis.ChassisControlPowerUp)
	g.Expect(err).NotTo(HaveOccurred(), "a broken power controller still accepts the command")
	g.Expect(powerIsOn()).To(BeFalse())
}

// TestIPMIBootFlags: the boot flags set the system's boot override, read back the same,
// and a one-time override is gone once the system boots with it.
func TestIPMIBootFlags(t *testing.T) {
	g := NewWithT(t)
	rec := &events{}
	b := startIPMI(t, bmc.Config{OnPowerChange: rec.record})
	c := connect(t, b)
	ctx := t.Context()

	g.Expect(c.SetBootParamBootFlags(ctx, &types.BootOptionParam_BootFlags{
		BootFlagsValid: true, BIOSBootType: types.BIOSBootTypeLegacy, BootDeviceSelector: types.BootDeviceSelectorForcePXE,
	})).To(Succeed())
	want := bmc.BootOverride{Enabled: "Once", Target: "Pxe", Mode: "Legacy"}
	g.Expect(b.BootOverride("1")).To(Equal(want))
	flags := &types.BootOptionParam_BootFlags{}
	g.Expect(c.GetSystemBootOptionsParamFor(ctx, flags)).To(Succeed())
	g.Expect(flags.BootFlagsValid).To(BeTrue())
	g.Expect(flags.Persist).To(BeFalse())
	g.Expect(flags.BIOSBootType).To(Equal(types.BIOSBootTypeLegacy))
	g.Expect(flags.BootDeviceSelector).To(Equal(types.BootDeviceSelectorForcePXE))

	_, err := c.ChassisControl(ctx, chassis.ChassisControlPowerUp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.get()).To(Equal([]bmc.PowerEvent{{System: "1", On: true, Boot: want}}))
	g.Expect(c.GetSystemBootOptionsParamFor(ctx, flags)).To(Succeed())
	g.Expect(flags.BootFlagsValid).To(BeFalse(), "the BMC clears the valid bit when the host boots")

	g.Expect(c.SetBootDevice(ctx, types.BootDeviceSelectorForceHardDrive, types.BIOSBootTypeEFI, true)).To(Succeed())
	g.Expect(b.BootOverride("1")).To(Equal(bmc.BootOverride{Enabled: "Continuous", Target: "Hdd", Mode: "UEFI"}))

	// Set in progress is a lock: a second client cannot take it until the first is done.
	g.Expect(c.SetBootParamSetInProgress(ctx, types.SetInProgress_SetInProgress)).To(Succeed())
	err = c.SetBootParamSetInProgress(ctx, types.SetInProgress_SetInProgress)
	g.Expect(completionCode(err)).To(Equal(types.CodeParamConfigSetInProgressConflict))
	g.Expect(c.SetBootParamSetInProgress(ctx, types.SetInProgress_SetComplete)).To(Succeed())
}

// TestIPMISessions: a login with the right credentials holds one session until it logs
// out; a wrong password or user fails the RAKP handshake as on a real BMC, and leaves
// no session.
func TestIPMISessions(t *testing.T) {
	g := NewWithT(t)
	b := startIPMI(t, bmc.Config{})

	c := ipmiClient(t, b, user, password)
	g.Expect(c.Connect(t.Context())).To(Succeed())
	g.Expect(b.IPMISessions()).To(Equal(1))
	g.Expect(c.Close(t.Context())).To(Succeed())
	g.Expect(b.IPMISessions()).To(BeZero())

	err := ipmiClient(t, b, user, "wrong").Connect(t.Context())
	g.Expect(err).To(MatchError(ContainSubstring(client.ErrRAKPAuthentication.Error())))
	err = ipmiClient(t, b, "nobody", password).Connect(t.Context())
	g.Expect(err).To(MatchError(ContainSubstring(types.NewRmcpStatusError(types.RmcpStatusCodeUnauthorizedName).Error())))
	g.Expect(b.IPMISessions()).To(BeZero())

	// The BMC offers cipher suite 3 only.
	err = ipmiClient(t, b, user, password).WithCipherSuiteID(types.CipherSuiteID17).Connect(t.Context())
	g.Expect(err).To(MatchError(ContainSubstring(types.NewRmcpStatusError(types.RmcpStatusCodeInvalidAuthAlg).Error())))
	c = ipmiClient(t, b, user, password)
	g.Expect(c.Connect(t.Context())).To(Succeed())
	records, err := c.GetAllChannelCipherSuites(t.Context(), types.ChannelNumberSelf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(records).To(HaveLen(1))
	g.Expect(records[0].CipherSuitID).To(Equal(types.CipherSuiteID3))
	g.Expect(c.Close(t.Context())).To(Succeed())
}

// TestIPMIPrivilege: a session at the User privilege reads the chassis status but may
// not control the chassis, and unknown commands are invalid.
func TestIPMIPrivilege(t *testing.T) {
	g := NewWithT(t)
	b := startIPMI(t, bmc.Config{})
	c := ipmiClient(t, b, user, password).WithMaxPrivilegeLevel(types.PrivilegeLevelUser)
	g.Expect(c.Connect(t.Context())).To(Succeed())
	t.Cleanup(func() { _ = c.Close(context.Background()) })

	_, err := c.GetChassisStatus(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.ChassisControl(t.Context(), chassis.ChassisControlPowerUp)
	g.Expect(completionCode(err)).To(Equal(types.CodeInsufficientPrivilege))
	_, err = c.SetSessionPrivilegeLevel(t.Context(), types.PrivilegeLevelAdministrator)
	g.Expect(completionCode(err)).To(Equal(types.CodeSetSessionPrivilegeLevelExceedsLimit))
	_, err = c.GetDeviceID(t.Context())
	g.Expect(completionCode(err)).To(Equal(types.CodeInvalidCommand))
	g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOff))
}

// TestIPMIUnreachable: an unreachable BMC drops IPMI packets, so logins time out, and
// answers again when it is reachable.
func TestIPMIUnreachable(t *testing.T) {
	g := NewWithT(t)
	b := startIPMI(t, bmc.Config{})
	pong, err := ipmiClient(t, b, user, password).RmcpPing(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pong.IPMISupported).To(BeTrue())

	b.SetUnreachable(true)
	err = ipmiClient(t, b, user, password).WithTimeout(100 * time.Millisecond).Connect(t.Context())
	g.Expect(err).To(MatchError(ContainSubstring("no matching IPMI response")))

	b.SetUnreachable(false)
	c := ipmiClient(t, b, user, password)
	g.Expect(c.Connect(t.Context())).To(Succeed())
	g.Expect(c.Close(t.Context())).To(Succeed())
}

// relay forwards UDP packets between one client and the BMC and keeps what the client
// sent, so a test can send it again, changed or not.
type relay struct {
	conn     net.PacketConn
	upstream *net.UDPConn

	mu   sync.Mutex
	sent [][]byte
}

func startRelay(t *testing.T, b *bmc.BMC) *relay {
	t.Helper()
	conn, err := (&net.ListenConfig{}).ListenPacket(t.Context(), "udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := (&net.Dialer{}).DialContext(t.Context(), "udp", b.IPMIAddress())
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{conn: conn, upstream: upstream.(*net.UDPConn)}
	t.Cleanup(func() { _ = conn.Close(); _ = upstream.Close() })
	clients := make(chan net.Addr, 1)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.sent = append(r.sent, append([]byte(nil), buf[:n]...))
			r.mu.Unlock()
			select {
			case clients <- from:
			default:
			}
			_, _ = upstream.Write(buf[:n])
		}
	}()
	go func() {
		client := <-clients
		buf := make([]byte, 2048)
		for {
			n, err := upstream.Read(buf)
			if err != nil {
				return
			}
			_, _ = conn.WriteTo(buf[:n], client)
		}
	}()
	return r
}

func (r *relay) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

func (r *relay) packet(i int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.sent[i]...)
}

// TestIPMIIntegrity: the BMC ignores a session packet it already received and one that
// was changed on the way, as a real BMC does against replay and tampering.
func TestIPMIIntegrity(t *testing.T) {
	g := NewWithT(t)
	b := startIPMI(t, bmc.Config{})
	r := startRelay(t, b)
	host, port, _ := net.SplitHostPort(r.conn.LocalAddr().String())
	p, _ := strconv.Atoi(port)
	c, err := client.NewClient(host, p, user, password)
	g.Expect(err).NotTo(HaveOccurred())
	c.WithTimeout(200 * time.Millisecond).WithRetry(0)
	g.Expect(c.Connect(t.Context())).To(Succeed())
	t.Cleanup(func() { _ = c.Close(context.Background()) })

	powerUp := r.count()
	_, err = c.ChassisControl(t.Context(), chassis.ChassisControlPowerUp)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.ChassisControl(t.Context(), chassis.ChassisControlPowerDown)
	g.Expect(err).NotTo(HaveOccurred())

	replayed := r.packet(powerUp)
	tampered := r.packet(powerUp)
	tampered[10] += 5 // a new sequence number, which the AuthCode does not cover
	for _, packet := range [][]byte{replayed, tampered} {
		_, err := r.upstream.Write(packet)
		g.Expect(err).NotTo(HaveOccurred())
	}
	// The BMC answers packets in order: once this is answered, the two above were handled.
	status, err := c.GetChassisStatus(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.PowerIsOn).To(BeFalse())
	g.Expect(b.Resets("1")).To(Equal([]string{"On", "ForceOff"}))
}
