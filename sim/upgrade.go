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
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
)

// This file is Talos 1.13's upgrade path as talosctl drives it: the installer image is
// pulled through the ImageService, LifecycleService.Upgrade runs the installer (which
// writes the new version to the system disk and does not reboot), and the client then
// reboots the node, which boots the new version.

// imageService is the node's containerd image API, as far as an upgrade needs it: a pulled
// image is recorded (nothing is downloaded) and kept until the node is wiped.
type imageService struct {
	machine.UnimplementedImageServiceServer
	node *Node
}

// Pull records an image as pulled and reports it as Talos does: the layers' progress, then
// the image's normalized name pinned to its digest (repository@sha256:...). The image can be
// used by either name.
// The simulator's digest is the SHA-256 of the reference: the same name always pins to the
// same digest.
func (s *imageService) Pull(req *machine.ImageServicePullRequest, stream grpc.ServerStreamingServer[machine.ImageServicePullResponse]) error {
	instance, err := containerdInstance(req.GetContainerd())
	if err != nil {
		return err
	}
	// containerd keeps an image under its normalized name (docker.io/library/ for short
	// names, :latest for untagged ones).
	named, err := reference.ParseDockerRef(req.GetImageRef())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "failed to parse image reference %q", req.GetImageRef())
	}
	ref := named.String()
	if err := stream.Send(&machine.ImageServicePullResponse{Response: &machine.ImageServicePullResponse_PullProgress{
		PullProgress: &machine.ImageServicePullProgress{
			LayerId:  "sha256:" + strings.Repeat("0", 64),
			Progress: &machine.ImageServicePullLayerProgress{Status: machine.ImageServicePullLayerProgress_DOWNLOAD_COMPLETE},
		},
	}}); err != nil {
		return err
	}
	pinned := ref
	if _, canonical := named.(reference.Canonical); !canonical {
		pinned = fmt.Sprintf("%s@sha256:%x", named.Name(), sha256.Sum256([]byte(ref)))
	}
	s.node.images.add(instance, ref, pinned)
	return stream.Send(&machine.ImageServicePullResponse{Response: &machine.ImageServicePullResponse_Name{Name: pinned}})
}

// ImagePull is the deprecated unary pull talosctl upgrade-k8s uses to pre-pull images: the
// image is recorded as pulled.
func (s *machineService) ImagePull(_ context.Context, req *machine.ImagePullRequest) (*machine.ImagePullResponse, error) {
	if ns := req.GetNamespace(); ns != common.ContainerdNamespace_NS_CRI && ns != common.ContainerdNamespace_NS_SYSTEM {
		return nil, status.Errorf(codes.InvalidArgument, "invalid namespace %s", ns)
	}
	ref := req.GetReference()
	if ref == "" || strings.ContainsAny(ref, " \t") {
		return nil, status.Errorf(codes.InvalidArgument, "failed to parse image reference %q", ref)
	}
	s.node.images.add(instanceKey(common.ContainerDriver_CRI, req.GetNamespace()), ref)
	return &machine.ImagePullResponse{Messages: []*machine.ImagePull{{}}}, nil
}

// containerdInstance is the key of the containerd instance (driver and namespace) a request
// names, or the error Talos answers for one it does not serve.
func containerdInstance(c *common.ContainerdInstance) (string, error) {
	switch c.GetDriver() {
	case common.ContainerDriver_CONTAINERD, common.ContainerDriver_CRI:
	default:
		return "", status.Errorf(codes.InvalidArgument, "invalid containerd driver %s", c.GetDriver())
	}
	switch c.GetNamespace() {
	case common.ContainerdNamespace_NS_CRI, common.ContainerdNamespace_NS_SYSTEM:
	default:
		return "", status.Errorf(codes.InvalidArgument, "invalid containerd namespace %s", c.GetNamespace())
	}
	if c.GetDriver() == common.ContainerDriver_CONTAINERD && c.GetNamespace() == common.ContainerdNamespace_NS_CRI {
		return "", status.Errorf(codes.InvalidArgument, "cannot use CRI namespace with containerd driver")
	}
	return instanceKey(c.GetDriver(), c.GetNamespace()), nil
}

