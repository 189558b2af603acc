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

package talosconfig

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
)

// setWaiting records what the TalosConfig waits for.
func setWaiting(config *bootstrapv1.TalosConfig, reason, message string) {
	setFalse(config, reason, message)
}

// setFalse records why there is no data Secret yet.
func setFalse(config *bootstrapv1.TalosConfig, reason, message string) {
	conditions.Set(config, metav1.Condition{
		Type:    bootstrapv1.TalosConfigDataSecretAvailableCondition,
		Status:  metav1.ConditionFalse,
		Reason:  reason,
		Message: message,
	})
}

func setInternalError(config *bootstrapv1.TalosConfig, err error) {
	setFalse(config, bootstrapv1.InternalErrorReason, fmt.Sprintf("Retrying after an error: %v", err))
}

// setDataSecretCreated records the data Secret in status, as the contract requires.
func setDataSecretCreated(config *bootstrapv1.TalosConfig, name string) {
	config.Status.DataSecretName = ptr.To(name)
	config.Status.Initialization.DataSecretCreated = ptr.To(true)
	conditions.Set(config, metav1.Condition{
		Type:    bootstrapv1.TalosConfigDataSecretAvailableCondition,
		Status:  metav1.ConditionTrue,
		Reason:  bootstrapv1.DataSecretAvailableReason,
		Message: fmt.Sprintf("Machine config stored in Secret %s", name),
	})
}

// summarize sets Ready from DataSecretAvailable, the one condition that decides whether a
// Machine can boot, and records the generation acted on.
func summarize(config *bootstrapv1.TalosConfig) {
	config.Status.ObservedGeneration = config.Generation
	available := conditions.Get(config, bootstrapv1.TalosConfigDataSecretAvailableCondition)
	if available == nil {
		return
	}
	conditions.Set(config, metav1.Condition{
		Type:    bootstrapv1.TalosConfigReadyCondition,
		Status:  available.Status,
		Reason:  available.Reason,
		Message: available.Message,
	})
}
