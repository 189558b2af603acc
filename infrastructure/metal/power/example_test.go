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

package power_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talon-capi/talon/infrastructure/metal/power"
	"github.com/talon-capi/talon/sim/bmc"
)

// Example boots a host from the network once: credentials from its Secret, a Controller
// for its BMC, a one-time PXE boot, power on, and the state read back.
func Example() {
	// A simulated BMC stands in for the server's.
	server := bmc.NewServer(bmc.Config{Username: "admin", Password: "example-password"})
	defer server.Close()

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "metal", Name: "rack1-u7-bmc"},
		Data:       map[string][]byte{power.UsernameKey: []byte("admin"), power.PasswordKey: []byte("example-password")},
	}
	creds, err := power.CredentialsFromSecret(secret)
	if err != nil {
		panic(err)
	}
	address := "redfish+http://" + server.Address() + "/redfish/v1/Systems/1"
	host, err := power.New(address, creds, false, power.WithTimeout(5*time.Second))
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	if err := host.SetOneTimeBoot(ctx, power.BootDevice{Device: power.DevicePXE, Mode: power.BootModeUEFI}); err != nil {
		panic(err)
	}
	if err := host.PowerOn(ctx); err != nil {
		panic(err)
	}
	state, err := host.PowerState(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("credentials:", creds)
	fmt.Println("power:", state)
	// Output:
	// credentials: {Username:admin Password:[redacted]}
	// power: On
}
