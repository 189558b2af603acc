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

package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/blang/semver/v4"
	"github.com/google/uuid"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configdiff"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ApplyConfiguration validates a machine config and applies it in the mode asked for, with
// the rules of the node's Talos version. In maintenance mode every mode configures the node
// at once. Once configured, before Talos 1.14: no_reboot applies at once what Talos can apply
// without a reboot and refuses anything else with the diff of what needs one; auto picks
// no_reboot or reboot by the same rule; reboot persists the config and reboots. From Talos
// 1.14 every change applies at once: auto is no_reboot and reboot is refused (the client
// reboots when it wants to). From Talos 1.13.3 a second apply while one runs is refused, and
// on 1.13 so is any apply once one has started a reboot. Staged persists the config for the
// next boot; try applies it at once and rolls it back after the timeout unless another
// config is applied meanwhile: any request in another mode keeps it, as Talos cancels the
// rollback before it looks at the request. A dry run answers with the mode it would take
// and the diff against the current config.
func (s *machineService) ApplyConfiguration(ctx context.Context, req *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	n := s.node
	decidesReboots := n.decidesReboots()
	if n.guardsApply() {
		if !s.applying.TryLock() {
			return nil, status.Error(codes.FailedPrecondition, "another apply configuration is already in progress")
		}
		defer s.applying.Unlock()
		if decidesReboots && n.applyRebooting() {
			return nil, status.Error(codes.FailedPrecondition, "configuration was already applied and node is rebooting, cannot apply more configuration changes until next reboot")
		}
	}
	mode := req.GetMode()
	if mode != machine.ApplyConfigurationRequest_TRY {
		n.cancelRollback()
	}
	cfg, err := configloader.NewFromBytes(req.GetData())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	inMaintenance := !n.configured()
	if !inMaintenance && cfg.RawV1Alpha1() == nil {
		return nil, status.Error(codes.InvalidArgument, "the applied machine configuration doesn't contain v1alpha1 config, did you mean to patch the machine config instead?")
	}
	if !decidesReboots && !inMaintenance && mode == machine.ApplyConfigurationRequest_REBOOT {
		return nil, status.Error(codes.Unimplemented, "the REBOOT mode is not supported, please use AUTO or NO_REBOOT modes instead")
	}
	if err := n.validate(req.GetData()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if inMaintenance && (mode == machine.ApplyConfigurationRequest_REBOOT || mode == machine.ApplyConfigurationRequest_AUTO) {
		mode = machine.ApplyConfigurationRequest_NO_REBOOT
	}
	details, detailsErr := "Applied configuration with a reboot", ""
	switch mode {
	case machine.ApplyConfigurationRequest_TRY, machine.ApplyConfigurationRequest_NO_REBOOT:
		if decidesReboots && !inMaintenance {
			if err := n.canApplyImmediately(cfg); err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
		}
		details = "Applied configuration without a reboot"
	case machine.ApplyConfigurationRequest_STAGED:
		details = "Staged configuration to be applied after the next reboot"
	case machine.ApplyConfigurationRequest_AUTO:
		if !decidesReboots {
			mode, details = machine.ApplyConfigurationRequest_NO_REBOOT, "Applied configuration without a reboot"
		} else if err := n.canApplyImmediately(cfg); err != nil {
			mode, detailsErr = machine.ApplyConfigurationRequest_REBOOT, ": "+err.Error()
		} else {
			mode, details = machine.ApplyConfigurationRequest_NO_REBOOT, "Applied configuration without a reboot"
		}
	case machine.ApplyConfigurationRequest_REBOOT: // only before 1.14
	default:
		// Talos 1.14 refuses an unknown mode here; 1.13 lets it through to a dry run and
		// refuses it below, without a code.
		if !decidesReboots {
			return nil, status.Errorf(codes.InvalidArgument, "incorrect mode '%s' specified for the apply config call", mode)
		}
	}
	if req.GetDryRun() {
		diff, err := n.configDiff(cfg)
		if err != nil {
			return nil, fmt.Errorf("failed to generate diff: %w", err)
		}
		return applied(mode, fmt.Sprintf("Dry run summary:\n%s (skipped in dry-run).\n%s", details, diff)), nil
	}
	switch {
	case inMaintenance || mode == machine.ApplyConfigurationRequest_NO_REBOOT:
		err = n.applyNow(ctx, req.GetData())
	case mode == machine.ApplyConfigurationRequest_TRY:
		timeout := constants.ConfigTryTimeout
		if req.GetTryModeTimeout() != nil {
			timeout = req.GetTryModeTimeout().AsDuration()
		}
		details += fmt.Sprintf("\nThe config is applied in 'try' mode and will be automatically reverted back in %s", timeout)
		err = n.tryConfig(ctx, req.GetData(), timeout)
	case mode == machine.ApplyConfigurationRequest_STAGED || mode == machine.ApplyConfigurationRequest_REBOOT:
		if err = os.WriteFile(n.stateDir("staged.yaml"), req.GetData(), 0o600); err == nil && mode == machine.ApplyConfigurationRequest_REBOOT {
			n.setApplyRebooting()
			n.rebootLater("apply-config", uuid.NewString())
		}
	default:
		return nil, fmt.Errorf("incorrect mode '%s' specified for the apply config call", mode) //nolint:err113 // Talos' own, without a gRPC code
	}
	if err != nil {
		return nil, err
	}
	return applied(mode, details+detailsErr), nil
}

// applyRebooting reports whether an apply has started a reboot in this boot.
func (n *Node) applyRebooting() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.applyRebooted
}