func instanceKey(driver common.ContainerDriver, namespace common.ContainerdNamespace) string {
	return driver.String() + "/" + namespace.String()
}

// imageStore is what the node's containerd instances hold: per instance, the reference each
// image was pulled by, under every name it answers to.
type imageStore struct {
	mu     sync.Mutex
	images map[string]string
}

// add records the image pulled by ref into instance, under ref and the other names it
// answers to.
func (s *imageStore) add(instance, ref string, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.images == nil {
		s.images = map[string]string{}
	}
	for _, name := range append(names, ref) {
		s.images[instance+" "+name] = ref
	}
}

// reset forgets every image: the disk holding them was wiped.
func (s *imageStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images = nil
}

// lookup is the reference the image called name was pulled by into instance, if it was.
func (s *imageStore) lookup(instance, name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref, ok := s.images[instance+" "+name]
	return ref, ok
}

// lifecycleService is the node's LifecycleService: upgrades through the installer image.
type lifecycleService struct {
	machine.UnimplementedLifecycleServiceServer
	node *Node
	// lock allows one installation or upgrade at a time, as machined's.
	lock sync.Mutex
}

// Upgrade runs the installer of a pulled image, as machined does: it refuses in container
// mode, without an image or while another upgrade runs; it streams the installer's output
// and its exit code, and leaves the reboot to the client. The node boots the image's
// version at its next boot.
func (s *lifecycleService) Upgrade(req *machine.LifecycleServiceUpgradeRequest, stream grpc.ServerStreamingServer[machine.LifecycleServiceUpgradeResponse]) error {
	if !s.lock.TryLock() {
		return status.Error(codes.FailedPrecondition, "another installation/upgrade is already in progress")
	}
	defer s.lock.Unlock()
	if s.node.opts.Mode == configgen.ModeContainer {
		return status.Error(codes.FailedPrecondition, "upgrade is not supported in container mode")
	}
	image := req.GetSource().GetImageName()
	if image == "" {
		return status.Error(codes.InvalidArgument, "installer image name is required")
	}
	// The installer runs from the containerd instance the request names, where it must
	// have been pulled; Talos reports either failure as the upgrade's.
	instance, err := containerdInstance(req.GetContainerd())
	if err != nil {
		return status.Error(codes.Internal, "upgrade failed: "+err.Error())
	}
	pulled, ok := s.node.images.lookup(instance, image)
	if !ok {
		return status.Errorf(codes.Internal, "upgrade failed: installer image %q not found in containerd store: image %q: not found", image, image)
	}
	message := func(msg string) error {
		return stream.Send(&machine.LifecycleServiceUpgradeResponse{Progress: &machine.LifecycleServiceInstallProgress{
			Response: &machine.LifecycleServiceInstallProgress_Message{Message: msg},
		}})
	}
	exit := func(code int32) error {
		return stream.Send(&machine.LifecycleServiceUpgradeResponse{Progress: &machine.LifecycleServiceInstallProgress{
			Response: &machine.LifecycleServiceInstallProgress_ExitCode{ExitCode: code},
		}})
	}
	version := imageTag(pulled)
	if err := message(fmt.Sprintf("running installer %s on /dev/sda", image)); err != nil {
		return err
	}
	if !strings.HasPrefix(version, "v") {
		if err := message(fmt.Sprintf("error: installer image %q has no version tag", image)); err != nil {
			return err
		}
		return exit(1)
	}
	if err := s.node.install(version); err != nil {
		if err := message("error: " + err.Error()); err != nil {
			return err
		}
		return exit(1)
	}
	for _, line := range []string{
		"installing Talos " + version + " to the inactive boot entry",
		"upgrade of /dev/sda complete: reboot to boot Talos " + version,
	} {
		if err := message(line); err != nil {
			return err
		}
	}
	s.node.opts.Log.Info("Installed for the next boot", "version", version)
	return exit(0)
}
