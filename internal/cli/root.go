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
	"io"

	"github.com/spf13/cobra"
)

// NewRootCommand returns the talon command with every subcommand, writing to out and errOut.
func NewRootCommand(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "talon",
		Short:         "Talon: Cluster API providers for Talos Linux",
		Long:          "talon renders and validates Talos configs offline and runs a local Talos cluster managed by Cluster API.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newVersionCommand(), newRenderCommand(), newValidateCommand(), newSimCommand(), newLBCommand(), newUpCommand(), newStatusCommand(), newDownCommand(), newDashboardCommand(), newKubernetesClusterCommand())
	return root
}
