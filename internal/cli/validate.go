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
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

func newValidateCommand() *cobra.Command {
	var mode, talosVersion string
	cmd := &cobra.Command{
		Use:   "validate --mode metal|container [--talos-version v1.14] FILE",
		Short: "Check a Talos machine config the way a node of that mode and Talos version would",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := configgen.ParseMode(mode)
			if err != nil {
				return err
			}
			contract, err := configgen.ParseContract(talosVersion)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			if _, err := configgen.Validate(data, m, contract); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s is valid for %s mode on Talos %s\n", args[0], m, contract)
			return err
		},
	}
	cmd.Flags().StringVar(&mode, "mode", "metal", "runtime mode of the node: metal or container")
	cmd.Flags().StringVar(&talosVersion, "talos-version", configgen.DefaultTalosVersion(), "Talos version (config contract) of the node, e.g. v1.13")
	return cmd
}
