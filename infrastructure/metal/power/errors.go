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
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/schemas"
)

// Errors a caller may want to tell apart, e.g. for a condition reason; test with errors.Is.
var (
	// ErrTimeout: the BMC did not answer within the Controller's timeout.
	ErrTimeout = errors.New("BMC did not answer in time")
	// ErrUnauthorized: the BMC rejected the credentials, or the user may not do the operation.
	ErrUnauthorized = errors.New("BMC rejected the credentials")
)

// kindError is an error with its own message that matches one of the errors above.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }

func (e *kindError) Unwrap() error { return e.kind }

// maxMessage bounds how much of a BMC's error body goes into an error; a BMC behind a
// proxy may answer with a whole HTML page.
const maxMessage = 300

// statusError is a Redfish error response, reduced to its status and messages.
type statusError struct {
	status int
	text   string
	cause  error
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.text) }

func (e *statusError) Unwrap() error { return e.cause }

// describe turns the Redfish error responses gofish returns, whose messages are the raw
// response body, into an error that reads "HTTP 400: <the BMC's messages>". Other errors
// pass unchanged.
func describe(err error) error {
	var cerr *schemas.CollectionError
	if errors.As(err, &cerr) && len(cerr.Failures) > 0 {
		links := make([]string, 0, len(cerr.Failures))
		for link := range cerr.Failures {
			links = append(links, link)
		}
		slices.Sort(links)
		return fmt.Errorf("%s: %w", links[0], describe(cerr.Failures[links[0]]))
	}
	var rerr *schemas.Error
	if !errors.As(err, &rerr) || rerr.HTTPReturnedStatusCode == 0 {
		return err
	}
	var messages []string
	for _, info := range rerr.ExtendedInfos {
		if info.Message != "" {
			messages = append(messages, info.Message)
		}
	}
	text := strings.Join(messages, "; ")
	if text == "" {
		text = strings.TrimSpace(rerr.Message)
	}
	if text == "" {
		text = "no message"
	}
	if len(text) > maxMessage {
		text = text[:maxMessage] + "..."
	}
	return &statusError{status: rerr.HTTPReturnedStatusCode, text: text, cause: err}
}

// httpStatus is the HTTP status of a Redfish error response in err, or 0. gofish reports
// failures while listing a collection in a CollectionError, which does not unwrap.
func httpStatus(err error) int {
	var rerr *schemas.Error
	if errors.As(err, &rerr) {
		return rerr.HTTPReturnedStatusCode
	}
	var cerr *schemas.CollectionError
	if errors.As(err, &cerr) {
		for _, e := range cerr.Failures {
			if status := httpStatus(e); status != 0 {
				return status
			}
		}
	}
	return 0
}

// isTimeout tells whether err is a network timeout.
func isTimeout(err error) bool {
	var nerr net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout())
}
