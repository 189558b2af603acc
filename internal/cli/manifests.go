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

package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
)

// clusterManifests are the objects of "clusterctl generate cluster" output that decide what
// the nodes of a cluster receive.
type clusterManifests struct {
	clusters           []*clusterv1.Cluster
	controlPlanes      map[string]*controlplanev1.TalosControlPlane
	machineDeployments []*clusterv1.MachineDeployment
	configTemplates    map[string]*bootstrapv1.TalosConfigTemplate
	// secrets are the Secrets given with the manifests, e.g. a disk encryption key's.
	secrets map[string]*corev1.Secret
	// skipped counts documents of kinds that do not affect machine configs.
	skipped int
}

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(clusterv1.AddToScheme(scheme))
	utilruntime.Must(bootstrapv1.AddToScheme(scheme))
	utilruntime.Must(controlplanev1.AddToScheme(scheme))
	utilruntime.Must(infrav1.AddToScheme(scheme))
	return scheme
}

// readManifests decodes every YAML document of r.
func readManifests(r io.Reader) (*clusterManifests, error) {
	m := &clusterManifests{
		controlPlanes:   map[string]*controlplanev1.TalosControlPlane{},
		configTemplates: map[string]*bootstrapv1.TalosConfigTemplate{},
		secrets:         map[string]*corev1.Secret{},
	}
	err := decodeDocuments(r, newScheme(), func(obj runtime.Object) {
		switch o := obj.(type) {
		case *clusterv1.Cluster:
			m.clusters = append(m.clusters, o)
		case *controlplanev1.TalosControlPlane:
			m.controlPlanes[o.Name] = o
		case *clusterv1.MachineDeployment:
			m.machineDeployments = append(m.machineDeployments, o)
		case *bootstrapv1.TalosConfigTemplate:
			m.configTemplates[o.Name] = o
		case *corev1.Secret:
			m.secrets[o.Name] = o
		default:
			m.skipped++
		}
	})
	if err != nil {
		return nil, err
	}
	if len(m.clusters) == 0 {
		return nil, errors.New("no Cluster found: pass the output of 'clusterctl generate cluster'")
	}
	return m, nil
}

// decodeDocuments decodes each YAML document of r with scheme's kinds, strictly, and hands
// it to each; documents of other kinds are handed over as nil.
func decodeDocuments(r io.Reader, scheme *runtime.Scheme, each func(runtime.Object)) error {
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	reader := yaml.NewYAMLReader(bufio.NewReader(r))
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("document %d is not YAML: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if runtime.IsNotRegisteredError(err) {
			each(nil)
			continue
		}
		if err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		each(obj)
	}
}

// staticKey is the disk encryption passphrase spec reads from a Secret, from the Secrets
// given with the manifests.
func (m *clusterManifests) staticKey(spec bootstrapv1.TalosConfigSpec) (string, error) {
	ref := spec.DiskEncryption.StaticKeySecretRef
	if ref.Name == "" {
		return "", nil
	}
	key := ref.DataKey()
	secret, ok := m.secrets[ref.Name]
	if !ok {
		return "", fmt.Errorf("its disk encryption key is in Secret %s (spec.diskEncryption.staticKeySecretRef): add the Secret to the input", ref.Name)
	}
	value := secret.Data[key]
	if len(value) == 0 {
		value = []byte(secret.StringData[key])
	}
	if len(value) == 0 {
		return "", fmt.Errorf("the Secret %s has no data key %q with the disk encryption passphrase", ref.Name, key)
	}
	return string(value), nil
}
