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
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/talon-capi/talon/sim/bmc"
)

const (
	user     = "root"
	password = "calvin-test"
)

func startBMC(t *testing.T, cfg bmc.Config) *bmc.BMC {
	t.Helper()
	cfg.Username, cfg.Password = user, password
	b := bmc.NewServer(cfg)
	t.Cleanup(b.Close)
	return b
}

// response is what a raw Redfish request got back.
type response struct {
	status int
	header http.Header
	body   map[string]any
}

// messageID is the MessageId of a Redfish error response's first message.
func (r response) messageID() string {
	e, _ := r.body["error"].(map[string]any)
	infos, _ := e["@Message.ExtendedInfo"].([]any)
	if len(infos) == 0 {
		return ""
	}
	info, _ := infos[0].(map[string]any)
	id, _ := info["MessageId"].(string)
	return id
}

// request sends a raw request, with basic auth unless auth is false.
func request(t *testing.T, b *bmc.BMC, method, path, body string, auth bool) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &r.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, data)
		}
	}
	return r
}

// TestSchema reads the BMC with gofish's own types: the shapes are the ones a Redfish
// client expects.
func TestSchema(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{Systems: []string{"1", "2"}, ResetTypes: []string{"On", "ForceOff", "ForceRestart"}})
	b.SetPower("2", true)

	c, err := gofish.ConnectContext(t.Context(), gofish.ClientConfig{Endpoint: b.URL(), Username: user, Password: password, BasicAuth: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Service.RedfishVersion).To(Equal("1.20.0"))
	systems, err := c.Service.Systems()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(systems).To(HaveLen(2))
	for _, s := range systems {
		g.Expect(s.ODataID).To(Equal("/redfish/v1/Systems/" + s.ID))
		g.Expect(s.PowerState).To(Equal(map[string]schemas.PowerState{"1": schemas.OffPowerState, "2": schemas.OnPowerState}[s.ID]))
		g.Expect(s.Boot.BootSourceOverrideEnabled).To(Equal(schemas.DisabledBootSourceOverrideEnabled))
		g.Expect(s.Boot.BootSourceOverrideMode).To(Equal(schemas.UEFIBootSourceOverrideMode))
		g.Expect(s.Boot.AllowableBootSourceOverrideTargetValues).To(ContainElements(schemas.PxeBootSource, schemas.HddBootSource))
		g.Expect(s.GetSupportedResetTypes()).To(Equal([]schemas.ResetType{"On", "ForceOff", "ForceRestart"}))
	}

	system := systems[0]
	g.Expect(system.SetBoot(&schemas.Boot{
		BootSourceOverrideEnabled: schemas.OnceBootSourceOverrideEnabled,
		BootSourceOverrideTarget:  schemas.PxeBootSource,
		BootSourceOverrideMode:    schemas.LegacyBootSourceOverrideMode,
	})).To(Succeed())
	g.Expect(b.BootOverride(system.ID)).To(Equal(bmc.BootOverride{Enabled: "Once", Target: "Pxe", Mode: "Legacy"}))
	_, err = system.Reset(schemas.ForceOffResetType)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = system.Reset(schemas.NmiResetType)
	g.Expect(err).To(MatchError(ContainSubstring("not supported by this service")))
}

// TestSessions: a client that logs in gets a session token that authenticates, and
// logging out closes the session.
func TestSessions(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{})
	_, err := gofish.ConnectContext(t.Context(), gofish.ClientConfig{Endpoint: b.URL(), Username: user, Password: "wrong"})
	g.Expect(err).To(MatchError(ContainSubstring("401")))
	g.Expect(b.Sessions()).To(BeZero())

	c, err := gofish.ConnectContext(t.Context(), gofish.ClientConfig{Endpoint: b.URL(), Username: user, Password: password})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Sessions()).To(Equal(1))
	session, err := c.GetSession()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(session.ID).To(Equal("/redfish/v1/SessionService/Sessions/1"))
	systems, err := c.Service.Systems()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(systems).To(HaveLen(1))

	c.Logout()
	g.Expect(b.Sessions()).To(BeZero())
	_, err = c.Service.Systems()
	g.Expect(err).To(MatchError(ContainSubstring("401")))
}

