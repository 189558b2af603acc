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

package power

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// redfishController is a Controller for a Redfish BMC.
//
// Every call connects anew and authenticates each request with HTTP basic auth instead of
// opening a Redfish session. A reconciler calls a BMC a few times, minutes apart; a session
// would cost a login and a logout per call anyway, and one that is not logged out (the
// process dies, the BMC does not answer the DELETE) holds one of the few session slots a
// BMC has until it expires. Basic auth leaves nothing behind on the BMC.
type redfishController struct {
	addr       address
	creds      Credentials
	timeout    time.Duration
	httpClient *http.Client
}

var _ Controller = &redfishController{}

func newRedfish(addr address, creds Credentials, insecureSkipVerify bool, options Options) *redfishController {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Many BMCs ship self-signed certificates; the MetalHost's owner opts in per host.
		InsecureSkipVerify: insecureSkipVerify, //nolint:gosec // opt-in per BMC, off by default
	}
	return &redfishController{
		addr:    addr,
		creds:   creds,
		timeout: options.Timeout,
		// The context bounds each call; the client timeout is a backstop for one request.
		httpClient: &http.Client{Transport: transport, Timeout: options.Timeout},
	}
}

// PowerState reports the power state the BMC reports for the system.
func (r *redfishController) PowerState(ctx context.Context) (State, error) {
	var state State
	err := r.withSystem(ctx, "read the power state", func(system *schemas.ComputerSystem) error {
		state = powerState(system.PowerState)
		return nil
	})
	return state, err
}

// PowerOn resets the system with On (or ForceOn) unless it is on already.
func (r *redfishController) PowerOn(ctx context.Context) error {
	return r.withSystem(ctx, "power on", func(system *schemas.ComputerSystem) error {
		if system.PowerState == schemas.OnPowerState {
			return nil
		}
		return reset(system, schemas.OnResetType, schemas.ForceOnResetType)
	})
}

// PowerOff resets the system with ForceOff unless it is off already.
func (r *redfishController) PowerOff(ctx context.Context) error {
	return r.withSystem(ctx, "power off", func(system *schemas.ComputerSystem) error {
		if system.PowerState == schemas.OffPowerState {
			return nil
		}
		return reset(system, schemas.ForceOffResetType)
	})
}

// PowerCycle resets a system that is off with On, as ForceRestart and PowerCycle are not
// defined (or refused) for it, and any other with ForceRestart or else PowerCycle.
func (r *redfishController) PowerCycle(ctx context.Context) error {
	return r.withSystem(ctx, "power cycle", func(system *schemas.ComputerSystem) error {
		if system.PowerState == schemas.OffPowerState {
			return reset(system, schemas.OnResetType, schemas.ForceOnResetType)
		}
		return reset(system, schemas.ForceRestartResetType, schemas.PowerCycleResetType)
	})
}

// SetOneTimeBoot sets the system's boot source override to boot once from the device.
func (r *redfishController) SetOneTimeBoot(ctx context.Context, boot BootDevice) error {
	if err := boot.validate(); err != nil {
		return fmt.Errorf("failed to set one-time boot via BMC %s: %w", r.addr, err)
	}
	target := schemas.PxeBootSource
	if boot.Device == DeviceDisk {
		target = schemas.HddBootSource
	}
	mode := schemas.UEFIBootSourceOverrideMode
	if boot.mode() == BootModeLegacy {
		mode = schemas.LegacyBootSourceOverrideMode
	}
	return r.withSystem(ctx, "set one-time boot to "+boot.String(), func(system *schemas.ComputerSystem) error {
		if allowed := system.Boot.AllowableBootSourceOverrideTargetValues; len(allowed) > 0 && !slices.Contains(allowed, target) {
			return fmt.Errorf("system %s does not allow boot source %s, only %v", system.ODataID, target, allowed)
		}
		err := system.SetBoot(&schemas.Boot{
			BootSourceOverrideEnabled: schemas.OnceBootSourceOverrideEnabled,
			BootSourceOverrideTarget:  target,
			BootSourceOverrideMode:    mode,
		})
		if err != nil {
			return fmt.Errorf("failed to update the boot override of system %s: %w", system.ODataID, describe(err))
		}
		return nil
	})
}

