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

package talosconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capicontrollerutil "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/internal/imagefactory"
	"github.com/talon-capi/talon/internal/record"
)

// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=talosconfigs;talosconfigs/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status;machines;machines/status;machinepools;machinepools/status,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch

// Reconciler renders the machine config of each TalosConfig into its bootstrap data Secret.
type Reconciler struct {
	// Client reads Secrets from the API server (not a cache), so that every reconcile sees
	// the cluster's secrets bundle as soon as it exists.
	Client client.Client

	// WatchFilterValue limits reconciliation to objects labelled with it.
	WatchFilterValue string

	// Namespace is the one namespace the manager watches; empty means all.
	Namespace string

	// ImageFactory resolves the schematics of nodes that install Talos.
	ImageFactory *imagefactory.Client

	// Events records the configs written and refused; optional.
	Events events.EventRecorder

	// bundleLocks holds a mutex per Cluster, so that concurrent first reconciles of one
	// cluster's TalosConfigs create its bundle once instead of each generating one and all
	// but one losing the create. Across replicas the API server's create still decides.
	bundleLocks sync.Map
}

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return errors.New("talosconfig reconciler needs a Client")
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "talosconfig")
	if err := mgr.GetFieldIndexer().IndexField(ctx, &bootstrapv1.TalosConfig{}, staticKeySecretIndex, indexStaticKeySecret); err != nil {
		return fmt.Errorf("failed to index TalosConfigs by their disk encryption key's Secret: %w", err)
	}
	keySecrets, err := secretMetadataCache(mgr, r.Namespace)
	if err != nil {
		return err
	}
	err = capicontrollerutil.NewControllerManagedBy(mgr, log).
		For(&bootstrapv1.TalosConfig{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(machineToTalosConfig)).
		Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(machinePoolToTalosConfig)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToPendingTalosConfigs),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		WatchesRawSource(source.Kind(keySecrets, secretMetadata(),
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, s *metav1.PartialObjectMetadata) []ctrl.Request {
				return r.secretToKeyWaitingTalosConfigs(ctx, s)
			}))).
		Complete(ctx, r)
	if err != nil {
		return fmt.Errorf("failed to set up the talosconfig controller: %w", err)
	}
	return nil
}

// Reconcile renders one TalosConfig.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	config := &bootstrapv1.TalosConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, config); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !config.DeletionTimestamp.IsZero() {
		// The data Secret is owned by the TalosConfig and goes with it.
		return ctrl.Result{}, nil
	}

	patchHelper, err := patch.NewHelper(config, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		summarize(config)
		if err := patchHelper.Patch(ctx, config, patch.WithOwnedConditions{Conditions: []string{
			bootstrapv1.TalosConfigReadyCondition,
			bootstrapv1.TalosConfigDataSecretAvailableCondition,
			bootstrapv1.TalosConfigPausedCondition,
		}}); err != nil {
			reterr = errors.Join(reterr, fmt.Errorf("failed to patch TalosConfig %s: %w", klog.KObj(config), err))
		}
	}()

	owner, err := getConfigOwner(ctx, r.Client, config)
	if err != nil {
		return ctrl.Result{}, err
	}
	if owner == nil {
		log.V(4).Info("Waiting for a Machine or MachinePool to own the TalosConfig")
		setWaiting(config, bootstrapv1.WaitingForOwnerReason, "Waiting for a Machine or MachinePool to own this TalosConfig")
		return ctrl.Result{}, nil
	}
	log = log.WithValues(owner.kind, klog.KRef(config.Namespace, owner.name))

	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: config.Namespace, Name: owner.clusterName}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("Waiting for the Cluster", "Cluster", owner.clusterName)
			setWaiting(config, bootstrapv1.WaitingForClusterReason, fmt.Sprintf("Waiting for Cluster %s", owner.clusterName))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	log = log.WithValues("Cluster", klog.KObj(cluster))
	ctx = ctrl.LoggerInto(ctx, log)

	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, config); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, config, owner, cluster)
}

// bundleRecheckInterval is how often a TalosConfig whose cluster lost its bundle looks
// for it again: restoring the Secret from a backup is a manual step.
const bundleRecheckInterval = time.Minute

