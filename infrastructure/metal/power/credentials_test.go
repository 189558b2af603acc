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
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talon-capi/talon/infrastructure/metal/power"
)

func TestCredentialsFromSecret(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "metal", Name: "bmc-rack1-u7"}
	for _, tc := range []struct {
		name    string
		secret  *corev1.Secret
		want    power.Credentials
		wantErr string
	}{
		{
			name:   "data",
			secret: &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"username": []byte("admin"), "password": []byte(testPassword)}},
			want:   testCreds,
		},
		{
			name:   "stringData of a Secret that was never stored",
			secret: &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"username": "admin", "password": testPassword}},
			want:   testCreds,
		},
		{
			name:    "no username",
			secret:  &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"user": []byte("admin"), "password": []byte(testPassword)}},
			wantErr: `BMC credentials Secret metal/bmc-rack1-u7 has no "username" key`,
		},
		{
			name:    "no password",
			secret:  &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"username": []byte("admin"), "pass": []byte(testPassword)}},
			wantErr: `BMC credentials Secret metal/bmc-rack1-u7 has no "password" key`,
		},
		{
			name:    "empty password",
			secret:  &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"username": []byte("admin"), "password": {}}},
			wantErr: `BMC credentials Secret metal/bmc-rack1-u7 has an empty "password" key`,
		},
		{
			name:    "no Secret",
			wantErr: "no BMC credentials Secret",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			creds, err := power.CredentialsFromSecret(tc.secret)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(tc.wantErr))
				g.Expect(err.Error()).NotTo(ContainSubstring(testPassword))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(creds.Username).To(Equal(tc.want.Username))
			g.Expect(creds.Password).To(Equal(tc.want.Password))
		})
	}
}

// TestCredentialsRedaction: every way the password could be printed shows a placeholder.
func TestCredentialsRedaction(t *testing.T) {
	creds := testCreds
	type holder struct {
		Host  string
		Creds power.Credentials
		Ptr   *power.Credentials
	}
	nested := holder{Host: "bmc-1", Creds: creds, Ptr: &creds}

	outputs := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3v"} {
		outputs["fmt "+verb] = fmt.Sprintf(verb, creds)
		outputs["fmt pointer "+verb] = fmt.Sprintf(verb, &creds)
		outputs["fmt nested "+verb] = fmt.Sprintf(verb, nested)
	}
	outputs["fmt Sprintln"] = fmt.Sprintln(creds, &creds)

	for name, v := range map[string]any{"value": creds, "pointer": &creds, "nested": nested} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outputs["json "+name] = string(b)
	}

	var funcrOut strings.Builder
	logger := funcr.New(func(prefix, args string) { funcrOut.WriteString(prefix + args + "\n") }, funcr.Options{Verbosity: 10})
	logger.Info("Connecting to BMC", "credentials", creds, "pointer", &creds, "nested", nested)
	logger.WithValues("credentials", creds).Error(fmt.Errorf("refused %v", creds), "Failed")
	outputs["logr funcr"] = funcrOut.String()

	var funcrJSON strings.Builder
	jsonLogger := funcr.NewJSON(func(obj string) { funcrJSON.WriteString(obj + "\n") }, funcr.Options{})
	jsonLogger.Info("Connecting to BMC", "credentials", creds, "nested", nested)
	outputs["logr funcr JSON"] = funcrJSON.String()

	var slogOut bytes.Buffer
	slogLogger := slog.New(slog.NewJSONHandler(&slogOut, nil))
	slogLogger.Info("Connecting to BMC", "credentials", creds, "pointer", &creds)
	logr.FromSlogHandler(slog.NewTextHandler(&slogOut, nil)).Info("Connecting to BMC", "credentials", creds)
	outputs["slog"] = slogOut.String()

	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(out).NotTo(ContainSubstring(testPassword))
			g.Expect(out).NotTo(ContainSubstring(fmt.Sprintf("%x", testPassword)))
			g.Expect(strings.ToLower(out)).To(ContainSubstring("admin"), "the user name stays visible")
		})
	}

	g := NewWithT(t)
	g.Expect(fmt.Sprintf("%+v", creds)).To(Equal("{Username:admin Password:[redacted]}"))
	g.Expect(fmt.Sprintf("%#v", creds)).To(Equal(`power.Credentials{Username:"admin", Password:"[redacted]"}`))
	g.Expect(outputs["json value"]).To(Equal(`{"username":"admin","password":"[redacted]"}`))
	g.Expect(power.Credentials{Username: "admin"}.String()).To(Equal("{Username:admin Password:}"), "an empty password shows as empty")
}
