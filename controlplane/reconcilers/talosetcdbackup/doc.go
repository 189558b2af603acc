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

// Package talosetcdbackup reconciles TalosEtcdBackups: each takes one snapshot of a
// cluster's etcd through the Talos API of a healthy member (a follower when there is one)
// and streams it to an S3-compatible bucket (controlplane/pkg/etcdbackup). The object's key
// is recorded in the backup's status before the upload starts; a backup that succeeded or
// failed is never taken again.
package talosetcdbackup