// TestAuthentication: the version document and the service root are open, everything
// else needs credentials.
func TestAuthentication(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{})

	r := request(t, b, http.MethodGet, "/redfish", "", false)
	g.Expect(r.status).To(Equal(http.StatusOK))
	g.Expect(r.body).To(Equal(map[string]any{"v1": "/redfish/v1/"}))
	r = request(t, b, http.MethodGet, "/redfish/v1/", "", false)
	g.Expect(r.status).To(Equal(http.StatusOK))
	g.Expect(r.header.Get("OData-Version")).To(Equal("4.0"))
	g.Expect(r.body).To(HaveKeyWithValue("Systems", map[string]any{"@odata.id": "/redfish/v1/Systems"}))

	r = request(t, b, http.MethodGet, "/redfish/v1/Systems", "", false)
	g.Expect(r.status).To(Equal(http.StatusUnauthorized))
	g.Expect(r.header.Get("WWW-Authenticate")).To(HavePrefix("Basic"))
	g.Expect(r.messageID()).To(Equal("Base.1.16.NoValidSession"))
	r = request(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`, false)
	g.Expect(r.status).To(Equal(http.StatusUnauthorized))
	g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOff))

	r = request(t, b, http.MethodGet, "/redfish/v1/Systems", "", true)
	g.Expect(r.status).To(Equal(http.StatusOK))
	g.Expect(r.body).To(HaveKeyWithValue("Members@odata.count", BeNumerically("==", 1)))
}

// TestReset: each reset type changes the power state as a server's would, reports the
// changes, and the BMC refuses what a BMC refuses.
func TestReset(t *testing.T) {
	for _, tc := range []struct {
		name       string
		startOn    bool
		body       string
		wantStatus int
		wantID     string
		wantEvents []bool
	}{
		{name: "On", body: `{"ResetType":"On"}`, wantStatus: http.StatusNoContent, wantEvents: []bool{true}},
		{name: "On when on", startOn: true, body: `{"ResetType":"On"}`, wantStatus: http.StatusNoContent},
		{name: "ForceOff", startOn: true, body: `{"ResetType":"ForceOff"}`, wantStatus: http.StatusNoContent, wantEvents: []bool{false}},
		{name: "GracefulShutdown", startOn: true, body: `{"ResetType":"GracefulShutdown"}`, wantStatus: http.StatusNoContent, wantEvents: []bool{false}},
		{name: "PushPowerButton when off", body: `{"ResetType":"PushPowerButton"}`, wantStatus: http.StatusNoContent, wantEvents: []bool{true}},
		{name: "PushPowerButton when on", startOn: true, body: `{"ResetType":"PushPowerButton"}`, wantStatus: http.StatusNoContent, wantEvents: []bool{false}},
		{name: "ForceRestart", startOn: true, body: `{"ResetType":"ForceRestart"}`, wantStatus: http.StatusNoContent, wantEvents: []bool{false, true}},
		{name: "ForceRestart when off", body: `{"ResetType":"ForceRestart"}`, wantStatus: http.StatusConflict, wantID: "Base.1.16.GeneralError"},
		{name: "PowerCycle when off", body: `{"ResetType":"PowerCycle"}`, wantStatus: http.StatusNoContent, wantEvents: []bool{true}},
		{name: "not allowed", body: `{"ResetType":"Nmi"}`, wantStatus: http.StatusBadRequest, wantID: "Base.1.16.ActionParameterValueNotInList"},
		{name: "no ResetType", body: `{}`, wantStatus: http.StatusBadRequest, wantID: "Base.1.16.ActionParameterMissing"},
		{name: "unknown parameter", body: `{"ResetType":"On","Delay":5}`, wantStatus: http.StatusBadRequest, wantID: "Base.1.16.ActionParameterUnknown"},
		{name: "not JSON", body: `ResetType=On`, wantStatus: http.StatusBadRequest, wantID: "Base.1.16.MalformedJSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var (
				mu     sync.Mutex
				events []bool
				seen   []string
				b      *bmc.BMC
			)
			b = startBMC(t, bmc.Config{OnPowerChange: func(e bmc.PowerEvent) {
				// The hook may read the BMC: it runs without the BMC's lock.
				state := b.PowerState(e.System)
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e.On)
				seen = append(seen, state)
			}})
			b.SetPower("1", tc.startOn)
			mu.Lock()
			events, seen = nil, nil
			mu.Unlock()

			r := request(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", tc.body, true)
			g.Expect(r.status).To(Equal(tc.wantStatus))
			g.Expect(r.messageID()).To(Equal(tc.wantID))
			mu.Lock()
			defer mu.Unlock()
			g.Expect(events).To(Equal(tc.wantEvents))
			wantOn := tc.startOn
			if len(tc.wantEvents) > 0 {
				wantOn = tc.wantEvents[len(tc.wantEvents)-1]
			}
			wantState := map[bool]string{true: bmc.PowerOn, false: bmc.PowerOff}[wantOn]
			g.Expect(b.PowerState("1")).To(Equal(wantState))
			for _, state := range seen {
				g.Expect(state).To(Equal(wantState), "the hook sees the state the request left")
			}
		})
	}
}

// TestPatchBoot: only the boot override is writable, only with allowed values, and a
// request with one bad property changes nothing.
func TestPatchBoot(t *testing.T) {
	initial := bmc.BootOverride{Enabled: "Disabled", Target: "None", Mode: "UEFI"}
	for _, tc := range []struct {
		name       string
		body       string
		wantStatus int
		wantID     string
		want       bmc.BootOverride
	}{
		{name: "one-time PXE", body: `{"Boot":{"BootSourceOverrideEnabled":"Once","BootSourceOverrideTarget":"Pxe","BootSourceOverrideMode":"Legacy"}}`,
			wantStatus: http.StatusNoContent, want: bmc.BootOverride{Enabled: "Once", Target: "Pxe", Mode: "Legacy"}},
		{name: "target only", body: `{"Boot":{"BootSourceOverrideTarget":"Hdd"}}`,
			wantStatus: http.StatusNoContent, want: bmc.BootOverride{Enabled: "Disabled", Target: "Hdd", Mode: "UEFI"}},
		{name: "unknown target", body: `{"Boot":{"BootSourceOverrideEnabled":"Once","BootSourceOverrideTarget":"Floppy"}}`,
			wantStatus: http.StatusBadRequest, wantID: "Base.1.16.PropertyValueNotInList", want: initial},
		{name: "unknown mode", body: `{"Boot":{"BootSourceOverrideEnabled":"Once","BootSourceOverrideMode":"CSM"}}`,
			wantStatus: http.StatusBadRequest, wantID: "Base.1.16.PropertyValueNotInList", want: initial},
		{name: "read-only property", body: `{"PowerState":"On"}`,
			wantStatus: http.StatusBadRequest, wantID: "Base.1.16.PropertyNotWritable", want: initial},
		{name: "read-only boot property", body: `{"Boot":{"BootOrder":["Boot0001"]}}`,
			wantStatus: http.StatusBadRequest, wantID: "Base.1.16.PropertyNotWritable", want: initial},
		{name: "not JSON", body: `{"Boot":`, wantStatus: http.StatusBadRequest, wantID: "Base.1.16.MalformedJSON", want: initial},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := startBMC(t, bmc.Config{})
			r := request(t, b, http.MethodPatch, "/redfish/v1/Systems/1", tc.body, true)
			g.Expect(r.status).To(Equal(tc.wantStatus))
			g.Expect(r.messageID()).To(Equal(tc.wantID))
			g.Expect(b.BootOverride("1")).To(Equal(tc.want))
			g.Expect(b.PowerState("1")).To(Equal(bmc.PowerOff))
		})
	}
}

// TestNotFoundAndMethods: unknown resources are 404 and wrong methods 405, as Redfish
// errors.
func TestNotFoundAndMethods(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{})
	for _, path := range []string{"/redfish/v1/Systems/2", "/redfish/v1/Systems/1/Bios", "/redfish/v1/Chassis", "/redfish/v1/SessionService/Sessions/7"} {
		r := request(t, b, http.MethodGet, path, "", true)
		g.Expect(r.status).To(Equal(http.StatusNotFound), path)
		g.Expect(r.messageID()).To(Equal("Base.1.16.ResourceMissingAtURI"), path)
	}
	r := request(t, b, http.MethodDelete, "/redfish/v1/Systems/1", "", true)
	g.Expect(r.status).To(Equal(http.StatusMethodNotAllowed))
	g.Expect(r.header.Get("Allow")).To(Equal("GET, PATCH"))
	r = request(t, b, http.MethodGet, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", "", true)
	g.Expect(r.status).To(Equal(http.StatusMethodNotAllowed))
	g.Expect(r.header.Get("Allow")).To(Equal("POST"))
}

// TestUnreachable: an unreachable BMC holds requests until the client gives up, drops
// them when it answers again, and Close does not wait for them.
func TestUnreachable(t *testing.T) {
	g := NewWithT(t)
	b := startBMC(t, bmc.Config{})
	client := &http.Client{Timeout: 200 * time.Millisecond}

	b.SetUnreachable(true)
	start := time.Now()
	resp, err := client.Get(b.URL() + "/redfish/v1/") //nolint:noctx // the client's timeout is under test
	if err == nil {
		_ = resp.Body.Close()
	}
	g.Expect(err).To(MatchError(ContainSubstring("Client.Timeout exceeded")))
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))

	// The request the client gave up on is let go.
	g.Eventually(b.Held).WithTimeout(2 * time.Second).Should(BeZero())
	// A new connection each time: the transport retries a request on a reused one.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	dropped := make(chan error, 1)
	go func() {
		resp, err := fresh.Get(b.URL() + "/redfish/v1/") //nolint:noctx // no timeout: the BMC must drop it
		if err == nil {
			_ = resp.Body.Close()
		}
		dropped <- err
	}()
	g.Eventually(b.Held).WithTimeout(2*time.Second).Should(Equal(1), "the request reached the BMC")
	b.SetUnreachable(false)
	g.Eventually(dropped).WithTimeout(2 * time.Second).Should(Receive(HaveOccurred()))
	g.Expect(request(t, b, http.MethodGet, "/redfish/v1/", "", false).status).To(Equal(http.StatusOK))

	b.SetUnreachable(true)
	go func() {
		resp, err := fresh.Get(b.URL() + "/redfish/v1/") //nolint:noctx // no timeout: Close must drop it
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	g.Eventually(b.Held).WithTimeout(2*time.Second).Should(Equal(1), "the request reached the BMC")
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	g.Eventually(closed).WithTimeout(2 * time.Second).Should(BeClosed())
}

// TestStart: a BMC serves on the listener it is given, over HTTP or HTTPS.
func TestStart(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		g := NewWithT(t)
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		g.Expect(err).NotTo(HaveOccurred())
		b := bmc.New(bmc.Config{Username: user, Password: password})
		g.Expect(b.URL()).To(BeEmpty())
		if useTLS {
			b.StartTLS(l)
			g.Expect(b.URL()).To(Equal("https://" + l.Addr().String()))
			g.Expect(b.Certificate()).NotTo(BeNil())
		} else {
			b.Start(l)
			g.Expect(b.URL()).To(Equal("http://" + l.Addr().String()))
			g.Expect(b.Certificate()).To(BeNil())
		}
		g.Expect(b.Address()).To(Equal(l.Addr().String()))
		b.Close()
	}
}
