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

package clusterclass_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	coreconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/test/envtest"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(envtest.Run(m))
}

const kubernetesVersion = "v1.36.3"

// rendered is what one Cluster of a case became: the control plane's and the worker pool's
// TalosConfig specs as the topology wrote them, and the machine configs Talon renders from
// them.
type rendered struct {
	cluster                    *clusterv1.Cluster
	controlPlane, worker       bootstrapv1.TalosConfigSpec
	controlPlaneCfg, workerCfg coreconfig.Config
	metalMachines              []infrav1.TalosMetalMachineTemplate
	objects                    []byte
}

// TestClassVariables creates a Cluster from each shipped ClusterClass per case, with Cluster
// API's own topology reconcilers and Cluster webhooks, and renders the control plane's and
// the workers' configs from what the class's patches wrote, as the bootstrap provider does:
// each variable changes the config as docs/clusterclass.md says. Bad values are refused when
// the Cluster is applied, with the variable's name.
func TestClassVariables(t *testing.T) {
	g := NewWithT(t)
	env := envtest.Get(t)
	ns := env.NewNamespace(t, "variables")
	env.StartManager(t, envtest.ManagerOptions{Topology: true, ClusterWebhooksIn: ns})
	for _, file := range []string{"clusterclass-talos-docker.yaml", "clusterclass-talos-metal.yaml"} {
		applyTemplate(t, env.Client, file, ns)
	}
	bundle, err := configgen.NewBundle("", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	const passphrase = "b6c1-the-static-key-never-in-a-template" //nolint:gosec // the test's own key, looked for where it must not be
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "disk-key", Namespace: ns},
		Data:       map[string][]byte{bootstrapv1.DefaultStaticKeySecretKey: []byte(passphrase)},
	})).To(Succeed())

	cases := []struct {
		name                  string
		class                 string
		variables             map[string]any
		controlPlaneOverrides map[string]any
		workerOverrides       map[string]any
		network               *clusterv1.ClusterNetwork
		check                 func(g Gomega, r rendered)
	}{{
		name:  "defaults",
		class: "talos-docker",
		check: func(g Gomega, r rendered) {
			g.Expect(r.controlPlaneCfg.K8sFlannelCNIConfig()).NotTo(BeNil(), "flannel is the default CNI")
			g.Expect(r.workerCfg.RegistryMirrorConfigs()).To(BeEmpty())
			g.Expect(r.workerCfg.K8sNodeConfig().Labels()).To(BeEmpty())
			g.Expect(r.workerCfg.K8sNodeConfig().Taints()).To(BeEmpty())
		},
	}, {
		name:      "cni none",
		class:     "talos-docker",
		variables: map[string]any{"cni": "none"},
		check: func(g Gomega, r rendered) {
			g.Expect(r.controlPlane.CNI).To(Equal(bootstrapv1.CNINone))
			g.Expect(r.controlPlaneCfg.K8sFlannelCNIConfig()).To(BeNil(), "Talos deploys no Flannel")
		},
	}, {
		name:  "registry mirrors",
		class: "talos-docker",
		variables: map[string]any{"registryMirrors": []any{
			map[string]any{"registry": "docker.io", "endpoints": []string{"https://mirror.example.com"}},
			map[string]any{"registry": "*", "endpoints": []string{"http://10.0.0.5:5000"}, "skipFallback": true},
		}},
		check: func(g Gomega, r rendered) {
			for _, cfg := range []coreconfig.Config{r.controlPlaneCfg, r.workerCfg} {
				mirrors := cfg.RegistryMirrorConfigs()
				g.Expect(mirrors).To(HaveLen(2))
				g.Expect(mirrors["docker.io"].Endpoints()[0].Endpoint()).To(Equal("https://mirror.example.com"))
				g.Expect(mirrors["*"].SkipFallback()).To(BeTrue())
			}
		},
	}, {
		name:                  "node labels and taints, per pool",
		class:                 "talos-docker",
		variables:             map[string]any{"nodeLabels": map[string]string{"example.com/tier": "all"}},
		controlPlaneOverrides: map[string]any{"nodeTaints": []any{map[string]any{"key": "dedicated", "value": "etcd", "effect": "NoExecute"}}},
		workerOverrides: map[string]any{
			"nodeLabels": map[string]string{"example.com/pool": "gpu"},
			"nodeTaints": []any{map[string]any{"key": "nvidia.com/gpu", "effect": "NoSchedule"}},
		},
		check: func(g Gomega, r rendered) {
			g.Expect(r.controlPlaneCfg.K8sNodeConfig().Labels()).To(HaveKeyWithValue("example.com/tier", "all"))
			g.Expect(r.controlPlaneCfg.K8sNodeConfig().Taints()).To(HaveKeyWithValue("dedicated", "etcd:NoExecute"))
			g.Expect(r.workerCfg.K8sNodeConfig().Labels()).To(Equal(map[string]string{"example.com/pool": "gpu"}), "the pool's override replaces the Cluster's value")
			g.Expect(r.workerCfg.K8sNodeConfig().Taints()).To(Equal(map[string]string{"nvidia.com/gpu": "NoSchedule"}))
		},
	}, {
		name:  "pod and service CIDRs are the Cluster's network",
		class: "talos-docker",
		network: &clusterv1.ClusterNetwork{
			Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.200.0.0/16"}},
			Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.201.0.0/16"}},
		},
		check: func(g Gomega, r rendered) {
			for _, cfg := range []coreconfig.Config{r.controlPlaneCfg, r.workerCfg} {
				g.Expect(fmt.Sprint(cfg.K8sNetworkConfig().PodCIDRs())).To(Equal("[10.200.0.0/16]"))
				g.Expect(fmt.Sprint(cfg.K8sNetworkConfig().ServiceCIDRs())).To(Equal("[10.201.0.0/16]"))
			}
		},
	}, {
		name:  "a raw patch comes after the settings",
		class: "talos-docker",
		variables: map[string]any{
			"nodeLabels":          map[string]string{"example.com/pool": "from-variable"},
			"workerConfigPatches": []string{"apiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  example.com/pool: from-patch\n"},
		},
		check: func(g Gomega, r rendered) {
			g.Expect(r.workerCfg.K8sNodeConfig().Labels()).To(HaveKeyWithValue("example.com/pool", "from-patch"))
			g.Expect(r.controlPlaneCfg.K8sNodeConfig().Labels()).To(HaveKeyWithValue("example.com/pool", "from-variable"))
		},
	}, {
		name:      "TPM encryption with a static recovery key",
		class:     "talos-metal",
		variables: map[string]any{"diskEncryption": "TPM", "diskEncryptionKeySecret": "disk-key"},
		check: func(g Gomega, r rendered) {
			g.Expect(r.worker.DiskEncryption).To(Equal(bootstrapv1.DiskEncryptionSpec{
				Key: bootstrapv1.DiskEncryptionKeyTPM, StaticKeySecretRef: bootstrapv1.SecretKeyReference{Name: "disk-key"}}))
			for _, cfg := range []coreconfig.Config{r.controlPlaneCfg, r.workerCfg} {
				for _, volume := range []string{"STATE", "EPHEMERAL"} {
					v, ok := cfg.Volumes().ByName(volume)
					g.Expect(ok).To(BeTrue(), volume)
					keys := v.Encryption().Keys()
					g.Expect(keys).To(HaveLen(2))
					g.Expect(keys[0].TPM()).NotTo(BeNil())
					g.Expect(string(keys[1].Static().Key())).To(Equal(passphrase))
				}
			}
			g.Expect(string(r.objects)).NotTo(ContainSubstring(passphrase), "the Cluster and its templates name the Secret only")
		},
	}, {
		name:      "node ID encryption",
		class:     "talos-metal",
		variables: map[string]any{"diskEncryption": "NodeID"},
		check: func(g Gomega, r rendered) {
			v, ok := r.workerCfg.Volumes().ByName("STATE")
			g.Expect(ok).To(BeTrue())
			g.Expect(v.Encryption().Keys()).To(HaveLen(1))
			g.Expect(v.Encryption().Keys()[0].NodeID()).NotTo(BeNil())
		},
	}, {
		name:  "secure boot, kernel arguments and extensions",
		class: "talos-metal",
		variables: map[string]any{
			"secureBoot": true, "extraKernelArgs": []string{"console=ttyS0", "net.ifnames=0"}, "extensions": []string{"siderolabs/iscsi-tools"},
		},
		check: func(g Gomega, r rendered) {
			// The bootstrap provider asks Image Factory for this schematic and installs its
			// installer (metal-installer-secureboot with secureBoot).
			for _, spec := range []bootstrapv1.TalosConfigSpec{r.controlPlane, r.worker} {
				g.Expect(spec.ImageFactory.SecureBoot).To(Equal(ptr.To(true)))
				g.Expect(spec.ImageFactory.ExtraKernelArgs).To(Equal([]string{"console=ttyS0", "net.ifnames=0"}))
				g.Expect(spec.ImageFactory.Extensions).To(Equal([]string{"siderolabs/iscsi-tools"}))
			}
		},
	}, {
		name:      "install disk",
		class:     "talos-metal",
		variables: map[string]any{"installDisk": "/dev/nvme0n1"},
		check: func(g Gomega, r rendered) {
			g.Expect(r.metalMachines).NotTo(BeEmpty())
			for _, m := range r.metalMachines {
				g.Expect(m.Spec.Template.Spec.InstallDisk).To(Equal("/dev/nvme0n1"), m.Name)
			}
		},
	}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			name := fmt.Sprintf("vars-%d", i)
			cluster := newCluster(g, ns, name, tc.class, tc.variables, tc.controlPlaneOverrides, tc.workerOverrides)
			if tc.network != nil {
				cluster.Spec.ClusterNetwork = *tc.network
			}
			g.Expect(env.Client.Create(t.Context(), cluster)).To(Succeed())
			r := render(t, env, bundle, cluster, passphrase)
			tc.check(g, r)
		})
	}

	t.Run("both classes define the shared variables alike", func(t *testing.T) {
		g := NewWithT(t)
		classes := map[string]*clusterv1.ClusterClass{}
		for _, name := range []string{"talos-docker", "talos-metal"} {
			classes[name] = &clusterv1.ClusterClass{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, classes[name])).To(Succeed())
		}
		variable := func(class, name string) clusterv1.ClusterClassVariable {
			for _, v := range classes[class].Spec.Variables {
				if v.Name == name {
					return v
				}
			}
			return clusterv1.ClusterClassVariable{}
		}
		patch := func(class, name string) clusterv1.ClusterClassPatch {
			for _, p := range classes[class].Spec.Patches {
				if p.Name == name {
					return p
				}
			}
			return clusterv1.ClusterClassPatch{}
		}
		for _, name := range []string{"cni", "registryMirrors", "nodeLabels", "nodeTaints", "talosVersion", "controlPlaneConfigPatches", "workerConfigPatches"} {
			g.Expect(variable("talos-metal", name)).To(Equal(variable("talos-docker", name)), name)
			g.Expect(variable("talos-docker", name).Name).To(Equal(name))
		}
		g.Expect(patch("talos-metal", "nodeSettings")).To(Equal(patch("talos-docker", "nodeSettings")))
		g.Expect(patch("talos-docker", "nodeSettings").Definitions).To(HaveLen(2))
	})

	t.Run("bad values are refused with the variable's name", func(t *testing.T) {
		for _, bad := range []struct {
			class, variable string
			value           any
		}{
			{"talos-docker", "cni", "calico"},
			{"talos-docker", "nodeTaints", []any{map[string]any{"key": "dedicated", "effect": "Sometimes"}}},
			{"talos-docker", "nodeLabels", map[string]string{"bad key!": "x"}},
			{"talos-docker", "nodeLabels", map[string]string{"pool": "not a value"}},
			{"talos-docker", "registryMirrors", []any{map[string]any{"registry": "docker.io", "endpoints": []string{"mirror.example.com"}}}},
			{"talos-metal", "diskEncryption", "Rot13"},
			{"talos-metal", "diskEncryptionKeySecret", "Not_A_Name"},
			{"talos-metal", "extraKernelArgs", []string{""}},
		} {
			g := NewWithT(t)
			cluster := newCluster(g, ns, "bad", bad.class, map[string]any{bad.variable: bad.value}, nil, nil)
			err := env.Client.Create(t.Context(), cluster, client.DryRunAll)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s=%v: got %v", bad.variable, bad.value, err)
			g.Expect(err.Error()).To(ContainSubstring("variables["+bad.variable+"]"), "%s=%v", bad.variable, bad.value)
			t.Logf("%s=%v: %v", bad.variable, bad.value, err)
		}
	})
}

