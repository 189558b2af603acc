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
	"crypto/tls"
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// This file is the node's apid: like Talos' apid, it routes a call by its gRPC metadata.
// "nodes" (what talosctl -n sends) sends the call to every listed node and answers with all
// their replies in one response, each reply's metadata naming the node as it was listed and
// carrying the error of a node that failed; "node" forwards the call to that one node and
// answers with its reply as it is; a call forwarded by another node ("proxyfrom") or with
// neither is answered by the node itself. Forwarded calls carry the caller's roles, which
// the receiving node trusts from the forwarding node's os:impersonator certificate.

// route is where a call goes: nil for the node itself.
type route struct {
	targets []string
	many    bool
}

// routeOf reads the call's route from its metadata, as apid's director does.
func (n *Node) routeOf(ctx context.Context, fullMethod string) (*route, error) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || !n.configured() {
		return nil, nil
	}
	if _, ok := md["proxyfrom"]; ok {
		return nil, nil
	}
	nodes, okNodes := md["nodes"]
	node, okNode := md["node"]
	if okNode && len(node) != 1 {
		return nil, status.Error(codes.InvalidArgument, "node metadata must be single-valued")
	}
	// A node that cannot forward (a worker) answers a call meant for itself alone, as apid
	// does when forwarding is disabled.
	if _, err := n.peerTLS(); err != nil {
		if okNode && n.isLocalTarget(node[0]) {
			okNode = false
		}
		if okNodes && len(nodes) == 1 && n.isLocalTarget(nodes[0]) {
			okNodes = false
		}
	}
	switch {
	case okNodes:
		if !oneToMany(fullMethod) {
			return nil, status.Errorf(codes.InvalidArgument, "one-2-many proxying is not supported for method %s", fullMethod)
		}
		return &route{targets: nodes, many: true}, nil
	case okNode:
		return &route{targets: node}, nil
	}
	return nil, nil
}

// isLocalTarget reports whether target names this node: its address or its hostname.
func (n *Node) isLocalTarget(target string) bool {
	target = strings.Trim(target, "[]")
	if ip := net.ParseIP(target); ip != nil {
		return ip.Equal(n.ip)
	}
	host, domain := n.fqdn()
	return target == host || (domain != "" && target == host+"."+domain)
}

// oneToMany reports whether apid sends a method to many nodes at once: the methods of the
// services whose replies carry the node they came from.
func oneToMany(fullMethod string) bool {
	for _, service := range []string{"machine.MachineService", "cluster.ClusterService", "inspect.InspectService", "storage.StorageService", "time.TimeService"} {
		if strings.HasPrefix(fullMethod, "/"+service+"/") {
			return true
		}
	}
	return false
}

// forwardUnary answers a unary call routed to other nodes.
func (n *Node) forwardUnary(ctx context.Context, fullMethod string, req any, r *route) (any, error) {
	method, err := methodDescriptor(fullMethod)
	if err != nil {
		return nil, err
	}
	call := func(target string) (proto.Message, error) {
		resp := newMessage(method.Output())
		conn, err := n.dialPeer(target)
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		return resp, conn.Invoke(n.outgoing(ctx), fullMethod, req, resp)
	}
	if !r.many {
		return call(r.targets[0])
	}
	replies := make([]proto.Message, len(r.targets))
	var wg sync.WaitGroup
	for i, target := range r.targets {
		wg.Go(func() {
			resp, err := call(target)
			if err != nil {
				// The reply of a node that failed: its metadata alone, with the error.
				resp = newMessage(method.Output())
				messages := resp.ProtoReflect().Mutable(messagesField(resp)).List()
				reply := messages.NewElement()
				stamp(reply.Message(), target, err)
				messages.Append(reply)
			} else {
				messages := resp.ProtoReflect().Get(messagesField(resp)).List()
				for j := range messages.Len() {
					stamp(messages.Get(j).Message(), target, nil)
				}
			}
			replies[i] = resp
		})
	}
	wg.Wait()
	merged := newMessage(method.Output())
	all := merged.ProtoReflect().Mutable(messagesField(merged)).List()
	for _, resp := range replies {
		messages := resp.ProtoReflect().Get(messagesField(resp)).List()
		for j := range messages.Len() {
			all.Append(messages.Get(j))
		}
	}
	return merged, nil
}

