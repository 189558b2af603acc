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

// Package imagefactory is a client of Talos Image Factory (https://factory.talos.dev, or a
// factory of one's own): it checks system extension names against the factory's list for a
// Talos version, creates schematics and names the installer images built from them.
package imagefactory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v4"
)

// DefaultURL is the public Image Factory.
const DefaultURL = "https://factory.talos.dev"

// Schematic is what the factory builds a Talos image from, in the factory's own format.
type Schematic struct {
	// Overlay is a board or platform overlay.
	Overlay *Overlay `yaml:"overlay,omitempty"`
	// Customization is the image's extensions, kernel arguments and boot settings.
	Customization Customization `yaml:"customization,omitempty"`
}

// Overlay is a schematic's overlay.
type Overlay struct {
	Image string `yaml:"image"`
	Name  string `yaml:"name"`
}

// Customization is a schematic's customization section.
type Customization struct {
	ExtraKernelArgs  []string          `yaml:"extraKernelArgs,omitempty"`
	SystemExtensions *SystemExtensions `yaml:"systemExtensions,omitempty"`
	Bootloader       string            `yaml:"bootloader,omitempty"`
}

// SystemExtensions lists official extensions by name, e.g. siderolabs/iscsi-tools.
type SystemExtensions struct {
	OfficialExtensions []string `yaml:"officialExtensions,omitempty"`
}

// Marshal encodes the schematic as the factory takes it.
func (s Schematic) Marshal() ([]byte, error) {
	return yaml.Marshal(s)
}

// Client talks to one Image Factory. It remembers each version's extension list and each
// schematic's ID, which never change, so that a factory is asked once per process.
type Client struct {
	// URL is the factory's address, e.g. https://factory.talos.dev.
	URL string
	// HTTP makes the requests; a client with a 30-second timeout when nil.
	HTTP *http.Client

	mu         sync.Mutex
	extensions map[string][]string
	schematics map[string]string
}

