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

package taloscontrolplane

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// installJobs are the Talos installers running for worker nodes, by Machine UID. Pulling and
// running an installer takes longer than Cluster API lets an UpdateMachine call take (30 s),
// so it runs beside the calls, and each call asks how it went. A manager that restarts
// meanwhile forgets its jobs; the next call starts the installer again (Talos refuses a
// second one while the first runs, and that refusal is retried like any failed step).
type installJobs struct {
	mu   sync.Mutex
	jobs map[types.UID]*installJob
}

// installJob is one installer run.
type installJob struct {
	installer string
	done      chan struct{}
	err       error
}

// poll reports whether the installer of the Machine uid has finished, and how: it starts
// install (in the background, outliving ctx's cancellation but not its values) when none
// runs, and forgets a finished job once it has reported it. A job of another installer (the
// spec changed meanwhile) is waited for, then replaced.
func (j *installJobs) poll(ctx context.Context, uid types.UID, installer string, install func(context.Context) error) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	job, ok := j.jobs[uid]
	if ok {
		select {
		case <-job.done:
		default:
			return false, nil
		}
		delete(j.jobs, uid)
		if job.installer == installer {
			return true, job.err
		}
	}
	if j.jobs == nil {
		j.jobs = map[types.UID]*installJob{}
	}
	job = &installJob{installer: installer, done: make(chan struct{})}
	j.jobs[uid] = job
	go func() {
		defer close(job.done)
		job.err = install(context.WithoutCancel(ctx))
	}()
	return false, nil
}
