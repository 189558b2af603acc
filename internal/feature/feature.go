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

package feature

import (
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/component-base/featuregate"
)

// MutableGates is the gate set the managers' --feature-gates flag writes to.
var MutableGates featuregate.MutableFeatureGate = featuregate.NewFeatureGate()

// Gates is the read-only view of MutableGates that the providers consult.
var Gates featuregate.FeatureGate = MutableGates

// defaultGates lists every Talon feature gate with its default and maturity. Providers add
// their gates here as features land behind them.
var defaultGates = map[featuregate.Feature]featuregate.FeatureSpec{}

func init() {
	runtime.Must(MutableGates.Add(defaultGates))
}