// reconcileNormal writes the data Secret once the cluster is ready for it.
func (r *Reconciler) reconcileNormal(ctx context.Context, config *bootstrapv1.TalosConfig, owner *configOwner, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	secretName := DataSecretName(config.Name)

	// The Secret is the truth: status does not survive "clusterctl move", the Secret does.
	existing := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: config.Namespace, Name: secretName}, existing)
	switch {
	case err == nil:
		if owner := metav1.GetControllerOf(existing); owner == nil || owner.UID != config.UID {
			// A Secret of an earlier TalosConfig of the same name, not yet garbage collected.
			setFalse(config, bootstrapv1.InternalErrorReason, fmt.Sprintf(
				"Secret %s belongs to another TalosConfig; waiting for it to be deleted", secretName))
			return ctrl.Result{}, fmt.Errorf("data Secret %s is not controlled by TalosConfig %s", secretName, klog.KObj(config))
		}
		if version, again := renderedAgain(config, existing); again {
			return r.renderAgain(ctx, config, owner, cluster, existing, version)
		}
		setDataSecretCreated(config, secretName)
		config.Status.ImageFactory = imageFactoryFromSecret(existing)
		return ctrl.Result{}, nil
	case !apierrors.IsNotFound(err):
		setInternalError(config, err)
		return ctrl.Result{}, fmt.Errorf("failed to get data Secret %s: %w", secretName, err)
	}
	if adopted, err := r.adoptedDataSecret(ctx, config, owner); err != nil || adopted != nil {
		if err != nil {
			setInternalError(config, err)
			return ctrl.Result{}, err
		}
		if version, again := renderedAgain(config, adopted); again {
			return r.renderAgain(ctx, config, owner, cluster, adopted, version)
		}
		setDataSecretCreated(config, adopted.Name)
		return ctrl.Result{}, nil
	}

	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setWaiting(config, bootstrapv1.WaitingForInfrastructureReason,
			fmt.Sprintf("Waiting for the infrastructure of Cluster %s to be provisioned", cluster.Name))
		return ctrl.Result{}, nil
	}
	if !cluster.Spec.ControlPlaneEndpoint.IsValid() {
		setWaiting(config, bootstrapv1.WaitingForControlPlaneEndpointReason,
			fmt.Sprintf("Waiting for Cluster %s to get a control-plane endpoint", cluster.Name))
		return ctrl.Result{}, nil
	}

	data, factory, result, err := r.render(ctx, config, owner, cluster, owner.version)
	if data == nil {
		return result, err
	}
	if err := r.createDataSecret(ctx, config, cluster, secretName, data, factory, owner.version); err != nil {
		setInternalError(config, err)
		return ctrl.Result{}, err
	}
	log.Info("Wrote the machine config", "Secret", klog.KRef(config.Namespace, secretName))
	record.Event(r.Events, config, corev1.EventTypeNormal, "ConfigWritten", "Render", "Wrote the machine config for Kubernetes %s to Secret %s", owner.version, secretName)
	setDataSecretCreated(config, secretName)
	config.Status.ImageFactory = factory
	return ctrl.Result{}, nil
}

// adoptedDataSecret is the data Secret Sidero Labs' CABPT wrote for this TalosConfig
// before Talon took it over (named after the owning Machine), or nil when there is none.
// The node was made from that Secret: it is kept as it is, and rendered again only for an
// in-place update of its node.
func (r *Reconciler) adoptedDataSecret(ctx context.Context, config *bootstrapv1.TalosConfig, owner *configOwner) (*corev1.Secret, error) {
	name := owner.name + "-bootstrap-data"
	existing := &corev1.Secret{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: config.Namespace, Name: name}, existing); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get data Secret %s: %w", name, err)
	}
	if owner := metav1.GetControllerOf(existing); owner == nil || owner.UID != config.UID {
		return nil, nil
	}
	return existing, nil
}

// renderedAgain says whether the owner of config updates its node in place and secret does
// not hold the config of the spec and Kubernetes version it asks for, and that version.
func renderedAgain(config *bootstrapv1.TalosConfig, secret *corev1.Secret) (string, bool) {
	version, inPlace := config.Annotations[bootstrapv1.InPlaceUpdateAnnotation]
	return version, inPlace && secret.Annotations[bootstrapv1.RenderedForAnnotation] != configgen.RenderedFor(config.Spec, version)
}

// DataSecretName is the deterministic name of a TalosConfig's bootstrap data Secret.
func DataSecretName(configName string) string {
	return configName + "-bootstrap-data"
}

func (r *Reconciler) createDataSecret(ctx context.Context, config *bootstrapv1.TalosConfig, cluster *clusterv1.Cluster, name string, data []byte,
	factory bootstrapv1.ImageFactoryStatus, version string) error {
	annotations := imageFactoryAnnotations(factory)
	annotations[bootstrapv1.RenderedForAnnotation] = configgen.RenderedFor(config.Spec, version)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   config.Namespace,
			Annotations: annotations,
			Labels:      map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: bootstrapv1.GroupVersion.String(),
				Kind:       "TalosConfig",
				Name:       config.Name,
				UID:        config.UID,
				Controller: ptr.To(true),
			}},
		},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"value": data, "format": []byte("talos")},
	}
	if err := r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create data Secret %s: %w", name, err)
	}
	return nil
}

