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

package setup

import (
	"net"
	"testing"

	"github.com/spf13/pflag"
)

// TestBootServiceFlags: the boot service's flags as the install manifests pass them, where
// 0.0.0.0 stands for an address that is not set (clusterctl has no empty default), and the
// HTTP server's default port listens on the provisioning network only.
func TestBootServiceFlags(t *testing.T) {
	manifest := []string{"--boot-service", "--boot-server-ip=10.10.0.2", "--boot-interface=eno2",
		"--dhcp-pool-start=0.0.0.0", "--dhcp-pool-end=0.0.0.0", "--dhcp-netmask=255.255.255.0", "--dhcp-router=0.0.0.0"}
	parse := func(t *testing.T, args ...string) (*Settings, error) {
		t.Helper()
		s := NewSettings()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		s.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return s, s.Validate()
	}

	s, err := parse(t, append(manifest, "--dhcp-mode=proxy")...)
	if err != nil {
		t.Fatalf("proxy mode needs no pool: %v", err)
	}
	if s.Metal.Service.Pool != nil || s.Metal.Service.Interface != "eno2" || !s.Metal.Service.ServerIP.Equal(net.IPv4(10, 10, 0, 2)) {
		t.Errorf("proxy mode: %+v", s.Metal.Service)
	}
	if s.Metal.Service.HTTPAddress != "10.10.0.2:8081" {
		t.Errorf("the HTTP server listens on %s, want the provisioning network's address only", s.Metal.Service.HTTPAddress)
	}
	if s, err := parse(t, append(manifest, "--boot-http-address=0.0.0.0:8081")...); err != nil || s.Metal.Service.HTTPAddress != "0.0.0.0:8081" {
		t.Errorf("an address of the user's: %v, %s", err, s.Metal.Service.HTTPAddress)
	}

	if _, err := parse(t, append(manifest, "--dhcp-mode=full")...); err == nil {
		t.Error("full mode with the pool's addresses left at 0.0.0.0 is accepted")
	}

	s, err = parse(t, append(manifest, "--dhcp-mode=full", "--dhcp-pool-start=10.10.0.100", "--dhcp-pool-end=10.10.0.199")...)
	if err != nil {
		t.Fatal(err)
	}
	pool := s.Metal.Service.Pool
	if pool == nil || !pool.Start.Equal(net.IPv4(10, 10, 0, 100)) || !pool.End.Equal(net.IPv4(10, 10, 0, 199)) || pool.Router != nil {
		t.Errorf("full mode: pool %+v, want 10.10.0.100-10.10.0.199 without a router", pool)
	}

	s, err = parse(t, append(manifest, "--dhcp-mode=full", "--dhcp-pool-start=10.10.0.100", "--dhcp-pool-end=10.10.0.199", "--dhcp-router=10.10.0.1")...)
	if err != nil || !s.Metal.Service.Pool.Router.Equal(net.IPv4(10, 10, 0, 1)) {
		t.Errorf("full mode with a router: %v, %+v", err, s.Metal.Service.Pool)
	}
}
