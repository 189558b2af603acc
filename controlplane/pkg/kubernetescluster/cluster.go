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

package kubernetescluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// WorkerClass is the MachineDeployment class of the ClusterClass every pool's
// MachineDeployment uses: Talon's classes name theirs "worker".
const WorkerClass = "worker"

// The Cluster's networks, those of Talon's cluster templates.
const (
	PodCIDR     = "10.244.0.0/16"
	ServiceCIDR = "10.96.0.0/12"
)

// Class returns the ClusterClass a KubernetesCluster's Cluster uses: its
// vitiv1.ClusterClassAnnotation, else defaultClass (the manager's --kubernetes-cluster-class),
// each "name" in the KubernetesCluster's namespace or "namespace/name".
func Class(kc *vitiv1.KubernetesCluster, defaultClass string) (clusterv1.ClusterClassRef, error) {
	name := defaultClass
	if a := kc.Annotations[vitiv1.ClusterClassAnnotation]; a != "" {
		name = a
	}
	if name == "" {
		return clusterv1.ClusterClassRef{}, fmt.Errorf("no ClusterClass: set the %s annotation, or the control-plane manager's --kubernetes-cluster-class", vitiv1.ClusterClassAnnotation)
	}
	ns, n, found := strings.Cut(name, "/")
	if !found {
		ns, n = kc.Namespace, name
	}
	if ns == "" || n == "" || strings.Contains(n, "/") {
		return clusterv1.ClusterClassRef{}, fmt.Errorf("ClusterClass %q is neither \"name\" nor \"namespace/name\"", name)
	}
	return clusterv1.ClusterClassRef{Name: n, Namespace: ns}, nil
}

// Variables returns the ClusterClass variables of a KubernetesCluster's
// vitiv1.VariablesAnnotation, sorted by name.
func Variables(kc *vitiv1.KubernetesCluster) ([]clusterv1.ClusterVariable, error) {
	a := kc.Annotations[vitiv1.VariablesAnnotation]
	if a == "" {
		return nil, nil
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal([]byte(a), &values); err != nil {
		return nil, fmt.Errorf("annotation %s is not a JSON object of ClusterClass variables ({\"name\": value}): %w", vitiv1.VariablesAnnotation, err)
	}
	var vars []clusterv1.ClusterVariable
	for _, name := range slices.Sorted(maps.Keys(values)) {
		vars = append(vars, clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: values[name]}})
	}
	return vars, nil
}

// Check refuses a KubernetesCluster spec Talon cannot build, each error naming its field:
// versions (checkVersions; old is the version before an update, or empty), and node labels
// and taints Talos refuses. The ClusterClass's own checks come when the Cluster is applied.
func Check(kc *vitiv1.KubernetesCluster, old string) field.ErrorList {
	topology := field.NewPath("spec", "topology")
	t := kc.Spec.Topology
	pools := make([]string, len(t.Workers.NodePools))
	for i, p := range t.Workers.NodePools {
		pools[i] = p.Version
	}
	errs := checkVersions(topology, t.Version, t.ControlPlane.Version, pools, old)
	errs = append(errs, checkNodeSettings(topology.Child("controlplane"), t.ControlPlane.Metadata.Labels, nil)...)
	for i, p := range t.Workers.NodePools {
		errs = append(errs, checkNodeSettings(topology.Child("workers", "nodePools").Index(i), p.Metadata.Labels, p.Taint)...)
	}
	if _, err := Variables(kc); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(vitiv1.VariablesAnnotation), kc.Annotations[vitiv1.VariablesAnnotation], err.Error()))
	}
	if a := kc.Annotations[vitiv1.ClusterClassAnnotation]; a != "" {
		if _, err := Class(kc, ""); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(vitiv1.ClusterClassAnnotation), a, err.Error()))
		}
	}
	return errs
}

// checkNodeSettings refuses labels and taints Talos would refuse in a node's config.
func checkNodeSettings(path *field.Path, labels map[string]string, taints []vitiv1.Taint) field.ErrorList {
	var errs field.ErrorList
	if err := configgen.CheckSettings(bootstrapv1.TalosConfigSpec{NodeLabels: labels}); err != nil {
		errs = append(errs, field.Invalid(path.Child("metadata", "labels"), labels, err.Error()))
	}
	if err := configgen.CheckSettings(bootstrapv1.TalosConfigSpec{NodeTaints: nodeTaints(taints)}); err != nil {
		errs = append(errs, field.Invalid(path.Child("taint"), taints, err.Error()))
	}
	return errs
}

func nodeTaints(taints []vitiv1.Taint) []bootstrapv1.NodeTaint {
	out := make([]bootstrapv1.NodeTaint, 0, len(taints))
	for _, t := range taints {
		out = append(out, bootstrapv1.NodeTaint{Key: t.Key, Value: t.Value, Effect: bootstrapv1.TaintEffect(t.Effect)})
	}
	return out
}

// Inputs are what a KubernetesCluster's Cluster needs besides the KubernetesCluster: its
// class, its resolved version and its class variables.
type Inputs struct {
	Class     clusterv1.ClusterClassRef
	Version   string
	Variables []clusterv1.ClusterVariable
}

