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

package power

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/stmcginnis/gofish/schemas"
)

func TestParseAddress(t *testing.T) {
	const supported = "want one of redfish://, redfish+http://, ipmi://"
	for _, tc := range []struct {
		address      string
		wantProtocol protocol
		wantEndpoint string
		wantPath     string
		wantErr      string
	}{
		{address: "redfish://10.0.0.5", wantProtocol: protocolRedfish, wantEndpoint: "https://10.0.0.5"},
		{address: "redfish://bmc.rack1.example.com:8443/", wantProtocol: protocolRedfish, wantEndpoint: "https://bmc.rack1.example.com:8443"},
		{address: "redfish://10.0.0.5/redfish/v1/Systems/1", wantProtocol: protocolRedfish, wantEndpoint: "https://10.0.0.5", wantPath: "/redfish/v1/Systems/1"},
		{address: "redfish://[fd00::5]:443/redfish/v1/Systems/System.Embedded.1/", wantProtocol: protocolRedfish, wantEndpoint: "https://[fd00::5]:443", wantPath: "/redfish/v1/Systems/System.Embedded.1"},
		{address: "REDFISH://10.0.0.5", wantProtocol: protocolRedfish, wantEndpoint: "https://10.0.0.5"},
		{address: "redfish+http://127.0.0.1:8000/redfish/v1/Systems/437XR1138R2", wantProtocol: protocolRedfish, wantEndpoint: "http://127.0.0.1:8000", wantPath: "/redfish/v1/Systems/437XR1138R2"},
		{address: "ipmi://10.0.0.5:623", wantProtocol: protocolIPMI},
		{address: "", wantErr: "empty BMC address: " + supported},
		{address: "10.0.0.5", wantErr: `BMC address "10.0.0.5" has no scheme: ` + supported},
		{address: "https://10.0.0.5", wantErr: `BMC address "https://10.0.0.5" has unsupported scheme "https": ` + supported},
		{address: "idrac-redfish://10.0.0.5", wantErr: `unsupported scheme "idrac-redfish"`},
		{address: "redfish://", wantErr: `BMC address "redfish://" has no host`},
		{address: "redfish://:443", wantErr: `has no host`},
		{address: "redfish:10.0.0.5", wantErr: `has no host`},
		{address: "redfish://10.0.0.5:https", wantErr: `invalid BMC address "redfish://10.0.0.5:https": invalid port`},
		{address: "redfish://10.0.0.5/redfish/v1", wantErr: "the path must name one ComputerSystem, e.g. /redfish/v1/Systems/1"},
		{address: "redfish://10.0.0.5/redfish/v1/Systems/", wantErr: "the path must name one ComputerSystem"},
		{address: "redfish://10.0.0.5/redfish/v1/Systems/1/Bios", wantErr: "the path must name one ComputerSystem"},
		{address: "redfish://10.0.0.5/?insecure=1", wantErr: "must not have a query or fragment"},
		{address: "ipmi://10.0.0.5/1", wantErr: `IPMI address "ipmi://10.0.0.5/1" must not have a path`},
		{address: "redfish://root:s3cret-pw@10.0.0.5", wantErr: `invalid BMC address "redfish://root:xxxxx@10.0.0.5": credentials belong in the Secret`}, //nolint:gosec // a password the parser must not repeat
		{address: "root:s3cret-pw@10.0.0.5", wantErr: `BMC address "xxxxx@10.0.0.5" has unsupported scheme "root"`},
		{address: "redfish://root:s3cret-pw%zz@10.0.0.5", wantErr: `invalid BMC address "redfish://xxxxx@10.0.0.5"`}, //nolint:gosec // a password the parser must not repeat
		{address: "ftp://root:s3cret-pw@10.0.0.5", wantErr: "credentials belong in the Secret"},                      //nolint:gosec // a password the parser must not repeat
	} {
		t.Run(tc.address, func(t *testing.T) {
			g := NewWithT(t)
			a, err := parseAddress(tc.address)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.protocol).To(Equal(tc.wantProtocol))
			g.Expect(a.String()).To(Equal(tc.address))
			g.Expect(a.path).To(Equal(tc.wantPath))
			if tc.wantProtocol == protocolRedfish {
				g.Expect(a.endpoint()).To(Equal(tc.wantEndpoint))
			}
		})
	}
}

func TestNew(t *testing.T) {
	creds := Credentials{Username: "admin", Password: "s3cret-pw"}
	for _, tc := range []struct {
		name     string
		address  string
		creds    Credentials
		opts     []Option
		wantErr  string
		wantKind error
	}{
		{name: "redfish", address: "redfish://10.0.0.5", creds: creds},
		{name: "redfish over HTTP with a timeout", address: "redfish+http://10.0.0.5", creds: creds, opts: []Option{WithTimeout(time.Second)}},
		{name: "IPMI", address: "ipmi://10.0.0.5", creds: creds},
		{name: "IPMI with a port", address: "ipmi://[fd00::5]:6230", creds: creds},
		{name: "IPMI port out of range", address: "ipmi://10.0.0.5:70000", creds: creds, wantErr: `invalid BMC address ipmi://10.0.0.5:70000: invalid port "70000"`},
		{name: "IPMI password too long", address: "ipmi://10.0.0.5", creds: Credentials{Username: "admin", Password: "s3cret-pw-0123456789x"}, wantErr: "password for BMC ipmi://10.0.0.5 is 21 bytes long, IPMI allows at most 20"},
		{name: "IPMI user name too long", address: "ipmi://10.0.0.5", creds: Credentials{Username: "administrator-of-rack1", Password: "s3cret-pw"}, wantErr: "user name for BMC ipmi://10.0.0.5 is 22 bytes long, IPMI allows at most 16"},
		{name: "IPMI without username", address: "ipmi://10.0.0.5", creds: Credentials{Password: "s3cret-pw"}, wantErr: "no username for BMC ipmi://10.0.0.5"},
		{name: "bad scheme", address: "http://10.0.0.5", creds: creds, wantErr: "unsupported scheme"},
		{name: "no username", address: "redfish://10.0.0.5", creds: Credentials{Password: "s3cret-pw"}, wantErr: "no username for BMC redfish://10.0.0.5"},
		{name: "zero timeout", address: "redfish://10.0.0.5", creds: creds, opts: []Option{WithTimeout(0)}, wantErr: "invalid BMC timeout 0s: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := New(tc.address, tc.creds, false, tc.opts...)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c).NotTo(BeNil())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
			if tc.wantKind != nil {
				g.Expect(err).To(MatchError(tc.wantKind))
			}
		})
	}
}

func TestPowerStateMapping(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]State{"On": StateOn, "Off": StateOff, "PoweringOn": StateUnknown, "PoweringOff": StateUnknown, "Paused": StateUnknown, "": StateUnknown} {
		g.Expect(powerState(schemas.PowerState(in))).To(Equal(want), in)
	}
}