// setApplyRebooting records that an apply started a reboot; the next boot forgets it.
func (n *Node) setApplyRebooting() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.applyRebooted = true
}

// decidesReboots reports whether the node's Talos decides which config changes need a
// reboot, as Talos did before 1.14 (canApplyImmediately). Talos 1.14 dropped the check: it
// applies every change at once and leaves reboots to the client.
func (n *Node) decidesReboots() bool {
	contract, err := talosconfig.ParseContractFromVersion(n.talosVersion())
	return err == nil && !contract.Greater(talosconfig.TalosVersion1_13)
}

// firstGuardedApply is the first Talos release that refuses a config apply while another
// runs: 1.14's guard, backported to 1.13.3.
var firstGuardedApply = semver.MustParse("1.13.3")

// guardsApply reports whether the node's Talos allows one config apply at a time.
func (n *Node) guardsApply() bool {
	v, err := semver.ParseTolerant(n.talosVersion())
	return err == nil && v.GTE(firstGuardedApply)
}

func applied(mode machine.ApplyConfigurationRequest_Mode, details string) *machine.ApplyConfigurationResponse {
	return &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{Mode: mode, ModeDetails: details}}}
}

// applyNow makes data the node's config at once.
func (n *Node) applyNow(ctx context.Context, data []byte) error {
	if err := n.applyConfig(ctx, data); err != nil {
		if errors.Is(err, errInvalidConfig) {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// tryConfig applies data at once and puts the current config back after timeout, unless
// another config is applied first. As Talos' RollbackToConfigAfter, it replaces the rollback
// of an earlier try, whose config is then the one put back.
func (n *Node) tryConfig(ctx context.Context, data []byte, timeout time.Duration) error {
	n.mu.Lock()
	previous := n.cfgData
	n.mu.Unlock()
	n.cancelRollback()
	if err := n.applyNow(ctx, data); err != nil {
		return err
	}
	rollback := time.AfterFunc(timeout, func() {
		n.opts.Log.Info("Rolling back the config applied in try mode")
		if err := n.applyConfig(context.Background(), previous); err != nil {
			n.opts.Log.Error(err, "Failed to roll back the config applied in try mode")
		}
	})
	n.mu.Lock()
	n.rollback = rollback
	n.mu.Unlock()
	return nil
}

// cancelRollback keeps a config applied in try mode: another config is being applied.
func (n *Node) cancelRollback() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rollback != nil {
		n.rollback.Stop()
		n.rollback = nil
	}
}

// configDiff is the dry run's diff of cfg against the current config, as machined words it.
func (n *Node) configDiff(cfg talosconfig.Provider) (string, error) {
	n.mu.Lock()
	current := n.cfg
	n.mu.Unlock()
	var diff string
	if current != nil {
		var err error
		if diff, err = configdiff.DiffConfigs(current, cfg); err != nil {
			return "", err
		}
	}
	if diff == "" {
		diff = "No changes."
	}
	return "Config diff:\n\n" + diff, nil
}

// canApplyImmediately reports why cfg needs a reboot to take effect, with the diff of what
// needs it, or nil when everything it changes Talos applies on the fly: the cluster section,
// debug, and the machine's CA, accepted CAs, time, certificate SANs, install, network,
// sysfs, sysctls, logging, control-plane, kubelet, kernel, registries, pods, seccomp profiles,
// node annotations, labels and taints, and the features kubernetesTalosAPIAccess, kubePrism,
// hostDNS, imageCache and nodeAddressSortAlgorithm.
func (n *Node) canApplyImmediately(cfg talosconfig.Provider) error {
	n.mu.Lock()
	current := n.cfg
	n.mu.Unlock()
	if current == nil || current.RawV1Alpha1() == nil {
		return errors.New("no current config")
	}
	if cfg.RawV1Alpha1() == nil {
		return errors.New("new config is not v1alpha1")
	}
	was, next := current.RawV1Alpha1(), cfg.RawV1Alpha1().DeepCopy()
	next.ConfigDebug, next.ClusterConfig = was.ConfigDebug, was.ClusterConfig
	if m, w := next.MachineConfig, was.MachineConfig; m != nil && w != nil {
		m.MachineCA, m.MachineAcceptedCAs, m.MachineTime, m.MachineCertSANs = w.MachineCA, w.MachineAcceptedCAs, w.MachineTime, w.MachineCertSANs   // Talos still reads machine.time
		m.MachineInstall, m.MachineNetwork, m.MachineSysfs, m.MachineSysctls = w.MachineInstall, w.MachineNetwork, w.MachineSysfs, w.MachineSysctls // and machine.network
		m.MachineLogging, m.MachineControlPlane, m.MachineKubelet, m.MachineKernel = w.MachineLogging, w.MachineControlPlane, w.MachineKubelet, w.MachineKernel
		m.MachineRegistries, m.MachinePods, m.MachineSeccompProfiles = w.MachineRegistries, w.MachinePods, w.MachineSeccompProfiles // and machine.registries
		m.MachineNodeAnnotations, m.MachineNodeLabels, m.MachineNodeTaints = w.MachineNodeAnnotations, w.MachineNodeLabels, w.MachineNodeTaints
		if f, wf := m.MachineFeatures, w.MachineFeatures; f != nil && wf != nil {
			f.KubernetesTalosAPIAccessConfig, f.KubePrismSupport, f.HostDNSSupport = wf.KubernetesTalosAPIAccessConfig, wf.KubePrismSupport, wf.HostDNSSupport
			f.ImageCacheSupport, f.FeatureNodeAddressSortAlgorithm = wf.ImageCacheSupport, wf.FeatureNodeAddressSortAlgorithm
		}
	}
	if reflect.DeepEqual(was, next) {
		return nil
	}
	diff, err := configdiff.DiffConfigs(container.NewV1Alpha1(was), container.NewV1Alpha1(next))
	if err != nil {
		return fmt.Errorf("error calculating diff: %w", err)
	}
	return fmt.Errorf("this config change can't be applied in immediate mode\ndiff:\n%s", diff)
}
