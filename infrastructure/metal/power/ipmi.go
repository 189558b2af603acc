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
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"
)

// defaultIPMIPort is the RMCP port, where BMCs listen for IPMI over LAN.
const defaultIPMIPort = 623

// IPMI v2.0 limits on credentials (RAKP Message 1, Set User Password).
const (
	maxIPMIUsername = 16
	maxIPMIPassword = 20
)

// ipmiAttemptTimeout is how long one IPMI request waits for its answer before it is
// sent again (UDP loses packets), as ipmitool's lanplus interface does.
const ipmiAttemptTimeout = time.Second

// ipmiController is a Controller for a BMC that speaks IPMI v2.0 over LAN (RMCP+,
// ipmitool's "lanplus").
//
// Every call opens a session, at the Operator privilege that chassis control and boot
// options need, and closes it before it returns: BMCs have a handful of session slots, and
// one a controller left open blocks the next login until it times out. go-ipmi picks the
// cipher suite from those the BMC lists, preferring 17 (HMAC-SHA256) and then 3
// (HMAC-SHA1, AES-CBC-128), which IPMI v2.0 requires of every BMC.
type ipmiController struct {
	addr    address
	host    string
	port    int
	creds   Credentials
	timeout time.Duration
}

var _ Controller = &ipmiController{}

func newIPMI(addr address, creds Credentials, options Options) (*ipmiController, error) {
	host, port := addr.host, defaultIPMIPort
	if h, p, err := net.SplitHostPort(addr.host); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("invalid BMC address %s: invalid port %q", addr, p)
		}
		host, port = h, n
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if len(creds.Username) > maxIPMIUsername {
		return nil, fmt.Errorf("user name for BMC %s is %d bytes long, IPMI allows at most %d", addr, len(creds.Username), maxIPMIUsername)
	}
	if len(creds.Password) > maxIPMIPassword {
		return nil, fmt.Errorf("password for BMC %s is %d bytes long, IPMI allows at most %d", addr, len(creds.Password), maxIPMIPassword)
	}
	return &ipmiController{addr: addr, host: host, port: port, creds: creds, timeout: options.Timeout}, nil
}

// PowerState reads the power-on bit of Get Chassis Status.
func (c *ipmiController) PowerState(ctx context.Context) (State, error) {
	var state State
	err := c.withSession(ctx, "read the power state", func(ctx context.Context, bmc *client.Client) error {
		on, err := isOn(ctx, bmc)
		if err != nil {
			return err
		}
		state = StateOff
		if on {
			state = StateOn
		}
		return nil
	})
	return state, err
}

// PowerOn sends Chassis Control power up unless the host is on already.
func (c *ipmiController) PowerOn(ctx context.Context) error {
	return c.withSession(ctx, "power on", func(ctx context.Context, bmc *client.Client) error {
		on, err := isOn(ctx, bmc)
		if err != nil || on {
			return err
		}
		return chassisControl(ctx, bmc, chassis.ChassisControlPowerUp)
	})
}

// PowerOff sends Chassis Control power down, which does not wait for the operating
// system, unless the host is off already.
func (c *ipmiController) PowerOff(ctx context.Context) error {
	return c.withSession(ctx, "power off", func(ctx context.Context, bmc *client.Client) error {
		on, err := isOn(ctx, bmc)
		if err != nil || !on {
			return err
		}
		return chassisControl(ctx, bmc, chassis.ChassisControlPowerDown)
	})
}

// PowerCycle sends Chassis Control power cycle to a host that is on and power up to one
// that is off, for which many BMCs refuse a power cycle.
func (c *ipmiController) PowerCycle(ctx context.Context) error {
	return c.withSession(ctx, "power cycle", func(ctx context.Context, bmc *client.Client) error {
		on, err := isOn(ctx, bmc)
		if err != nil {
			return err
		}
		if !on {
			return chassisControl(ctx, bmc, chassis.ChassisControlPowerUp)
		}
		return chassisControl(ctx, bmc, chassis.ChassisControlPowerCycle)
	})
}

// SetOneTimeBoot sets the boot flags (System Boot Options parameter 5): valid, for the
// next boot only, EFI or legacy, and force PXE or force the default hard disk. It takes
// the set-in-progress lock (parameter 0) around the write, as ipmitool does, when the BMC
// supports it.
//
// Many BMCs clear the flags again if the host does not boot within 60 seconds, so the
// caller powers the host on or cycles it right after.
func (c *ipmiController) SetOneTimeBoot(ctx context.Context, boot BootDevice) error {
	if err := boot.validate(); err != nil {
		return fmt.Errorf("failed to set one-time boot via BMC %s: %w", c.addr, err)
	}
	flags := &types.BootOptionParam_BootFlags{
		BootFlagsValid:     true,
		Persist:            false,
		BIOSBootType:       types.BIOSBootType(boot.mode() == BootModeUEFI),
		BootDeviceSelector: types.BootDeviceSelectorForcePXE,
	}
	if boot.Device == DeviceDisk {
		flags.BootDeviceSelector = types.BootDeviceSelectorForceHardDrive
	}
	return c.withSession(ctx, "set one-time boot to "+boot.String(), func(ctx context.Context, bmc *client.Client) error {
		// A BMC without the lock, or with a lock another client left set, still takes the
		// flags; ipmitool goes on the same way.
		locked := bmc.SetBootParamSetInProgress(ctx, types.SetInProgress_SetInProgress) == nil
		if err := bmc.SetSystemBootOptionsParamFor(ctx, flags); err != nil {
			return fmt.Errorf("failed to set the boot flags: %w", err)
		}
		if !locked {
			return nil
		}
		if err := bmc.SetBootParamSetInProgress(ctx, types.SetInProgress_SetComplete); err != nil {
			return fmt.Errorf("failed to release the boot options set-in-progress lock: %w", err)
		}
		return nil
	})
}

