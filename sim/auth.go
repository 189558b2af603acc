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
	"path"

	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// methodRoles are the roles that may call each method once a node is configured, as in
// machined's authorization rules: readers read, operators also reboot and back up etcd,
// admins change the node (and alone restore etcd from a snapshot: EtcdRecover). Methods not
// listed are refused to everyone but admins.
var methodRoles = map[string]role.Set{
	"/machine.MachineService/Version":        role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/machine.MachineService/ServiceList":    role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/machine.MachineService/Events":         role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/machine.MachineService/List":           role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/machine.MachineService/Logs":           role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/machine.MachineService/Memory":         role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/machine.MachineService/Dmesg":          role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/machine.MachineService/EtcdMemberList": role.MakeSet(role.Admin, role.Operator, role.Reader, role.EtcdBackup),
	"/machine.MachineService/EtcdStatus":     role.MakeSet(role.Admin, role.Operator, role.Reader, role.EtcdBackup),
	"/machine.MachineService/EtcdSnapshot":   role.MakeSet(role.Admin, role.Operator, role.EtcdBackup),
	"/machine.MachineService/EtcdRecover":    role.MakeSet(role.Admin),
	"/machine.MachineService/Reboot":         role.MakeSet(role.Admin, role.Operator),
	"/machine.MachineService/Shutdown":       role.MakeSet(role.Admin, role.Operator),
	"/machine.MachineService/ImagePull":      role.MakeSet(role.Admin, role.Operator),
	"/machine.ImageService/Pull":             role.MakeSet(role.Admin, role.Operator),
	"/storage.StorageService/Disks":          role.MakeSet(role.Admin, role.Operator, role.Reader),
	// Readers in maintenance mode only: the handler checks.
	"/storage.StorageService/BlockDeviceWipe": role.MakeSet(role.Admin, role.Reader),
	"/cluster.ClusterService/HealthCheck":     role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/cosi.resource.State/Get":                role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/cosi.resource.State/List":               role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/cosi.resource.State/Watch":              role.MakeSet(role.Admin, role.Operator, role.Reader),
}

// maintenanceMethods are what a node without a config answers: as Talos' apid in maintenance
// mode gives every caller (there are no client certificates yet) the reader role, the
// methods readers may call, and ApplyConfiguration.
var maintenanceMethods = map[string]bool{
	"/machine.MachineService/Version":            true,
	"/machine.MachineService/ApplyConfiguration": true,
	"/storage.StorageService/Disks":              true,
	"/storage.StorageService/BlockDeviceWipe":    true,
	"/cosi.resource.State/Get":                   true,
	"/cosi.resource.State/List":                  true,
	"/cosi.resource.State/Watch":                 true,
}

func (n *Node) authorizeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := n.waitWhilePartitioned(ctx); err != nil {
		return nil, err
	}
	if err := n.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	if r, err := n.routeOf(ctx, info.FullMethod); err != nil || r != nil {
		if err != nil {
			return nil, err
		}
		return n.forwardUnary(ctx, info.FullMethod, req, r)
	}
	return handler(ctx, req)
}

func (n *Node) authorizeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := n.waitWhilePartitioned(ss.Context()); err != nil {
		return err
	}
	if err := n.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	if r, err := n.routeOf(ss.Context(), info.FullMethod); err != nil || r != nil {
		if err != nil {
			return err
		}
		return n.forwardStream(ss, info.FullMethod, r)
	}
	return handler(srv, ss)
}

func (n *Node) authorize(ctx context.Context, fullMethod string) error {
	method := path.Base(fullMethod)
	if !n.configured() {
		if maintenanceMethods[fullMethod] {
			return nil
		}
		return status.Errorf(codes.PermissionDenied, "not authorized: %s is not available in maintenance mode", method)
	}
	roles, err := callerRoles(ctx)
	if err != nil {
		return err
	}
	allowed, ok := methodRoles[fullMethod]
	if !ok {
		allowed = role.MakeSet(role.Admin)
	}
	if !roles.IncludesAny(allowed) {
		return status.Errorf(codes.PermissionDenied, "not authorized: %s needs one of the roles %v", method, allowed.Strings())
	}
	return nil
}

// peerRoles reads the Talos roles from the verified client certificate's organizations.
func peerRoles(ctx context.Context) (role.Set, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return role.Set{}, status.Error(codes.Unauthenticated, "no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return role.Set{}, status.Error(codes.Unauthenticated, "a client certificate issued by the node's CA is required")
	}
	cert := info.State.VerifiedChains[0][0]
	roles, _ := role.Parse(cert.Subject.Organization)
	return roles, nil
}

// callerRoles are the roles of the call: the client certificate's, or, when that certificate
// holds os:impersonator (another node forwarding a call), the roles the call carries in its
// metadata, as Talos trusts them.
func callerRoles(ctx context.Context) (role.Set, error) {
	roles, err := peerRoles(ctx)
	if err != nil || !roles.Includes(role.Impersonator) {
		return roles, err
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if carried := md.Get(constants.APIAuthzRoleMetadataKey); len(carried) > 0 {
			forwarded, _ := role.Parse(carried)
			return forwarded, nil
		}
	}
	return roles, nil
}
