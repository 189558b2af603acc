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

// Package etcdbackup writes etcd snapshots to an S3-compatible bucket and reads them back:
// streamed through a multipart upload (never held whole in memory), hashed on the way
// (SHA-256 of the snapshot itself), and optionally encrypted with age (a passphrase's scrypt
// recipient). An upload that fails is aborted, so a key either holds a complete snapshot or
// nothing. Errors from the store are turned into messages an operator can act on.
package etcdbackup
