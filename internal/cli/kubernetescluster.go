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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	vitiv1 "github.com/talon-capi/talon/api/vitistack/v1alpha1"
	"github.com/talon-capi/talon/controlplane/pkg/kubernetescluster"
)

type kubernetesClusterOptions struct {
	file   string
	outDir string
	class  string
}

func newKubernetesClusterCommand() *cobra.Command {
	render := &kubernetesClusterOptions{}
	renderCmd := &cobra.Command{
		Use:   "render -f KUBERNETESCLUSTER.yaml -o DIR",
		Short: "Write the Cluster each KubernetesCluster becomes, for review",
		Long: `render reads vitistack.io KubernetesClusters, checks each as the control-plane manager's
webhook does, and writes into DIR/<namespace>/<name>/cluster.yaml the Cluster API Cluster the
manager's KubernetesCluster controller applies for it (without its owner reference, which
needs the stored object's UID). A ClusterClass given with them is read for its
spec.kubernetesVersions, which a minor such as "1.36" resolves against, as in the manager.
No management cluster is needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return render.run(cmd.OutOrStdout())
		},
	}
	renderCmd.Flags().StringVarP(&render.file, "file", "f", "", "KubernetesClusters, and optionally their ClusterClass ('-' for standard input)")
	renderCmd.Flags().StringVarP(&render.outDir, "output", "o", "_out", "directory to write into")
	renderCmd.Flags().StringVar(&render.class, "class", "talos-docker",
		"ClusterClass of KubernetesClusters without the "+vitiv1.ClusterClassAnnotation+" annotation, as the manager's --kubernetes-cluster-class")
	_ = renderCmd.MarkFlagRequired("file")

	cmd := &cobra.Command{
		Use:   "kubernetescluster",
		Short: "Work with vitistack.io KubernetesClusters (docs/kubernetescluster.md)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(renderCmd)
	return cmd
}

func (o *kubernetesClusterOptions) run(out io.Writer) error {
	in, err := openInput(o.file)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	kcs, classes, err := readKubernetesClusters(in)
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	var errs []error
	for _, kc := range kcs {
		path, err := o.render(kc, classes)
		if err != nil {
			errs = append(errs, fmt.Errorf("KubernetesCluster %s/%s: %w", kc.Namespace, kc.Name, err))
			continue
		}
		_, _ = fmt.Fprintf(out, "Wrote %s\n", path)
	}
	return errors.Join(errs...)
}

// render writes the Cluster of kc and returns its path.
func (o *kubernetesClusterOptions) render(kc *vitiv1.KubernetesCluster, classes map[string]*clusterv1.ClusterClass) (string, error) {
	if errs := kubernetescluster.Check(kc, ""); len(errs) > 0 {
		return "", errs.ToAggregate()
	}
	classRef, err := kubernetescluster.Class(kc, o.class)
	if err != nil {
		return "", err
	}
	variables, err := kubernetescluster.Variables(kc)
	if err != nil {
		return "", err
	}
	var listed []string
	if class := classes[classRef.Namespace+"/"+classRef.Name]; class != nil {
		listed = class.Spec.KubernetesVersions
	}
	version, err := kubernetescluster.ResolveVersion(kc.Spec.Topology.Version, listed)
	if err != nil {
		return "", err
	}
	cluster, err := kubernetescluster.Cluster(kc, kubernetescluster.Inputs{Class: classRef, Version: version, Variables: variables})
	if err != nil {
		return "", err
	}
	data, err := sigsyaml.Marshal(cluster)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(o.outDir, kc.Namespace, kc.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "cluster.yaml")
	return path, os.WriteFile(path, data, 0o600)
}

// readKubernetesClusters decodes the KubernetesClusters and ClusterClasses of r (by
// namespace/name; objects without a namespace are in "default").
func readKubernetesClusters(r io.Reader) ([]*vitiv1.KubernetesCluster, map[string]*clusterv1.ClusterClass, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(vitiv1.AddToScheme(scheme))
	utilruntime.Must(clusterv1.AddToScheme(scheme))
	var kcs []*vitiv1.KubernetesCluster
	classes := map[string]*clusterv1.ClusterClass{}
	err := decodeDocuments(r, scheme, func(obj runtime.Object) {
		switch o := obj.(type) {
		case *vitiv1.KubernetesCluster:
			if o.Namespace == "" {
				o.Namespace = "default"
			}
			kcs = append(kcs, o)
		case *clusterv1.ClusterClass:
			if o.Namespace == "" {
				o.Namespace = "default"
			}
			classes[o.Namespace+"/"+o.Name] = o
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if len(kcs) == 0 {
		return nil, nil, errors.New("no KubernetesCluster found")
	}
	return kcs, classes, nil
}