// Cluster returns the Cluster a KubernetesCluster asks for: same name and namespace, the
// class's topology with the control plane's replicas, a MachineDeployment per pool, the
// nodes' labels and taints as the class's nodeLabels and nodeTaints overrides.
func Cluster(kc *vitiv1.KubernetesCluster, in Inputs) (*clusterv1.Cluster, error) {
	c := &clusterv1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: kc.Name, Namespace: kc.Namespace},
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{PodCIDR}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{ServiceCIDR}},
			},
		},
	}
	return c, Update(c, kc, in)
}

// Update sets in c what the KubernetesCluster decides: its labels, and the topology's class,
// version, control plane, MachineDeployments and variables. Everything else of c stays.
func Update(c *clusterv1.Cluster, kc *vitiv1.KubernetesCluster, in Inputs) error {
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[vitiv1.KubernetesClusterLabel] = kc.Name
	if id := kc.Spec.Data.ClusterID; id != "" {
		c.Labels[vitiv1.ClusterIDLabel] = id
	} else {
		delete(c.Labels, vitiv1.ClusterIDLabel)
	}
	t := &c.Spec.Topology
	t.ClassRef = in.Class
	t.Version = in.Version
	setVariables(c, in.Variables)
	cp := kc.Spec.Topology.ControlPlane
	t.ControlPlane.Replicas = ptr.To(cp.Replicas)
	t.ControlPlane.Metadata = clusterv1.ObjectMeta{Labels: cp.Metadata.Labels, Annotations: cp.Metadata.Annotations}
	var err error
	if t.ControlPlane.Variables.Overrides, err = overrides(cp.Metadata.Labels, nil); err != nil {
		return err
	}

	existing := map[string]clusterv1.MachineDeploymentTopology{}
	for _, md := range t.Workers.MachineDeployments {
		existing[md.Name] = md
	}
	mds := make([]clusterv1.MachineDeploymentTopology, 0, len(kc.Spec.Topology.Workers.NodePools))
	for _, pool := range kc.Spec.Topology.Workers.NodePools {
		md := existing[pool.Name] // keeps what the KubernetesCluster does not decide
		md.Class, md.Name = WorkerClass, pool.Name
		md.Metadata = clusterv1.ObjectMeta{Labels: pool.Metadata.Labels, Annotations: maps.Clone(pool.Metadata.Annotations)}
		md.Replicas = ptr.To(pool.Replicas)
		if a := pool.Autoscaling; a.Enabled {
			// The Cluster Autoscaler sizes the pool between its bounds; Cluster API leaves
			// the replicas to it when the topology does not set them.
			if md.Metadata.Annotations == nil {
				md.Metadata.Annotations = map[string]string{}
			}
			md.Metadata.Annotations[clusterv1.AutoscalerMinSizeAnnotation] = strconv.Itoa(int(a.MinReplicas))
			md.Metadata.Annotations[clusterv1.AutoscalerMaxSizeAnnotation] = strconv.Itoa(int(a.MaxReplicas))
			md.Replicas = nil
		}
		if md.Variables.Overrides, err = overrides(pool.Metadata.Labels, pool.Taint); err != nil {
			return err
		}
		mds = append(mds, md)
	}
	if len(mds) == 0 {
		mds = nil // a control plane alone: Cluster API refuses an empty workers object
	}
	t.Workers.MachineDeployments = mds
	return nil
}

// setVariables sets the topology variables the KubernetesCluster asks for and drops those
// it asked for before and no longer does, named in the Cluster's
// vitiv1.ManagedVariablesAnnotation. The others stay: Cluster API's webhook stores the class's
// defaults there when the Cluster is made, and a class re-applied with new defaults must not
// change a running cluster.
func setVariables(c *clusterv1.Cluster, wanted []clusterv1.ClusterVariable) {
	managed := strings.Split(c.Annotations[vitiv1.ManagedVariablesAnnotation], ",")
	byName := map[string]clusterv1.ClusterVariable{}
	names := make([]string, 0, len(wanted))
	for _, v := range wanted {
		byName[v.Name] = v
		names = append(names, v.Name)
	}
	var vars []clusterv1.ClusterVariable
	for _, v := range c.Spec.Topology.Variables {
		if w, ok := byName[v.Name]; ok {
			vars = append(vars, w)
			delete(byName, v.Name)
		} else if !slices.Contains(managed, v.Name) {
			vars = append(vars, v)
		}
	}
	for _, name := range names {
		if v, ok := byName[name]; ok {
			vars = append(vars, v)
		}
	}
	c.Spec.Topology.Variables = vars
	if len(names) == 0 {
		delete(c.Annotations, vitiv1.ManagedVariablesAnnotation)
		return
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[vitiv1.ManagedVariablesAnnotation] = strings.Join(names, ",")
}

// overrides are the class variables nodeLabels and nodeTaints of a node group, for those it
// sets.
func overrides(labels map[string]string, taints []vitiv1.Taint) ([]clusterv1.ClusterVariable, error) {
	var vars []clusterv1.ClusterVariable
	if len(labels) > 0 {
		raw, err := json.Marshal(labels)
		if err != nil {
			return nil, err
		}
		vars = append(vars, clusterv1.ClusterVariable{Name: "nodeLabels", Value: apiextensionsv1.JSON{Raw: raw}})
	}
	if len(taints) > 0 {
		raw, err := json.Marshal(taints) // key, value, effect: the class's nodeTaints items
		if err != nil {
			return nil, err
		}
		vars = append(vars, clusterv1.ClusterVariable{Name: "nodeTaints", Value: apiextensionsv1.JSON{Raw: raw}})
	}
	return vars, nil
}