// newCluster is a Cluster of class with one control-plane Machine and a worker pool, and the
// variables given.
func newCluster(g Gomega, ns, name, class string, variables, controlPlaneOverrides, workerOverrides map[string]any) *clusterv1.Cluster {
	if class == "talos-metal" {
		variables = withDefault(variables, "controlPlaneEndpoint", map[string]any{"host": "10.0.0.10", "port": 6443})
	}
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef: clusterv1.ClusterClassRef{Name: class},
			Version:  kubernetesVersion,
			ControlPlane: clusterv1.ControlPlaneTopology{
				Replicas:  ptr.To[int32](1),
				Variables: clusterv1.ControlPlaneVariables{Overrides: clusterVariables(g, controlPlaneOverrides)},
			},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{
				Class: "worker", Name: "pool", Replicas: ptr.To[int32](1),
				Variables: clusterv1.MachineDeploymentVariables{Overrides: clusterVariables(g, workerOverrides)},
			}}},
			Variables: clusterVariables(g, variables),
		}},
	}
}

func withDefault(m map[string]any, key string, value any) map[string]any {
	out := map[string]any{key: value}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func clusterVariables(g Gomega, values map[string]any) []clusterv1.ClusterVariable {
	if len(values) == 0 {
		return nil // an empty list is no list: the API refuses an empty variables object
	}
	out := make([]clusterv1.ClusterVariable, 0, len(values))
	for name, value := range values {
		raw, err := json.Marshal(value)
		g.Expect(err).NotTo(HaveOccurred())
		out = append(out, clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: raw}})
	}
	return out
}

