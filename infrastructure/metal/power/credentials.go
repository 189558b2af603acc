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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// The keys of a BMC credentials Secret.
const (
	// UsernameKey holds the BMC user name.
	UsernameKey = "username"
	// PasswordKey holds the BMC password.
	PasswordKey = "password"
)

// redacted stands in for a password wherever Credentials are printed.
const redacted = "[redacted]"

// Credentials authenticate Talon to a BMC.
//
// Every way Go prints or encodes a value (fmt verbs, JSON, logr and slog loggers) shows the
// user name and hides the password, so Credentials can travel through code that logs its
// arguments. They cannot travel through JSON: the password does not come back.
type Credentials struct {
	// Username is the BMC user name.
	Username string
	// Password is the BMC password.
	Password string
}

// CredentialsFromSecret reads the username and password keys of a BMC credentials Secret.
// Its errors name the Secret and the key, never a value.
func CredentialsFromSecret(secret *corev1.Secret) (Credentials, error) {
	if secret == nil {
		return Credentials{}, errors.New("no BMC credentials Secret")
	}
	username, err := secretValue(secret, UsernameKey)
	if err != nil {
		return Credentials{}, err
	}
	password, err := secretValue(secret, PasswordKey)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{Username: username, Password: password}, nil
}

// secretValue returns a non-empty key of a Secret, from data or, for Secrets that were
// never stored by an API server, from stringData.
func secretValue(secret *corev1.Secret, key string) (string, error) {
	value, ok := secret.Data[key]
	if !ok {
		s, found := secret.StringData[key]
		value, ok = []byte(s), found
	}
	if !ok {
		return "", fmt.Errorf("BMC credentials Secret %s has no %q key", klog.KObj(secret), key)
	}
	if len(value) == 0 {
		return "", fmt.Errorf("BMC credentials Secret %s has an empty %q key", klog.KObj(secret), key)
	}
	return string(value), nil
}

// redactedCredentials is what Credentials look like to anything that prints them.
type redactedCredentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

func (c Credentials) redact() redactedCredentials {
	r := redactedCredentials{Username: c.Username}
	if c.Password != "" {
		r.Password = redacted
	}
	return r
}

// String returns the user name and a placeholder for the password.
func (c Credentials) String() string {
	r := c.redact()
	return fmt.Sprintf("{Username:%s Password:%s}", r.Username, r.Password)
}

// GoString is String in Go syntax, for %#v.
func (c Credentials) GoString() string {
	r := c.redact()
	return fmt.Sprintf("power.Credentials{Username:%q, Password:%q}", r.Username, r.Password)
}

// Format makes every fmt verb, not only %v and %s, print String (or GoString for %#v).
func (c Credentials) Format(f fmt.State, verb rune) {
	s := c.String()
	if verb == 'v' && f.Flag('#') {
		s = c.GoString()
	}
	_, _ = fmt.Fprint(f, s)
}

// MarshalJSON encodes the user name and a placeholder for the password.
func (c Credentials) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.redact())
}

// MarshalLog is what logr loggers print.
func (c Credentials) MarshalLog() any {
	return c.redact()
}

// LogValue is what slog loggers print.
func (c Credentials) LogValue() slog.Value {
	r := c.redact()
	return slog.GroupValue(slog.String("username", r.Username), slog.String("password", r.Password))
}