// render renders config's machine config for Kubernetes version, from the cluster's secrets
// bundle (created with the first config, never again). When it cannot, it returns no data,
// with the condition set and what to return.
func (r *Reconciler) render(ctx context.Context, config *bootstrapv1.TalosConfig, owner *configOwner, cluster *clusterv1.Cluster,
	version string) ([]byte, bootstrapv1.ImageFactoryStatus, ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	none := bootstrapv1.ImageFactoryStatus{}
	lock, _ := r.bundleLocks.LoadOrStore(client.ObjectKeyFromObject(cluster), &sync.Mutex{})
	lock.(*sync.Mutex).Lock()
	bundle, err := clustersecrets.Ensure(ctx, r.Client, cluster, config.Spec.TalosVersion)
	lock.(*sync.Mutex).Unlock()
	if err != nil {
		if errors.Is(err, clustersecrets.ErrBundleMissing) {
			setFalse(config, bootstrapv1.SecretsBundleUnavailableReason, err.Error())
			log.Error(err, "Refusing to create a second secrets bundle")
			return nil, none, ctrl.Result{RequeueAfter: bundleRecheckInterval}, nil
		}
		setInternalError(config, err)
		return nil, none, ctrl.Result{}, err
	}

	input := machineInput(config, owner)
	if input.StaticKey, err = r.staticKey(ctx, config); err != nil {
		var unavailable errKeyUnavailable
		if errors.As(err, &unavailable) {
			setFalse(config, bootstrapv1.DiskEncryptionKeyUnavailableReason, unavailable.message)
			log.Info("Waiting for the disk encryption key", "reason", unavailable.message)
			return nil, none, ctrl.Result{}, nil
		}
		setInternalError(config, err)
		return nil, none, ctrl.Result{}, err
	}
	factory, err := r.resolveImageFactory(ctx, config.Spec, input.Mode)
	if err != nil {
		return nil, none, imageFactoryFailed(ctx, config, err), nil
	}
	input.Installer = factory.Installer
	start := time.Now()
	data, err := configgen.Render(bundle, configgen.ClusterFrom(cluster, version), input)
	renderDuration.WithLabelValues(map[bool]string{true: "rendered", false: "invalid"}[err == nil]).Observe(time.Since(start).Seconds())
	if err != nil {
		// The spec or the Cluster must change before this can succeed; both changes trigger
		// a reconcile, so there is nothing to retry.
		setFalse(config, bootstrapv1.InvalidConfigReason, err.Error())
		log.Info("The TalosConfig does not render to a valid machine config", "reason", err.Error())
		record.Event(r.Events, config, corev1.EventTypeWarning, bootstrapv1.InvalidConfigReason, "Render", "The config does not render to a valid machine config: %v", err)
		return nil, none, ctrl.Result{}, nil
	}
	return data, factory, ctrl.Result{}, nil
}

// renderAgain rewrites the data Secret of a TalosConfig whose owner updates its node in
// place, for the spec and Kubernetes version it asks for now. The node is not touched: the
// owner applies the new config itself.
func (r *Reconciler) renderAgain(ctx context.Context, config *bootstrapv1.TalosConfig, owner *configOwner, cluster *clusterv1.Cluster,
	secret *corev1.Secret, version string) (ctrl.Result, error) {
	data, factory, result, err := r.render(ctx, config, owner, cluster, version)
	if data == nil {
		return result, err
	}
	before := secret.DeepCopy()
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	// The new spec may have dropped its schematic: no installer of the old one stays.
	for _, key := range []string{bootstrapv1.ImageFactorySchematicAnnotation, bootstrapv1.ImageFactoryInstallerAnnotation,
		bootstrapv1.ImageFactoryVersionAnnotation, bootstrapv1.ImageFactoryURLAnnotation} {
		delete(secret.Annotations, key)
	}
	maps.Copy(secret.Annotations, imageFactoryAnnotations(factory))
	secret.Annotations[bootstrapv1.RenderedForAnnotation] = configgen.RenderedFor(config.Spec, version)
	secret.Data["value"] = data
	if err := r.Client.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		setInternalError(config, err)
		return ctrl.Result{}, fmt.Errorf("failed to rewrite data Secret %s: %w", secret.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Rewrote the machine config for an in-place update", "Secret", klog.KObj(secret), "version", version)
	record.Event(r.Events, config, corev1.EventTypeNormal, "ConfigRewritten", "Render", "Rewrote the machine config in Secret %s for an in-place update to Kubernetes %s", secret.Name, version)
	setDataSecretCreated(config, secret.Name)
	config.Status.ImageFactory = factory
	return ctrl.Result{}, nil
}
