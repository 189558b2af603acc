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
	"fmt"
	"sync"
	"time"

	"github.com/rs/xid"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// maxEvents is how many events a node keeps for Events' tail options.
const maxEvents = 1000

// eventLog is the node's runtime event stream, as machined's: every event has an xid and
// the ID of the actor (an API request) it belongs to, a boot starts a new log, and watchers
// get the tail they ask for and then every new event.
type eventLog struct {
	mu     sync.Mutex
	events []loggedEvent
	// wake is closed and replaced on every new event.
	wake chan struct{}
}

type loggedEvent struct {
	at    time.Time
	event *machine.Event
}

// publish records an event with payload for the actor (empty for the node's own).
func (l *eventLog) publish(payload proto.Message, actorID string) {
	event, err := newEvent(payload, actorID)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, loggedEvent{at: time.Now(), event: event})
	if extra := len(l.events) - maxEvents; extra > 0 {
		l.events = l.events[extra:]
	}
	if l.wake != nil {
		close(l.wake)
	}
	l.wake = make(chan struct{})
}

// newEvent is an event as machined sends it: the payload as an Any whose type URL is
// talos/runtime/<message name>, and none for the hello event.
func newEvent(payload proto.Message, actorID string) (*machine.Event, error) {
	data := &anypb.Any{}
	if payload != nil {
		value, err := proto.Marshal(payload)
		if err != nil {
			return nil, err
		}
		data = &anypb.Any{TypeUrl: fmt.Sprintf("talos/runtime/%s", payload.ProtoReflect().Descriptor().FullName()), Value: value}
	}
	return &machine.Event{Data: data, Id: xid.New().String(), ActorId: actorID}, nil
}

// watch sends the tail req asks for (the last n events, all with -1, those of the last
// seconds, those after an ID), then every new event until ctx ends; with_actor_id keeps an
// actor's events only.
func (l *eventLog) watch(ctx context.Context, req *machine.EventsRequest, send func(*machine.Event) error) error {
	l.mu.Lock()
	start := len(l.events)
	switch {
	case req.GetTailId() != "":
		id, err := xid.FromString(req.GetTailId())
		if err != nil {
			l.mu.Unlock()
			return status.Errorf(codes.Unknown, "error parsing tail_id: %v", err)
		}
		for i, e := range l.events {
			if e.event.GetId() == id.String() {
				start = i + 1
			}
		}
	case req.GetTailEvents() < 0:
		start = 0
	case req.GetTailEvents() > 0:
		start = max(0, len(l.events)-int(req.GetTailEvents()))
	}
	if seconds := req.GetTailSeconds(); seconds > 0 {
		since := time.Now().Add(-time.Duration(seconds) * time.Second)
		for start > 0 && l.events[start-1].at.After(since) {
			start--
		}
	}
	l.mu.Unlock()
	for {
		l.mu.Lock()
		pending := append([]loggedEvent(nil), l.events[min(start, len(l.events)):]...)
		start = len(l.events)
		if l.wake == nil {
			l.wake = make(chan struct{})
		}
		wake := l.wake
		l.mu.Unlock()
		for _, e := range pending {
			if actor := req.GetWithActorId(); actor != "" && e.event.GetActorId() != actor {
				continue
			}
			if err := send(e.event); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// Events streams the node's runtime events: first an empty hello event, as machined sends
// to show the stream has started, then the tail asked for and every new event.
func (s *machineService) Events(req *machine.EventsRequest, stream grpc.ServerStreamingServer[machine.Event]) error {
	hello, err := newEvent(nil, req.GetWithActorId())
	if err != nil {
		return err
	}
	if err := stream.Send(hello); err != nil {
		return err
	}
	return s.node.events().watch(stream.Context(), req, stream.Send)
}

// events is the event log of the node's current boot.
func (n *Node) events() *eventLog {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.eventLog == nil {
		n.eventLog = &eventLog{}
	}
	return n.eventLog
}

// newBootEvents starts the event log of a new boot.
func (n *Node) newBootEvents() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.eventLog = &eventLog{}
}

// sequence publishes the start of one of machined's sequences (boot, reboot, shutdown,
// reset, upgrade) for actor.
func (n *Node) sequence(name, actorID string) {
	n.events().publish(&machine.SequenceEvent{Sequence: name, Action: machine.SequenceEvent_START}, actorID)
}

// stopAllServicesEvents publishes the task that stops every service before a reboot, a
// shutdown or a reset, which talosctl waits for.
func (n *Node) stopAllServicesEvents(actorID string, action machine.TaskEvent_Action) {
	n.events().publish(&machine.TaskEvent{Task: "stopAllServices", Action: action}, actorID)
}

// machineStatusEvent publishes the machine's stage and readiness, as machined does on every
// change of its MachineStatus.
func (n *Node) machineStatusEvent(stage runtime.MachineStage, ready bool, unmet []runtime.UnmetCondition) {
	event := &machine.MachineStatusEvent{
		Stage:  machine.MachineStatusEvent_MachineStage(stage),
		Status: &machine.MachineStatusEvent_MachineStatus{Ready: ready},
	}
	for _, c := range unmet {
		event.Status.UnmetConditions = append(event.Status.UnmetConditions,
			&machine.MachineStatusEvent_MachineStatus_UnmetCondition{Name: c.Name, Reason: c.Reason})
	}
	n.events().publish(event, "")
}

// serviceStateActions are the ServiceStateEvent actions of the states the simulator's
// services go through.
var serviceStateActions = map[string]machine.ServiceStateEvent_Action{
	serviceWaiting:   machine.ServiceStateEvent_WAITING,
	servicePreparing: machine.ServiceStateEvent_PREPARING,
	serviceRunning:   machine.ServiceStateEvent_RUNNING,
	serviceFinished:  machine.ServiceStateEvent_FINISHED,
	serviceFailed:    machine.ServiceStateEvent_FAILED,
}

// serviceStateEvent publishes a service's latest event.
func (n *Node) serviceStateEvent(info *machine.ServiceInfo) {
	events := info.GetEvents().GetEvents()
	if len(events) == 0 {
		return
	}
	last := events[len(events)-1]
	n.events().publish(&machine.ServiceStateEvent{
		Service: info.GetId(), Action: serviceStateActions[last.GetState()], Message: last.GetMsg(), Health: info.GetHealth(),
	}, "")
}
