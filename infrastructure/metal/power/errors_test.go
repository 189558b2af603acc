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
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/stmcginnis/gofish/schemas"
)

// TestDescribe: a BMC's error responses read as their status and messages, not as raw
// bodies, and stay matchable.
func TestDescribe(t *testing.T) {
	redfishBody := `{"error":{"code":"Base.1.16.GeneralError","message":"A general error has occurred.",` +
		`"@Message.ExtendedInfo":[{"MessageId":"Base.1.16.PropertyValueNotInList","Message":"The value Floppy for the property BootSourceOverrideTarget is not in the list of acceptable values."}]}}`
	collection := schemas.NewCollectionError()
	collection.Failures["/redfish/v1/Systems/2"] = schemas.ConstructError(500, []byte(`{"error":{"code":"x","message":"Internal error"}}`))
	for _, tc := range []struct {
		name       string
		err        error
		want       string
		wantStatus int
	}{
		{name: "Redfish error", err: schemas.ConstructError(400, []byte(redfishBody)), wantStatus: 400,
			want: "HTTP 400: The value Floppy for the property BootSourceOverrideTarget is not in the list of acceptable values."},
		{name: "plain body", err: schemas.ConstructError(503, []byte("Service Unavailable\n")), wantStatus: 503, want: "HTTP 503: Service Unavailable"},
		{name: "empty body", err: schemas.ConstructError(502, nil), wantStatus: 502, want: "HTTP 502: no message"},
		{name: "long body", err: schemas.ConstructError(502, []byte("<html>"+strings.Repeat("x", 1000))), wantStatus: 502,
			want: "HTTP 502: <html>" + strings.Repeat("x", maxMessage-len("<html>")) + "..."},
		{name: "wrapped", err: fmt.Errorf("reading: %w", schemas.ConstructError(404, []byte(redfishBody))), wantStatus: 404,
			want: "HTTP 404: The value Floppy"},
		{name: "collection", err: collection, wantStatus: 500, want: "/redfish/v1/Systems/2: HTTP 500: Internal error"},
		{name: "not a Redfish error", err: errors.New("connection reset by peer"), want: "connection reset by peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := describe(tc.err)
			g.Expect(err.Error()).To(HavePrefix(tc.want))
			g.Expect(httpStatus(err)).To(Equal(tc.wantStatus))
			if tc.wantStatus != 0 {
				var rerr *schemas.Error
				g.Expect(errors.As(err, &rerr)).To(BeTrue(), "the gofish error stays reachable")
			}
		})
	}
}
