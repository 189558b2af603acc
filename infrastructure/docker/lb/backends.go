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

package lb

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// ReadBackends parses a backends file: one IPv4 or IPv6 address per line; blank lines and
// lines starting with # are ignored.
func ReadBackends(r io.Reader) ([]netip.Addr, error) {
	var backends []netip.Addr
	scanner := bufio.NewScanner(r)
	for line := 1; scanner.Scan(); line++ {
		text := strings.TrimSpace(scanner.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		addr, err := netip.ParseAddr(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		backends = append(backends, addr)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("failed to read backends: %w", err)
	}
	return backends, nil
}
