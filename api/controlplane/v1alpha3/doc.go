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

// Package v1alpha3 is the controlplane.cluster.x-k8s.io/v1alpha3 API of Sidero Labs'
// control-plane provider (CACPPT v0.5), which Talon's CRD serves as a conversion spoke of
// v1beta1 so that the TalosControlPlanes of clusters CACPPT made keep reading after Talon
// takes them over (docs/sidero.md). The field names and JSON shapes are CACPPT's, so that the
// API server keeps every field of the objects it stored; Talon never writes this version.
// The conversion functions are lossless both ways: what one version cannot say is kept in the
// conversion data annotation of the other (bootstrap v1alpha3's ConversionDataAnnotation).
//
// The control-plane manager serves the conversion webhook (/convert) the CRD calls for it.
//
// +kubebuilder:object:generate=true
// +groupName=controlplane.cluster.x-k8s.io
package v1alpha3
