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
	"encoding/json"
	"fmt"
	"net/http"
)

// The URIs of the resources the BMC serves (DSP0266 fixes the service root and the
// collections' conventional places).
const (
	versionsPath       = "/redfish"
	serviceRootPath    = "/redfish/v1/"
	systemsPath        = "/redfish/v1/Systems"
	sessionServicePath = "/redfish/v1/SessionService"
	sessionsPath       = "/redfish/v1/SessionService/Sessions"
	resetAction        = "Actions/ComputerSystem.Reset"
)

// baseRegistry prefixes the MessageIds of the DMTF Base message registry.
const baseRegistry = "Base.1.16."

// link is a Redfish reference to another resource.
type link struct {
	ODataID string `json:"@odata.id"`
}

// resourceHeader are the properties every Redfish resource has.
type resourceHeader struct {
	ODataID   string `json:"@odata.id"`
	ODataType string `json:"@odata.type"`
	ID        string `json:"Id"`
	Name      string `json:"Name"`
}

// collection is a Redfish resource collection.
type collection struct {
	ODataID     string `json:"@odata.id"`
	ODataType   string `json:"@odata.type"`
	Name        string `json:"Name"`
	MemberCount int    `json:"Members@odata.count"`
	Members     []link `json:"Members"`
}

func newCollection(path, typ, name string, memberPaths []string) collection {
	c := collection{ODataID: path, ODataType: typ, Name: name, MemberCount: len(memberPaths), Members: []link{}}
	for _, p := range memberPaths {
		c.Members = append(c.Members, link{ODataID: p})
	}
	return c
}

// serviceRoot is the ServiceRoot resource.
type serviceRoot struct {
	resourceHeader
	RedfishVersion string `json:"RedfishVersion"`
	UUID           string `json:"UUID"`
	Vendor         string `json:"Vendor"`
	Product        string `json:"Product"`
	Systems        link   `json:"Systems"`
	SessionService link   `json:"SessionService"`
	Links          struct {
		Sessions link `json:"Sessions"`
	} `json:"Links"`
}

func newServiceRoot(uuid string) serviceRoot {
	root := serviceRoot{
		resourceHeader: resourceHeader{ODataID: serviceRootPath, ODataType: "#ServiceRoot.v1_17_0.ServiceRoot", ID: "RootService", Name: "Root Service"},
		RedfishVersion: "1.20.0",
		UUID:           uuid,
		Vendor:         "Talon",
		Product:        "Talon simulated BMC",
		Systems:        link{ODataID: systemsPath},
		SessionService: link{ODataID: sessionServicePath},
	}
	root.Links.Sessions = link{ODataID: sessionsPath}
	return root
}

// sessionService is the SessionService resource.
type sessionService struct {
	resourceHeader
	ServiceEnabled bool `json:"ServiceEnabled"`
	SessionTimeout int  `json:"SessionTimeout"`
	Sessions       link `json:"Sessions"`
}

func newSessionService() sessionService {
	return sessionService{
		resourceHeader: resourceHeader{ODataID: sessionServicePath, ODataType: "#SessionService.v1_1_9.SessionService", ID: "SessionService", Name: "Session Service"},
		ServiceEnabled: true,
		SessionTimeout: 1800,
		Sessions:       link{ODataID: sessionsPath},
	}
}

// session is a Session resource; its password is never shown.
type session struct {
	resourceHeader
	UserName    string `json:"UserName"`
	SessionType string `json:"SessionType"`
}

func newSession(id, username string) session {
	return session{
		resourceHeader: resourceHeader{ODataID: sessionsPath + "/" + id, ODataType: "#Session.v1_7_0.Session", ID: id, Name: "User Session"},
		UserName:       username,
		SessionType:    "Redfish",
	}
}

// computerSystem is the part of a ComputerSystem resource the BMC simulates.
type computerSystem struct {
	resourceHeader
	SystemType   string `json:"SystemType"`
	Manufacturer string `json:"Manufacturer"`
	Model        string `json:"Model"`
	PowerState   string `json:"PowerState"`
	Status       struct {
		State  string `json:"State"`
		Health string `json:"Health"`
	} `json:"Status"`
	Boot struct {
		BootSourceOverrideEnabled        string   `json:"BootSourceOverrideEnabled"`
		BootSourceOverrideTarget         string   `json:"BootSourceOverrideTarget"`
		BootSourceOverrideTargetAllowed  []string `json:"BootSourceOverrideTarget@Redfish.AllowableValues"`
		BootSourceOverrideMode           string   `json:"BootSourceOverrideMode"`
		BootSourceOverrideEnabledAllowed []string `json:"BootSourceOverrideEnabled@Redfish.AllowableValues"`
	} `json:"Boot"`
	Actions struct {
		Reset struct {
			Target           string   `json:"target"`
			ResetTypeAllowed []string `json:"ResetType@Redfish.AllowableValues"`
		} `json:"#ComputerSystem.Reset"`
	} `json:"Actions"`
}

func newComputerSystem(id string, s *system, resetTypes []string) computerSystem {
	path := systemsPath + "/" + id
	cs := computerSystem{
		resourceHeader: resourceHeader{ODataID: path, ODataType: "#ComputerSystem.v1_22_0.ComputerSystem", ID: id, Name: "Simulated system " + id},
		SystemType:     "Physical",
		Manufacturer:   "Talon",
		Model:          "Simulated server",
		PowerState:     s.power,
	}
	cs.Status.State, cs.Status.Health = "Enabled", "OK"
	cs.Boot.BootSourceOverrideEnabled = s.boot.Enabled
	cs.Boot.BootSourceOverrideEnabledAllowed = []string{OverrideDisabled, OverrideOnce, OverrideContinuous}
	cs.Boot.BootSourceOverrideTarget = s.boot.Target
	cs.Boot.BootSourceOverrideTargetAllowed = BootTargets
	cs.Boot.BootSourceOverrideMode = s.boot.Mode
	cs.Actions.Reset.Target = path + "/" + resetAction
	cs.Actions.Reset.ResetTypeAllowed = resetTypes
	return cs
}

// errorResponse is a Redfish error response (DSP0266, "Error responses").
type errorResponse struct {
	Error struct {
		Code         string    `json:"code"`
		Message      string    `json:"message"`
		ExtendedInfo []message `json:"@Message.ExtendedInfo"`
	} `json:"error"`
}

// message is a Redfish Message object.
type message struct {
	ODataType       string `json:"@odata.type"`
	MessageID       string `json:"MessageId"`
	Message         string `json:"Message"`
	MessageSeverity string `json:"MessageSeverity"`
	Resolution      string `json:"Resolution"`
}

// writeJSON writes a Redfish response body.
func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeErrorf writes a Redfish error with one message of the Base registry.
func writeErrorf(w http.ResponseWriter, status int, messageID, resolution, format string, args ...any) {
	var e errorResponse
	e.Error.Code = baseRegistry + "GeneralError"
	e.Error.Message = "A general error has occurred.  See ExtendedInfo for more information."
	e.Error.ExtendedInfo = []message{{
		ODataType:       "#Message.v1_1_1.Message",
		MessageID:       baseRegistry + messageID,
		Message:         fmt.Sprintf(format, args...),
		MessageSeverity: "Critical",
		Resolution:      resolution,
	}}
	writeJSON(w, status, e)
}

// writeNoContent answers a request that succeeded without a body.
func writeNoContent(w http.ResponseWriter) {
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(http.StatusNoContent)
}
