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

package configgen_test

import (
	"fmt"
	"log"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// Example shows the call sequence: one bundle per cluster, stored and reused; one Render per
// machine; one talosconfig for people and tools.
func Example() {
	bundle, err := configgen.NewBundle("v1.14", time.Now())
	if err != nil {
		log.Fatal(err)
	}
	cluster := configgen.Cluster{
		Name:              "demo",
		Endpoint:          configgen.Endpoint{Host: "10.5.0.2", Port: 6443},
		KubernetesVersion: "v1.36.3",
	}
	data, err := configgen.Render(bundle, cluster, configgen.Machine{
		Spec: bootstrapv1.TalosConfigSpec{
			GenerateType: bootstrapv1.GenerateTypeWorker,
			TalosVersion: "v1.14",
			// Under the v1.14 contract, kubelet settings live in the KubeletConfig document.
			ConfigPatches: []bootstrapv1.ConfigPatch{{
				Op: "add", Path: "/extraArgs", Value: &apiextensionsv1.JSON{Raw: []byte(`{"max-pods":"150"}`)},
				Document: bootstrapv1.ConfigDocumentRef{Kind: "KubeletConfig"},
			}},
		},
		Hostname: "demo-worker-0",
		Mode:     configgen.ModeContainer,
	})
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Machine().Type(), cfg.NetworkHostnameConfig().Hostname(), cfg.K8sClusterConfig().ClusterEndpoint(), cfg.K8sKubeletConfig().ExtraArgs()["max-pods"])

	talosconfig, err := configgen.NewTalosconfig(bundle, cluster.Name, []string{"10.5.0.2"}, time.Now(), 24*time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(talosconfig.Data) > 0)
	// Output:
	// worker demo-worker-0 https://10.5.0.2:6443 [150]
	// true
}