// UnavailableError says the factory could not be asked: unreachable, or an answer that is
// not one. The request can be retried.
type UnavailableError struct {
	URL string
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("Image Factory %s is unavailable: %v", e.URL, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// RejectedError is a request the factory refused as invalid (an HTTP 4xx answer): a
// schematic it does not accept, a Talos version it does not build. Retrying does not help.
type RejectedError struct {
	URL    string
	Reason string
}

func (e *RejectedError) Error() string {
	if strings.Contains(e.Reason, "/extensions/official answered 404") {
		return fmt.Sprintf("Image Factory %s does not build this Talos release: %s", e.URL, e.Reason)
	}
	return fmt.Sprintf("Image Factory %s refused the request: %s", e.URL, e.Reason)
}

// UnknownExtensionsError names extensions the factory does not offer for a Talos version.
// The factory itself accepts any name in a schematic and fails only when an image is built,
// so Talon checks first.
type UnknownExtensionsError struct {
	Names   []string
	Version string
	URL     string
}

func (e *UnknownExtensionsError) Error() string {
	return fmt.Sprintf("system extension %s is not an official extension of Talos %s at Image Factory %s (GET %s lists them)",
		strings.Join(e.Names, ", "), e.Version, e.URL, e.listURL())
}

func (e *UnknownExtensionsError) listURL() string {
	return strings.TrimSuffix(e.URL, "/") + "/version/" + e.Version + "/extensions/official"
}

// OfficialExtensions is the names of the official extensions the factory offers for a
// Talos version (GET /version/<version>/extensions/official).
func (c *Client) OfficialExtensions(ctx context.Context, version string) ([]string, error) {
	c.mu.Lock()
	cached, ok := c.extensions[version]
	c.mu.Unlock()
	if ok {
		return cached, nil
	}
	body, err := c.do(ctx, http.MethodGet, "/version/"+url.PathEscape(version)+"/extensions/official", nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var list []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, &UnavailableError{URL: c.URL, Err: fmt.Errorf("the extension list of Talos %s is not JSON: %w", version, err)}
	}
	names := make([]string, 0, len(list))
	for _, e := range list {
		names = append(names, e.Name)
	}
	c.mu.Lock()
	if c.extensions == nil {
		c.extensions = map[string][]string{}
	}
	c.extensions[version] = names
	c.mu.Unlock()
	return names, nil
}

// CreateSchematic uploads s (POST /schematics) and returns its ID. Schematics are content
// addressed: the same schematic always has the same ID.
func (c *Client) CreateSchematic(ctx context.Context, s Schematic) (string, error) {
	data, err := s.Marshal()
	if err != nil {
		return "", fmt.Errorf("failed to encode the schematic: %w", err)
	}
	c.mu.Lock()
	id, ok := c.schematics[string(data)]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	body, err := c.do(ctx, http.MethodPost, "/schematics", data, http.StatusCreated, http.StatusOK)
	if err != nil {
		return "", err
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &created); err != nil || len(created.ID) != 64 {
		return "", &UnavailableError{URL: c.URL, Err: fmt.Errorf("the answer to POST /schematics is not a schematic ID: %q", body)}
	}
	c.mu.Lock()
	if c.schematics == nil {
		c.schematics = map[string]string{}
	}
	c.schematics[string(data)] = created.ID
	c.mu.Unlock()
	return created.ID, nil
}

// Resolved is what a schematic resolves to for one Talos version.
type Resolved struct {
	// SchematicID is the schematic's ID at the factory.
	SchematicID string
	// Installer is the installer image of that schematic and version.
	Installer string
}

// Resolve checks that the factory builds version and offers the schematic's extensions for
// it (its list of official extensions), creates the schematic and names its installer image;
// secureBoot selects the SecureBoot installer. Nothing is created when an extension is
// unknown.
func (c *Client) Resolve(ctx context.Context, s Schematic, version string, secureBoot bool) (Resolved, error) {
	// Asked even without extensions: it is how the factory says whether it builds the release.
	offered, err := c.OfficialExtensions(ctx, version)
	if err != nil {
		return Resolved{}, err
	}
	if s.Customization.SystemExtensions != nil {
		var unknown []string
		for _, name := range s.Customization.SystemExtensions.OfficialExtensions {
			if !slices.Contains(offered, name) {
				unknown = append(unknown, name)
			}
		}
		if len(unknown) > 0 {
			return Resolved{}, &UnknownExtensionsError{Names: unknown, Version: version, URL: c.URL}
		}
	}
	id, err := c.CreateSchematic(ctx, s)
	if err != nil {
		return Resolved{}, err
	}
	installer, err := InstallerImage(c.URL, id, version, secureBoot)
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{SchematicID: id, Installer: installer}, nil
}

// InstallerImage is the installer image the factory at factoryURL serves for a schematic and
// Talos version: <host>/metal-installer/<schematic>:<version>, or metal-installer-secureboot.
func InstallerImage(factoryURL, schematicID, version string, secureBoot bool) (string, error) {
	u, err := url.Parse(factoryURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("the Image Factory URL %q is not a URL like %s", factoryURL, DefaultURL)
	}
	repository := "metal-installer"
	if secureBoot {
		repository += "-secureboot"
	}
	return fmt.Sprintf("%s/%s/%s:%s", u.Host, repository, schematicID, version), nil
}

// maxAnswer bounds what the client reads of an answer.
const maxAnswer = 16 << 20

func (c *Client) do(ctx context.Context, method, path string, body []byte, okCodes ...int) ([]byte, error) {
	httpClient := c.HTTP
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, &UnavailableError{URL: c.URL, Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, &UnavailableError{URL: c.URL, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, &UnavailableError{URL: c.URL, Err: err}
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
		return nil, &RejectedError{URL: c.URL, Reason: fmt.Sprintf("%s %s answered %s: %s", method, path, resp.Status, strings.TrimSpace(string(answer)))}
	}
	if !slices.Contains(okCodes, resp.StatusCode) {
		return nil, &UnavailableError{URL: c.URL, Err: fmt.Errorf("%s %s answered %s: %s", method, path, resp.Status, strings.TrimSpace(string(answer)))}
	}
	return answer, nil
}

// IsUnavailable reports whether err says the factory could not be asked.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}
