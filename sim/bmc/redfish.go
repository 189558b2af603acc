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
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// ServeHTTP answers a Redfish request.
func (b *BMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.waitIfUnreachable(r) {
		// Close the connection without an answer, as a BMC that vanished would.
		panic(http.ErrAbortHandler)
	}
	path := strings.TrimSuffix(r.URL.Path, "/")

	// The version document, the service root and logging in need no authentication.
	switch {
	case path == versionsPath:
		if allowMethods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, map[string]string{"v1": serviceRootPath})
		}
		return
	case path+"/" == serviceRootPath:
		if allowMethods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, newServiceRoot(b.serviceUUID()))
		}
		return
	case path == sessionsPath && r.Method == http.MethodPost:
		b.createSession(w, r)
		return
	}

	if !b.authenticated(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="Redfish"`)
		writeErrorf(w, http.StatusUnauthorized, "NoValidSession", "Log in with valid credentials.",
			"There is no valid session established with the implementation.")
		return
	}
	switch {
	case path == sessionServicePath:
		if allowMethods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, newSessionService())
		}
	case path == sessionsPath:
		if allowMethods(w, r, http.MethodGet, http.MethodPost) {
			writeJSON(w, http.StatusOK, newCollection(sessionsPath, "#SessionCollection.SessionCollection", "Session Collection", b.sessionPaths()))
		}
	case strings.HasPrefix(path, sessionsPath+"/"):
		b.serveSession(w, r, strings.TrimPrefix(path, sessionsPath+"/"))
	case path == systemsPath:
		if allowMethods(w, r, http.MethodGet) {
			paths := make([]string, 0, len(b.cfg.Systems))
			for _, id := range b.cfg.Systems {
				paths = append(paths, systemsPath+"/"+id)
			}
			writeJSON(w, http.StatusOK, newCollection(systemsPath, "#ComputerSystemCollection.ComputerSystemCollection", "Computer System Collection", paths))
		}
	case strings.HasPrefix(path, systemsPath+"/"):
		b.serveSystem(w, r, strings.TrimPrefix(path, systemsPath+"/"))
	default:
		notFound(w, r)
	}
}

// serveSystem answers requests for a ComputerSystem and its Reset action.
func (b *BMC) serveSystem(w http.ResponseWriter, r *http.Request, rest string) {
	id, sub, _ := strings.Cut(rest, "/")
	b.mu.Lock()
	s := b.systems[id]
	b.mu.Unlock()
	if s == nil || (sub != "" && sub != resetAction) {
		notFound(w, r)
		return
	}
	if sub == resetAction {
		if allowMethods(w, r, http.MethodPost) {
			b.resetSystem(w, r, id, s)
		}
		return
	}
	if !allowMethods(w, r, http.MethodGet, http.MethodPatch) {
		return
	}
	if r.Method == http.MethodPatch {
		b.patchSystem(w, r, s)
		return
	}
	b.mu.Lock()
	cs := newComputerSystem(id, s, b.cfg.ResetTypes)
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, cs)
}

// resetSystem performs #ComputerSystem.Reset.
func (b *BMC) resetSystem(w http.ResponseWriter, r *http.Request, id string, s *system) {
	params, ok := decodeObject(w, r)
	if !ok {
		return
	}
	for name := range params {
		if name != "ResetType" {
			writeErrorf(w, http.StatusBadRequest, "ActionParameterUnknown", "Remove the parameter.",
				"The action ComputerSystem.Reset was submitted with the invalid parameter %s.", name)
			return
		}
	}
	var resetType string
	if raw, found := params["ResetType"]; !found || json.Unmarshal(raw, &resetType) != nil {
		writeErrorf(w, http.StatusBadRequest, "ActionParameterMissing", "Supply a ResetType.",
			"The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.")
		return
	}
	if !slices.Contains(b.cfg.ResetTypes, resetType) {
		writeErrorf(w, http.StatusBadRequest, "ActionParameterValueNotInList", "Use one of ResetType@Redfish.AllowableValues.",
			"The value '%s' for the parameter ResetType in the action ComputerSystem.Reset is not in the list of acceptable values.", resetType)
		return
	}
	b.mu.Lock()
	events, refusal := b.reset(id, s, resetType)
	b.mu.Unlock()
	if refusal != "" {
		writeErrorf(w, http.StatusConflict, "GeneralError", "Power the system on first.", "%s", refusal)
		return
	}
	b.notify(events)
	writeNoContent(w)
}

// writableBoot are the Boot properties a PATCH may set, with their allowed values.
var writableBoot = map[string][]string{
	"BootSourceOverrideEnabled": {OverrideDisabled, OverrideOnce, OverrideContinuous},
	"BootSourceOverrideTarget":  BootTargets,
	"BootSourceOverrideMode":    BootModes,
}

// patchSystem updates the Boot source override, the only writable part of a system.
// It checks every property before it changes any.
func (b *BMC) patchSystem(w http.ResponseWriter, r *http.Request, s *system) {
	body, ok := decodeObject(w, r)
	if !ok {
		return
	}
	update := map[string]string{}
	for name, raw := range body {
		if name != "Boot" {
			writeErrorf(w, http.StatusBadRequest, "PropertyNotWritable", "Remove the property.",
				"The property %s is a read-only property and cannot be assigned a value.", name)
			return
		}
		var boot map[string]json.RawMessage
		if err := json.Unmarshal(raw, &boot); err != nil {
			writeErrorf(w, http.StatusBadRequest, "PropertyValueTypeError", "Send Boot as an object.",
				"The value for the property Boot is of a different type than the property can accept.")
			return
		}
		for prop, rawValue := range boot {
			allowed, writable := writableBoot[prop]
			if !writable {
				writeErrorf(w, http.StatusBadRequest, "PropertyNotWritable", "Remove the property.",
					"The property %s is a read-only property and cannot be assigned a value.", prop)
				return
			}
			var value string
			if err := json.Unmarshal(rawValue, &value); err != nil || !slices.Contains(allowed, value) {
				writeErrorf(w, http.StatusBadRequest, "PropertyValueNotInList", "Use one of "+strings.Join(allowed, ", ")+".",
					"The value %s for the property %s is not in the list of acceptable values.", string(rawValue), prop)
				return
			}
			update[prop] = value
		}
	}
	b.mu.Lock()
	if v, ok := update["BootSourceOverrideEnabled"]; ok {
		s.boot.Enabled = v
	}
	if v, ok := update["BootSourceOverrideTarget"]; ok {
		s.boot.Target = v
	}
	if v, ok := update["BootSourceOverrideMode"]; ok {
		s.boot.Mode = v
	}
	b.mu.Unlock()
	writeNoContent(w)
}

// createSession logs a user in (POST to the Sessions collection).
func (b *BMC) createSession(w http.ResponseWriter, r *http.Request) {
	var login struct {
		UserName string
		Password string
	}
	if err := json.NewDecoder(r.Body).Decode(&login); err != nil {
		writeErrorf(w, http.StatusBadRequest, "MalformedJSON", "Send UserName and Password as JSON.",
			"The request body submitted was malformed JSON and could not be parsed by the receiving service.")
		return
	}
	if !b.validCredentials(login.UserName, login.Password) {
		writeErrorf(w, http.StatusUnauthorized, "NoValidSession", "Log in with valid credentials.",
			"There is no valid session established with the implementation.")
		return
	}
	b.mu.Lock()
	b.nextSession++
	id := strconv.Itoa(b.nextSession)
	token := rand.Text()
	b.sessions[id] = token
	b.mu.Unlock()
	w.Header().Set("X-Auth-Token", token)
	w.Header().Set("Location", sessionsPath+"/"+id)
	writeJSON(w, http.StatusCreated, newSession(id, login.UserName))
}

// serveSession reads or deletes (logs out) a session.
func (b *BMC) serveSession(w http.ResponseWriter, r *http.Request, id string) {
	b.mu.Lock()
	_, found := b.sessions[id]
	b.mu.Unlock()
	if !found {
		notFound(w, r)
		return
	}
	if !allowMethods(w, r, http.MethodGet, http.MethodDelete) {
		return
	}
	if r.Method == http.MethodDelete {
		b.mu.Lock()
		delete(b.sessions, id)
		b.mu.Unlock()
		writeNoContent(w)
		return
	}
	writeJSON(w, http.StatusOK, newSession(id, b.cfg.Username))
}

func (b *BMC) sessionPaths() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	paths := make([]string, 0, len(b.sessions))
	for id := range b.sessions {
		paths = append(paths, sessionsPath+"/"+id)
	}
	slices.Sort(paths)
	return paths
}

// authenticated tells whether a request carries a session token or basic credentials the
// BMC accepts.
func (b *BMC) authenticated(r *http.Request) bool {
	if token := r.Header.Get("X-Auth-Token"); token != "" {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, t := range b.sessions {
			if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
				return true
			}
		}
		return false
	}
	username, password, ok := r.BasicAuth()
	return ok && b.validCredentials(username, password)
}

func (b *BMC) validCredentials(username, password string) bool {
	userOK := subtle.ConstantTimeCompare([]byte(username), []byte(b.cfg.Username))
	passwordOK := subtle.ConstantTimeCompare([]byte(password), []byte(b.cfg.Password))
	return userOK&passwordOK == 1
}

// serviceUUID is the service's UUID, the same for BMCs with the same systems.
func (b *BMC) serviceUUID() string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("talon-sim-bmc:"+strings.Join(b.cfg.Systems, ","))).String()
}

// decodeObject reads a JSON object request body, answering 400 if it is not one.
func decodeObject(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, bool) {
	var body map[string]json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil || body == nil {
		writeErrorf(w, http.StatusBadRequest, "MalformedJSON", "Send a JSON object.",
			"The request body submitted was malformed JSON and could not be parsed by the receiving service.")
		return nil, false
	}
	return body, true
}

// allowMethods answers 405 unless the request uses one of the methods.
func allowMethods(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	if slices.Contains(methods, r.Method) {
		return true
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeErrorf(w, http.StatusMethodNotAllowed, "OperationNotAllowed", "Use one of "+strings.Join(methods, ", ")+".",
		"The HTTP method %s is not allowed on the URI %s.", r.Method, r.URL.Path)
	return false
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeErrorf(w, http.StatusNotFound, "ResourceMissingAtURI", "Use a URI the service lists.",
		"The resource at the URI %s was not found.", r.URL.Path)
}
