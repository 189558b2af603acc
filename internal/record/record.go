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

// Package record records the Kubernetes events of Talon's reconcilers.
package record

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Event records an event on o through recorder, when there is one (tests run reconcilers
// without). action is what the reconciler did or tried, note the message, formatted with
// args.
func Event(recorder events.EventRecorder, o runtime.Object, eventType, reason, action, note string, args ...any) {
	if recorder != nil {
		recorder.Eventf(o, nil, eventType, reason, action, note, args...)
	}
}