// render waits for the topology to write the Cluster's control plane and worker pool and
// renders both configs. The worker pool is created once the control plane reports its
// version (Cluster API defers new MachineDeployments while a control plane provisions), so
// the test reports it as the control-plane provider does once its Machines run.
func render(t *testing.T, env *envtest.Environment, bundle *secrets.Bundle, cluster *clusterv1.Cluster, passphrase string) rendered {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	inCluster := client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}
	tcp := &controlplanev1.TalosControlPlane{}
	g.Eventually(func(g Gomega) {
		list := &controlplanev1.TalosControlPlaneList{}
		g.Expect(c.List(ctx, list, client.InNamespace(cluster.Namespace), inCluster)).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		*tcp = list.Items[0]
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	tcp.Status.Versions = []clusterv1.StatusVersion{{Version: kubernetesVersion, Replicas: 1}}
	tcp.Status.Replicas = ptr.To[int32](1)
	g.Expect(c.Status().Update(ctx, tcp)).To(Succeed())

	worker := &bootstrapv1.TalosConfigTemplate{}
	g.Eventually(func(g Gomega) {
		mds := &clusterv1.MachineDeploymentList{}
		g.Expect(c.List(ctx, mds, client.InNamespace(cluster.Namespace), inCluster)).To(Succeed())
		g.Expect(mds.Items).To(HaveLen(1))
		ref := mds.Items[0].Spec.Template.Spec.Bootstrap.ConfigRef
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, worker)).To(Succeed())
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())

	r := rendered{cluster: cluster, controlPlane: tcp.Spec.ControlPlaneConfig, worker: worker.Spec.Template.Spec}
	mode := configgen.ModeContainer
	if cluster.Spec.Topology.ClassRef.Name == "talos-metal" {
		mode = configgen.ModeMetal
		templates := &infrav1.TalosMetalMachineTemplateList{}
		g.Expect(c.List(ctx, templates, client.InNamespace(cluster.Namespace), inCluster)).To(Succeed())
		r.metalMachines = templates.Items
	}
	// The endpoint is the infrastructure provider's to set, and none runs here.
	target := configgen.ClusterFrom(cluster, kubernetesVersion)
	target.Endpoint = configgen.Endpoint{Host: "10.0.0.10", Port: 6443}
	for _, m := range []struct {
		spec bootstrapv1.TalosConfigSpec
		out  *coreconfig.Config
	}{{r.controlPlane, &r.controlPlaneCfg}, {r.worker, &r.workerCfg}} {
		machine := configgen.Machine{Spec: m.spec, Mode: mode, InstallDisk: "/dev/sda"}
		if m.spec.DiskEncryption.StaticKeySecretRef.Name != "" {
			machine.StaticKey = passphrase
		}
		data, err := configgen.Render(bundle, target, machine)
		g.Expect(err).NotTo(HaveOccurred(), "%s config", m.spec.GenerateType)
		cfg, err := configloader.NewFromBytes(data)
		g.Expect(err).NotTo(HaveOccurred())
		*m.out = cfg
	}
	for _, o := range []any{cluster, tcp, worker, r.metalMachines} {
		data, err := json.Marshal(o)
		g.Expect(err).NotTo(HaveOccurred())
		r.objects = append(r.objects, data...)
	}
	return r
}

// applyTemplate creates the objects of one of the shipped templates in ns.
func applyTemplate(t *testing.T, c client.Client, file, ns string) {
	t.Helper()
	g := NewWithT(t)
	objs, err := envtest.Template(file, map[string]string{"NAMESPACE": ns})
	g.Expect(err).NotTo(HaveOccurred())
	for i := range objs {
		o := &objs[i]
		g.Expect(c.Create(t.Context(), o)).To(Succeed(), "create %s %s", o.GetKind(), o.GetName())
	}
}