// forwardStream answers a streaming call routed to other nodes: with "nodes", the messages of
// every node as they come, each stamped with its node. A client stream goes to one node only.
func (n *Node) forwardStream(ss grpc.ServerStream, fullMethod string, r *route) error {
	method, err := methodDescriptor(fullMethod)
	if err != nil {
		return err
	}
	if method.IsStreamingClient() {
		if len(r.targets) != 1 {
			return status.Errorf(codes.Unimplemented, "the simulator does not forward client streams to more than one node (%s)", fullMethod)
		}
		return n.forwardClientStream(ss, fullMethod, method, r)
	}
	req := newMessage(method.Input())
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	var mu sync.Mutex
	send := func(m proto.Message) error {
		mu.Lock()
		defer mu.Unlock()
		return ss.SendMsg(m)
	}
	relay := func(target string) error {
		conn, err := n.dialPeer(target)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		ctx, cancel := context.WithCancel(n.outgoing(ss.Context()))
		defer cancel()
		cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, fullMethod)
		if err != nil {
			return err
		}
		if err := cs.SendMsg(req); err != nil {
			return err
		}
		if err := cs.CloseSend(); err != nil {
			return err
		}
		for {
			msg := newMessage(method.Output())
			if err := cs.RecvMsg(msg); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return err
			}
			if r.many {
				stamp(msg.ProtoReflect(), target, nil)
			}
			if err := send(msg); err != nil {
				return err
			}
		}
	}
	if !r.many {
		return relay(r.targets[0])
	}
	var wg sync.WaitGroup
	for _, target := range r.targets {
		wg.Go(func() {
			if err := relay(target); err != nil {
				msg := newMessage(method.Output())
				stamp(msg.ProtoReflect(), target, err)
				_ = send(msg)
			}
		})
	}
	wg.Wait()
	return nil
}

// forwardClientStream relays a client-streaming call (EtcdRecover's upload) to the one node
// of its route: the caller's messages as they come, then the node's reply, stamped with the
// node when routed by "nodes" (a failure too, as forwardStream stamps it).
func (n *Node) forwardClientStream(ss grpc.ServerStream, fullMethod string, method protoreflect.MethodDescriptor, r *route) error {
	target := r.targets[0]
	// A streamed message carries its metadata itself; a single reply (EtcdRecoverResponse) in
	// each of its messages, as forwardUnary stamps them.
	stampReply := func(msg proto.Message, err error) {
		if method.IsStreamingServer() {
			stamp(msg.ProtoReflect(), target, err)
			return
		}
		messages := msg.ProtoReflect().Mutable(messagesField(msg)).List()
		if err != nil {
			reply := messages.NewElement()
			stamp(reply.Message(), target, err)
			messages.Append(reply)
			return
		}
		for j := range messages.Len() {
			stamp(messages.Get(j).Message(), target, nil)
		}
	}
	fail := func(err error) error {
		if !r.many {
			return err
		}
		msg := newMessage(method.Output())
		stampReply(msg, err)
		return ss.SendMsg(msg)
	}
	conn, err := n.dialPeer(target)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithCancel(n.outgoing(ss.Context()))
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: method.IsStreamingServer()}, fullMethod)
	if err != nil {
		return fail(err)
	}
	// The caller's messages go to the node as they come; uploaded is closed with uploadErr
	// once they have all gone (or the call ended).
	uploaded := make(chan struct{})
	var uploadErr error
	go func() {
		defer close(uploaded)
		for {
			msg := newMessage(method.Input())
			if err := ss.RecvMsg(msg); errors.Is(err, io.EOF) {
				uploadErr = cs.CloseSend()
				return
			} else if err != nil {
				cancel() // the caller is gone: so is the call
				uploadErr = err
				return
			}
			if err := cs.SendMsg(msg); err != nil {
				return // the node ended the call: its reply says why
			}
		}
	}()
	for {
		msg := newMessage(method.Output())
		if err := cs.RecvMsg(msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			cancel()
			<-uploaded
			return fail(err)
		}
		if r.many {
			stampReply(msg, nil)
		}
		if err := ss.SendMsg(msg); err != nil {
			cancel()
			<-uploaded
			return err
		}
	}
	<-uploaded
	return uploadErr
}

