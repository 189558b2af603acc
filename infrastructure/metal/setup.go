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

package metal

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"sigs.k8s.io/cluster-api/controllers/clustercache"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
)

// Settings configure the bare-metal provider in a manager.
type Settings struct {
	// AssetDir caches the boot assets the boot service serves.
	AssetDir string
	// BootTimeout: see DefaultBootTimeout.
	BootTimeout time.Duration
	// ResetTimeout: see DefaultResetTimeout.
	ResetTimeout time.Duration
	// BootService runs the DHCP, TFTP and HTTP boot service in the manager.
	BootService bool
	// Service configures the boot service.
	Service BootServiceOptions
	// RegisterNamespace: see Inventory.RegisterNamespace.
	RegisterNamespace string
	// BMC makes BMC clients; NewBMC when nil.
	BMC BMCFactory
	// TalosClients reach the nodes; talosclient.NewFactory() when nil.
	TalosClients talosclient.Factory
}

// Setup registers the MetalHost, TalosMetalCluster and TalosMetalMachine reconcilers with
// mgr, and the boot service when the settings enable it.
func Setup(ctx context.Context, mgr ctrl.Manager, options controller.Options, cache clustercache.ClusterCache, s Settings, watchFilter string) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.MetalHost{}, bootMACIndex, indexBootMACs); err != nil {
		return fmt.Errorf("failed to index MetalHosts by MAC address: %w", err)
	}
	events := mgr.GetEventRecorder("talon-infrastructure-manager")
	assets := &AssetCache{Dir: s.AssetDir}
	err := errors.Join(
		(&HostReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), BMC: s.BMC, Events: events, BootTimeout: s.BootTimeout}).SetupWithManager(ctx, mgr, options),
		(&ClusterReconciler{Client: mgr.GetClient(), WatchFilterValue: watchFilter}).SetupWithManager(ctx, mgr, options),
		(&MachineReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache, Assets: assets, BMC: s.BMC, TalosClients: s.TalosClients,
			BootTimeout: s.BootTimeout, ResetTimeout: s.ResetTimeout, WatchFilterValue: watchFilter,
		}).SetupWithManager(ctx, mgr, options),
	)
	if err != nil || !s.BootService {
		return err
	}
	inventory := &Inventory{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: events, RegisterNamespace: s.RegisterNamespace}
	return mgr.Add(&BootService{Options: s.Service, Inventory: inventory, AssetDir: s.AssetDir})
}