// isOn reads the power-on bit of Get Chassis Status. IPMI knows no state between on and
// off: the bit says whether the host has power.
func isOn(ctx context.Context, bmc *client.Client) (bool, error) {
	status, err := bmc.GetChassisStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("failed to get the chassis status: %w", err)
	}
	return status.PowerIsOn, nil
}

func chassisControl(ctx context.Context, bmc *client.Client, control chassis.ChassisControl) error {
	if _, err := bmc.ChassisControl(ctx, control); err != nil {
		return fmt.Errorf("chassis control %s failed: %w", chassisControlName(control), err)
	}
	return nil
}

func chassisControlName(control chassis.ChassisControl) string {
	switch control {
	case chassis.ChassisControlPowerUp:
		return "power up"
	case chassis.ChassisControlPowerDown:
		return "power down"
	case chassis.ChassisControlPowerCycle:
		return "power cycle"
	default:
		return strconv.Itoa(int(control))
	}
}

// withSession opens a session with the BMC, runs fn in it and closes it, all within the
// timeout, and turns what goes wrong into an error that names the BMC and operation.
func (c *ipmiController) withSession(ctx context.Context, operation string, fn func(context.Context, *client.Client) error) error {
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.session(callCtx, fn)
	if err == nil {
		return nil
	}
	// go-ipmi stops resending at the deadline, maybe before the context notices, and then
	// reports that no answer came rather than the context's error.
	deadline, _ := callCtx.Deadline()
	timedOut := callCtx.Err() != nil || !time.Now().Before(deadline) || isTimeout(err)
	prefix := fmt.Sprintf("failed to %s via BMC %s", operation, c.addr)
	switch {
	case ctx.Err() == nil && timedOut:
		return &kindError{kind: ErrTimeout, msg: fmt.Sprintf("%s: no answer within %s", prefix, c.timeout)}
	case isIPMIUnauthorized(err):
		return &kindError{kind: ErrUnauthorized, msg: fmt.Sprintf("%s: credentials rejected, or the user may not control the chassis", prefix)}
	default:
		return fmt.Errorf("%s: %w", prefix, err)
	}
}

// session runs fn in a new session and closes it. go-ipmi closes its socket only when it
// closes a session, so a socket of our own makes sure a failed login does not leak one.
func (c *ipmiController) session(ctx context.Context, fn func(context.Context, *client.Client) error) error {
	bmc, err := client.NewClient(c.host, c.port, c.creds.Username, c.creds.Password)
	if err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	socket := &udpSocket{deadline: deadline, address: net.JoinHostPort(c.host, strconv.Itoa(c.port))}
	defer socket.close()
	attempt := min(ipmiAttemptTimeout, c.timeout)
	bmc.WithUDPProxy(socket).
		WithTimeout(attempt).
		// Resend until the call's context ends, which then reports the timeout.
		WithRetry(int(c.timeout/attempt) + 1).
		WithMaxPrivilegeLevel(types.PrivilegeLevelOperator)
	if err := bmc.Connect(ctx); err != nil {
		return err
	}
	err = fn(ctx, bmc)
	// A session that cannot be closed in time expires on the BMC; the operation's outcome
	// is what the caller needs to know.
	_ = bmc.Close(ctx)
	return err
}

// udpSocket dials the BMC for go-ipmi (as its proxy dialer) and remembers the socket so
// it can be closed whatever happens. It also joins IPv6 hosts and ports correctly.
type udpSocket struct {
	// deadline bounds resolving the BMC's name.
	deadline time.Time
	address  string

	mu   sync.Mutex
	conn net.Conn
}

// Dial connects a UDP socket to the BMC; go-ipmi's address is ignored.
func (s *udpSocket) Dial(_, _ string) (net.Conn, error) {
	conn, err := (&net.Dialer{Deadline: s.deadline}).Dial("udp", s.address)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = conn
	return conn, nil
}

func (s *udpSocket) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		_ = s.conn.Close()
	}
}

// isIPMIUnauthorized tells whether an error from go-ipmi says that the BMC rejected the
// user or password, or the privilege the controller needs.
func isIPMIUnauthorized(err error) bool {
	var status *types.RmcpStatusError
	if errors.Is(err, client.ErrRAKPAuthentication) || (errors.As(err, &status) && slices.Contains(unauthorizedStatuses, status.StatusCode())) {
		return true
	}
	if rerr, ok := types.IsResponseError(err); ok {
		switch rerr.CompletionCode() {
		case types.CodeInsufficientPrivilege, types.CodeSetSessionPrivilegeLevelLevelNotAvailable, types.CodeSetSessionPrivilegeLevelExceedsLimit:
			return true
		}
	}
	// go-ipmi v0.9.1's Connect reports the login attempts of all cipher suites it tried
	// as text, so the errors above are only found in it by their messages.
	text := err.Error()
	if strings.Contains(text, client.ErrRAKPAuthentication.Error()) {
		return true
	}
	for _, code := range unauthorizedStatuses {
		if strings.Contains(text, types.NewRmcpStatusError(code).Error()) {
			return true
		}
	}
	return false
}

// unauthorizedStatuses are the RMCP+ statuses with which a BMC rejects a login.
var unauthorizedStatuses = []types.RmcpStatusCode{
	types.RmcpStatusCodeUnauthorizedName,
	types.RmcpStatusCodeUnauthorizedRoleOfPriLevel,
	types.RmcpStatusCodeInvalidIntegrityCheckValue,
}
