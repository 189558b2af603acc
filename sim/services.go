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
	"slices"
	"strings"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxServiceEvents is how many events a service keeps, as machined keeps (MaxEventsToKeep).
const maxServiceEvents = 64

// Talos' service states (machined's events.ServiceState) the simulator goes through.
const (
	serviceStarting  = "Starting"
	serviceWaiting   = "Waiting"
	servicePreparing = "Preparing"
	serviceRunning   = "Running"
	serviceFinished  = "Finished"
	serviceFailed    = "Failed"
)

// serviceLog is what ServiceList reports: each service's state, its latest events and its
// health, as machined's service runners keep them. A boot starts a new log.
type serviceLog struct {
	mu       sync.Mutex
	services map[string]*machine.ServiceInfo
	// notify, when set, is told of each change of a service, in order (changed).
	notify   func(*machine.ServiceInfo)
	pending  []*machine.ServiceInfo
	draining bool
}

// event records that service id went to state, with message.
func (l *serviceLog) event(id, state, message string) {
	l.mu.Lock()
	defer l.changed(id)
	defer l.mu.Unlock()
	l.eventLocked(id, state, message)
}

// changed queues the service's state after a change for notify, which runs in order, in
// the background: callers may hold the node's lock, which notify takes.
func (l *serviceLog) changed(id string) {
	if l.notify == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.services[id]
	if !ok {
		return
	}
	l.pending = append(l.pending, proto.CloneOf(s))
	if !l.draining {
		l.draining = true
		go l.drain()
	}
}

// drain tells notify of the queued changes until there are none.
func (l *serviceLog) drain() {
	for {
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.draining = false
			l.mu.Unlock()
			return
		}
		s := l.pending[0]
		l.pending = l.pending[1:]
		l.mu.Unlock()
		l.notify(s)
	}
}

func (l *serviceLog) eventLocked(id, state, message string) {
	if l.services == nil {
		l.services = map[string]*machine.ServiceInfo{}
	}
	s, ok := l.services[id]
	if !ok {
		s = &machine.ServiceInfo{Id: id, Events: &machine.ServiceEvents{}, Health: &machine.ServiceHealth{Unknown: true}}
		l.services[id] = s
	}
	s.State = state
	s.Events.Events = append(s.Events.Events, &machine.ServiceEvent{Msg: message, State: state, Ts: timestamppb.Now()})
	if extra := len(s.Events.Events) - maxServiceEvents; extra > 0 {
		s.Events.Events = s.Events.Events[extra:]
	}
}

// running records a service's start, as machined's runner reports it (pre state, runner,
// the task started), and its first successful health check.
func (l *serviceLog) running(id string) {
	l.mu.Lock()
	defer l.changed(id)
	defer l.mu.Unlock()
	if events := l.services[id].GetEvents().GetEvents(); len(events) == 0 || events[len(events)-1].GetMsg() != "Running pre state" {
		l.eventLocked(id, servicePreparing, "Running pre state")
	}
	l.eventLocked(id, servicePreparing, "Creating service runner")
	l.eventLocked(id, serviceRunning, "Started task "+id+" for container "+id)
	l.eventLocked(id, serviceRunning, "Health check successful")
	l.services[id].Health = &machine.ServiceHealth{Healthy: true, LastChange: timestamppb.Now()}
}

// restart replaces a service with a new instance, as machined reloads one (etcd in bootstrap
// mode): its events start afresh, with its start.
func (l *serviceLog) restart(id string) {
	l.mu.Lock()
	defer l.changed(id)
	defer l.mu.Unlock()
	delete(l.services, id)
	l.eventLocked(id, serviceStarting, "Starting service")
}

// stopped records a service that ended: Finished when it was stopped, Failed with why.
func (l *serviceLog) stopped(id, state, message string) {
	l.mu.Lock()
	defer l.changed(id)
	defer l.mu.Unlock()
	if _, ok := l.services[id]; !ok {
		return
	}
	l.eventLocked(id, state, message)
	l.services[id].Health = &machine.ServiceHealth{Unknown: true}
}

// list is every service, by ID.
func (l *serviceLog) list() []*machine.ServiceInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*machine.ServiceInfo, 0, len(l.services))
	for _, s := range l.services {
		out = append(out, proto.CloneOf(s))
	}
	slices.SortFunc(out, func(a, b *machine.ServiceInfo) int { return strings.Compare(a.Id, b.Id) })
	return out
}

// reset forgets every service: the node is off.
func (l *serviceLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.services = nil
}
