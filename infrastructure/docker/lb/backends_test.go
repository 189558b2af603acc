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
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestReadBackends(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    []netip.Addr
		wantErr string
	}{
		{
			name: "one address per line",
			file: "172.20.0.3\n172.20.0.4\nfd00::5\n",
			want: []netip.Addr{netip.MustParseAddr("172.20.0.3"), netip.MustParseAddr("172.20.0.4"), netip.MustParseAddr("fd00::5")},
		},
		{
			name: "comments, blank lines and spaces are ignored",
			file: "# control-plane nodes of demo\n\n  172.20.0.3  \n\t# leaving: 172.20.0.4\n172.20.0.5",
			want: []netip.Addr{netip.MustParseAddr("172.20.0.3"), netip.MustParseAddr("172.20.0.5")},
		},
		{
			name: "an empty file has no backends",
			file: "",
		},
		{
			name:    "an invalid line is named",
			file:    "# nodes\n172.20.0.3\n172.20.0.4:6443\n",
			wantErr: "line 3: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			backends, err := ReadBackends(strings.NewReader(tt.file))
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(HavePrefix(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(backends).To(Equal(tt.want))
		})
	}
}
