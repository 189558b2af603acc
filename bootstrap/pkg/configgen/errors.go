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

package configgen

import (
	"errors"
	"strings"
)

// oneLine renders an error from Talos validation, which nests multi-line error lists
// ("1 error occurred:\n\t* ...") and lists unknown keys on lines of their own, as one line a
// condition message can carry: "a; b".
func oneLine(err error) string {
	var parts []string
	var walk func(error)
	walk = func(err error) {
		var list interface{ WrappedErrors() []error }
		if errors.As(err, &list) {
			for _, e := range list.WrappedErrors() {
				walk(e)
			}
			return
		}
		parts = append(parts, strings.Join(strings.Fields(err.Error()), " "))
	}
	walk(err)
	return strings.Join(parts, "; ")
}