// outgoing is the context of a forwarded call: the caller's metadata without the routing,
// marked as forwarded, with the caller's roles.
func (n *Node) outgoing(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	roles, _ := callerRoles(ctx)
	md.Set(constants.APIAuthzRoleMetadataKey, roles.Strings()...)
	if authority := md[":authority"]; len(authority) > 0 {
		md.Set("proxyfrom", authority...)
	} else {
		md.Set("proxyfrom", "unknown")
	}
	for _, key := range []string{":authority", "nodes", "node", "content-type", "user-agent"} {
		delete(md, key)
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// dialPeer connects to the Talos API of target (an address or name, as the caller gave it)
// with an os:impersonator certificate from the node's OS CA. Like a Talos node without a CA
// key to issue it, a node that cannot issue one does not forward.
func (n *Node) dialPeer(target string) (*grpc.ClientConn, error) {
	tlsConfig, err := n.peerTLS()
	if err != nil {
		return nil, err
	}
	host := strings.Trim(target, "[]")
	if ip := net.ParseIP(host); ip == nil {
		tlsConfig.ServerName = host
	}
	return grpc.NewClient(net.JoinHostPort(host, strconv.Itoa(APIPort)), grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
}

// peerTLS is the client side of a forwarded call, its certificate issued once per OS CA.
func (n *Node) peerTLS() (*tls.Config, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg == nil {
		return nil, status.Error(codes.PermissionDenied, "no request forwarding")
	}
	ca := n.cfg.Machine().Security().IssuingCA()
	if ca == nil || len(ca.Key) == 0 {
		return nil, status.Error(codes.PermissionDenied, "no request forwarding")
	}
	if n.peerCert == nil || n.peerCA != string(ca.Crt) {
		pem, err := issue(ca, "apid", nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}, string(role.Impersonator))
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(pem.Crt, pem.Key)
		if err != nil {
			return nil, err
		}
		n.peerCert, n.peerCA = &cert, string(ca.Crt)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*n.peerCert}, RootCAs: n.clientCAs}, nil
}

// methodDescriptor finds a method of the Talos API by its full name.
func methodDescriptor(fullMethod string) (protoreflect.MethodDescriptor, error) {
	service, name, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if ok {
		if d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service)); err == nil {
			if s, ok := d.(protoreflect.ServiceDescriptor); ok {
				if m := s.Methods().ByName(protoreflect.Name(name)); m != nil {
					return m, nil
				}
			}
		}
	}
	return nil, status.Errorf(codes.Unimplemented, "unknown method %s", fullMethod)
}

// newMessage is a new message of the Go type registered for d.
func newMessage(d protoreflect.MessageDescriptor) proto.Message {
	t, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		panic(fmt.Sprintf("the Talos API type %s is not registered: %v", d.FullName(), err))
	}
	return t.New().Interface()
}

// messagesField is field 1 of a Talos API response: its repeated replies.
func messagesField(resp proto.Message) protoreflect.FieldDescriptor {
	return resp.ProtoReflect().Descriptor().Fields().ByNumber(1)
}

// stamp sets the node a reply (or streamed message) came from in its metadata, and the
// error when it failed, as apid's AppendInfo and BuildError do.
func stamp(msg protoreflect.Message, target string, err error) {
	fd := msg.Descriptor().Fields().ByName("metadata")
	if fd == nil || fd.Message() == nil || fd.Message().FullName() != "common.Metadata" {
		return
	}
	md, ok := msg.Mutable(fd).Message().Interface().(*common.Metadata)
	if !ok {
		return
	}
	md.Hostname = target
	if err != nil {
		md.Error = err.Error()
		md.Status = status.Convert(err).Proto()
	}
}
