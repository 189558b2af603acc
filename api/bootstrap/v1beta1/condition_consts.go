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

package v1beta1

import clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

// Conditions and reasons of a TalosConfig.
const (
	// TalosConfigReadyCondition is true when the machine config is rendered, validated and stored.
	// Cluster API mirrors it onto the Machine.
	TalosConfigReadyCondition = clusterv1.ReadyCondition

	// TalosConfigDataSecretAvailableCondition is true when the bootstrap data Secret exists.
	TalosConfigDataSecretAvailableCondition = "DataSecretAvailable"

	// TalosConfigDataSecretAvailableReason is the reason of a true DataSecretAvailable condition.
	TalosConfigDataSecretAvailableReason = clusterv1.AvailableReason

	// TalosConfigDataSecretNotAvailableReason is the reason of a false DataSecretAvailable condition.
	TalosConfigDataSecretNotAvailableReason = clusterv1.NotAvailableReason
)