// withSystem connects to the BMC, finds the ComputerSystem and runs fn on it, all within
// the timeout, and turns what goes wrong into an error that names the BMC and operation.
func (r *redfishController) withSystem(ctx context.Context, operation string, fn func(*schemas.ComputerSystem) error) error {
	callCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	err := func() error {
		client, err := gofish.ConnectContext(callCtx, gofish.ClientConfig{
			Endpoint:          r.addr.endpoint(),
			Username:          r.creds.Username,
			Password:          r.creds.Password,
			BasicAuth:         true,
			HTTPClient:        r.httpClient,
			NoModifyTransport: true,
		})
		if err != nil {
			return describe(err)
		}
		system, err := r.system(client)
		if err != nil {
			return err
		}
		return fn(system)
	}()
	if err == nil {
		return nil
	}
	prefix := fmt.Sprintf("failed to %s via BMC %s", operation, r.addr)
	switch {
	case ctx.Err() == nil && (callCtx.Err() != nil || isTimeout(err)):
		return &kindError{kind: ErrTimeout, msg: fmt.Sprintf("%s: no answer within %s", prefix, r.timeout)}
	case httpStatus(err) == http.StatusUnauthorized:
		return &kindError{kind: ErrUnauthorized, msg: fmt.Sprintf("%s: credentials rejected (HTTP 401)", prefix)}
	case httpStatus(err) == http.StatusForbidden:
		return &kindError{kind: ErrUnauthorized, msg: fmt.Sprintf("%s: the user is not allowed to (HTTP 403)", prefix)}
	default:
		return fmt.Errorf("%s: %w", prefix, err)
	}
}

// system finds the ComputerSystem the address selects, or the only one the BMC has.
func (r *redfishController) system(client *gofish.APIClient) (*schemas.ComputerSystem, error) {
	if r.addr.path != "" {
		system, err := schemas.GetComputerSystem(client, r.addr.path)
		if httpStatus(err) == http.StatusNotFound {
			return nil, fmt.Errorf("no ComputerSystem %s", r.addr.path)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read ComputerSystem %s: %w", r.addr.path, describe(err))
		}
		return system, nil
	}
	systems, err := client.Service.Systems()
	if err != nil {
		return nil, fmt.Errorf("failed to list ComputerSystems: %w", describe(err))
	}
	switch len(systems) {
	case 0:
		return nil, errors.New("no ComputerSystem listed")
	case 1:
		return systems[0], nil
	default:
		ids := make([]string, 0, len(systems))
		for _, s := range systems {
			ids = append(ids, s.ODataID)
		}
		slices.Sort(ids)
		return nil, fmt.Errorf("%d ComputerSystems listed (%s): add the one to use to the address, e.g. %s://%s%s",
			len(systems), strings.Join(ids, ", "), r.addr.scheme, r.addr.host, ids[0])
	}
}

// reset resets the system with the first of the reset types it allows; a system that does
// not list what it allows is assumed to allow the first.
func reset(system *schemas.ComputerSystem, preferred ...schemas.ResetType) error {
	allowed, err := system.GetSupportedResetTypes()
	if err != nil {
		return fmt.Errorf("failed to read the reset types of system %s: %w", system.ODataID, describe(err))
	}
	resetType := preferred[0]
	if len(allowed) > 0 {
		i := slices.IndexFunc(preferred, func(t schemas.ResetType) bool { return slices.Contains(allowed, t) })
		if i < 0 {
			return fmt.Errorf("system %s allows none of the reset types %v, only %v", system.ODataID, preferred, allowed)
		}
		resetType = preferred[i]
	}
	if _, err := system.Reset(resetType); err != nil {
		return fmt.Errorf("reset %s of system %s failed: %w", resetType, system.ODataID, describe(err))
	}
	return nil
}

// powerState maps a Redfish PowerState to a State.
func powerState(s schemas.PowerState) State {
	switch s {
	case schemas.OnPowerState:
		return StateOn
	case schemas.OffPowerState:
		return StateOff
	default:
		return StateUnknown
	}
}
