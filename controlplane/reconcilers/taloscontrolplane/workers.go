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
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	bootstrapv1 "github.com/talon-capi/talon/api/bootstrap/v1beta1"
	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/bootstrap/pkg/clustersecrets"
	"github.com/talon-capi/talon/bootstrap/pkg/configgen"
	"github.com/talon-capi/talon/controlplane/pkg/controlplane"
	"github.com/talon-capi/talon/controlplane/pkg/talosclient"
	"github.com/talon-capi/talon/internal/record"
)

// Worker Machines are updated in place through Cluster API's in-place update protocol
// (feature gates InPlaceUpdates and RuntimeSDK of the core manager): a MachineDeployment
// rollout asks CanUpdateMachineSet whether the change can be made on the running nodes,
// moves each old Machine to the new MachineSet (giving its TalosConfig the new spec and the
// Machine the new version), then calls UpdateMachine until the node runs them. The
// control-plane manager answers, as it reaches every node of a cluster over the Talos API.
// A worker's update takes the control plane's steps without the control-plane ones: Render,
// Drain (before a reboot or an upgrade), Apply (a new Talos installer first, then the
// config), Reboot and Verify, each recorded on the Machine before it is taken.

// workerRetry is how soon Cluster API calls UpdateMachine again while a node is updated.
const workerRetry = 2

// workerRetryStopped is how soon it calls again after a step failed.
const workerRetryStopped = 15

// CanUpdateMachineSet answers Cluster API's CanUpdateMachineSet hook: a new Kubernetes
// version and a new TalosConfigTemplate spec (config patches, a Talos release or schematic)
// can be made in place; a new infrastructure template spec cannot (the MachineSet's
// Machines are replaced). It answers with the patches that take the current objects to the
// desired ones where it can.
func (r *Reconciler) CanUpdateMachineSet(ctx context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	current, desired := req.Current, req.Desired
	why := inPlaceRefusal(current.InfrastructureMachineTemplate, desired.InfrastructureMachineTemplate, current.BootstrapConfigTemplate, desired.BootstrapConfigTemplate,
		"spec", "template", "spec")
	if why != "" {
		ctrl.LoggerFrom(ctx).V(2).Info("Workers are replaced, not updated in place", "MachineSet", klog.KObj(&desired.MachineSet), "reason", why)
		resp.SetMessage(why)
		return
	}
	var err error
	resp.MachineSetPatch, err = jsonPatch("/spec/template/spec/version", desired.MachineSet.Spec.Template.Spec.Version)
	if err == nil {
		resp.BootstrapConfigTemplatePatch, err = rawPatch(desired.BootstrapConfigTemplate, "/spec/template/spec", "spec", "template", "spec")
	}
	if err != nil {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
	}
}

// CanUpdateMachine answers Cluster API's CanUpdateMachine hook, for a Machine (its version
// and TalosConfig spec can change in place, its infrastructure cannot), as
// CanUpdateMachineSet does for a MachineSet.
func (r *Reconciler) CanUpdateMachine(ctx context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	current, desired := req.Current, req.Desired
	why := inPlaceRefusal(current.InfrastructureMachine, desired.InfrastructureMachine, current.BootstrapConfig, desired.BootstrapConfig, "spec")
	if why != "" {
		ctrl.LoggerFrom(ctx).V(2).Info("The Machine is replaced, not updated in place", "Machine", klog.KObj(&desired.Machine), "reason", why)
		resp.SetMessage(why)
		return
	}
	var err error
	resp.MachinePatch, err = jsonPatch("/spec/version", desired.Machine.Spec.Version)
	if err == nil {
		resp.BootstrapConfigPatch, err = rawPatch(desired.BootstrapConfig, "/spec", "spec")
	}
	if err != nil {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
	}
}

// inPlaceRefusal says why a change cannot be made in place, or "": the bootstrap object
// must be Talon's and rendered by Talon, and the infrastructure spec must stay as it is
// (both specs at path). A new Talos release or schematic (imageFactory) is installed on the
// running node; a container node has no installer and keeps its image's Talos.
func inPlaceRefusal(currentInfra, desiredInfra, currentBootstrap, desiredBootstrap runtime.RawExtension, path ...string) string {
	for _, raw := range []runtime.RawExtension{currentBootstrap, desiredBootstrap} {
		obj, err := unstructuredOf(raw)
		if err != nil {
			return err.Error()
		}
		if gvk := obj.GroupVersionKind(); gvk.Group != bootstrapv1.GroupVersion.Group || (gvk.Kind != "TalosConfig" && gvk.Kind != "TalosConfigTemplate") {
			return fmt.Sprintf("the bootstrap config is a %s, not Talon's", obj.GroupVersionKind())
		}
	}
	currentConfig, err := specAt(currentBootstrap, path...)
	if err != nil {
		return err.Error()
	}
	desiredConfig, err := specAt(desiredBootstrap, path...)
	if err != nil {
		return err.Error()
	}
	for _, config := range []any{currentConfig, desiredConfig} {
		if spec, _ := config.(map[string]any); spec["generateType"] == string(bootstrapv1.GenerateTypeNone) {
			return "the TalosConfig is the user's own (generateType none): Talon does not render it again"
		}
	}
	currentSpec, err := specAt(currentInfra, path...)
	if err != nil {
		return err.Error()
	}
	desiredSpec, err := specAt(desiredInfra, path...)
	if err != nil {
		return err.Error()
	}
	if !equality.Semantic.DeepEqual(currentSpec, desiredSpec) {
		return "the infrastructure spec changes: the Machines are replaced"
	}
	return ""
}

// unstructuredOf decodes a hook request's object.
func unstructuredOf(raw runtime.RawExtension) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if len(raw.Raw) == 0 {
		return obj, nil
	}
	if err := json.Unmarshal(raw.Raw, &obj.Object); err != nil {
		return nil, fmt.Errorf("the request holds an object that does not decode: %w", err)
	}
	return obj, nil
}

// specAt is the field at path of a hook request's object, or nil.
func specAt(raw runtime.RawExtension, path ...string) (any, error) {
	obj, err := unstructuredOf(raw)
	if err != nil {
		return nil, err
	}
	value, _, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	return value, err
}

// rawPatch is a JSON patch setting pointer to the field at path of the desired object.
func rawPatch(desired runtime.RawExtension, pointer string, path ...string) (runtimehooksv1.Patch, error) {
	value, err := specAt(desired, path...)
	if err != nil {
		return runtimehooksv1.Patch{}, err
	}
	return jsonPatch(pointer, value)
}

// jsonPatch is a JSON patch that sets the field at pointer to value.
func jsonPatch(pointer string, value any) (runtimehooksv1.Patch, error) {
	data, err := json.Marshal([]map[string]any{{"op": "add", "path": pointer, "value": value}})
	if err != nil {
		return runtimehooksv1.Patch{}, err
	}
	return runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONPatchType, Patch: data}, nil
}

// workerUpdate is what UpdateMachine reads for one call: the Machine, its TalosConfig and
// data Secret, and the cluster's secrets bundle.
type workerUpdate struct {
	machine *clusterv1.Machine
	config  *bootstrapv1.TalosConfig
	secret  *corev1.Secret
	cluster *clusterv1.Cluster
}

// UpdateMachine answers Cluster API's UpdateMachine hook: it takes the worker's node one
// step further towards the desired Machine and TalosConfig, and asks to be called again
// until the node runs them. A step that fails is reported in the answer's message, naming
// the node and the step (Cluster API shows it in the Machine's Updating condition), and is
// tried again; Failure is kept for what another call cannot fix (Cluster API then logs the
// message and calls again with a back-off).
func (r *Reconciler) UpdateMachine(ctx context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
	desired := &req.Desired.Machine
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(desired))
	ctx = ctrl.LoggerInto(ctx, log)
	u, err := r.readWorker(ctx, desired)
	if err == nil {
		var message string
		var retry int32
		message, retry, err = r.workerStep(ctx, u, desired.Spec.Version)
		if err == nil {
			resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
			resp.SetMessage(message)
			resp.SetRetryAfterSeconds(retry)
			return
		}
	}
	if apierrors.IsConflict(err) {
		// Cluster API wrote the Machine meanwhile: the step is taken at the next call.
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		resp.SetMessage("The Machine changed meanwhile; trying again")
		resp.SetRetryAfterSeconds(1)
		return
	}
	log.Info("In-place update of a worker stopped", "reason", err.Error())
	resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
	resp.SetMessage(err.Error())
}

// readWorker reads what an UpdateMachine call works on.
func (r *Reconciler) readWorker(ctx context.Context, desired *clusterv1.Machine) (*workerUpdate, error) {
	u := &workerUpdate{machine: &clusterv1.Machine{}, config: &bootstrapv1.TalosConfig{}, secret: &corev1.Secret{}, cluster: &clusterv1.Cluster{}}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), u.machine); err != nil {
		return nil, fmt.Errorf("failed to read Machine %s: %w", desired.Name, err)
	}
	m := u.machine
	if m.Spec.Bootstrap.ConfigRef.Kind != "TalosConfig" || m.Spec.Bootstrap.DataSecretName == nil {
		return nil, fmt.Errorf("machine %s has no TalosConfig with a data Secret: Talon updates only nodes it configures", m.Name)
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, u.config); err != nil {
		return nil, fmt.Errorf("failed to read TalosConfig %s: %w", m.Spec.Bootstrap.ConfigRef.Name, err)
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: *m.Spec.Bootstrap.DataSecretName}, u.secret); err != nil {
		return nil, fmt.Errorf("failed to read the data Secret of Machine %s: %w", m.Name, err)
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, u.cluster); err != nil {
		return nil, fmt.Errorf("failed to read Cluster %s: %w", m.Spec.ClusterName, err)
	}
	return u, nil
}

// workerStep takes the node of u's Machine to its next step towards Kubernetes version and
// its TalosConfig's spec. It says what the node waits for and when to call again, with 0
// once the node runs them; an error stops the update at the step.
func (r *Reconciler) workerStep(ctx context.Context, u *workerUpdate, version string) (string, int32, error) {
	m, log := u.machine, ctrl.LoggerFrom(ctx)
	rec, ok, err := recordOf(m)
	if err != nil {
		return "", 0, err
	}
	want := inPlaceRecord{Version: version, ConfigHash: configHash(u.config.Spec)}
	if !ok || rec.Version != want.Version || rec.ConfigHash != want.ConfigHash {
		// A new update, or a new desired state during one: the node is taken to it from
		// the render on, with what it ran before (an installer that ran stays installed).
		if ok && rec.Installed {
			rec.FromInstaller = ""
		}
		if !ok {
			if rec, err = startRecord(u.secret); err != nil {
				return "", 0, fmt.Errorf("cannot update Machine %s in place: its current config does not load: %w", m.Name, err)
			}
			rec.Started = ptr.To(metav1.Now())
			log.Info("Updating a worker Machine in place", "version", version, "was", u.secret.Annotations[bootstrapv1.RenderedForAnnotation])
		}
		rec.Version, rec.ConfigHash, rec.Step, rec.Upgrade, rec.Installed, rec.Reboot, rec.Applied =
			want.Version, want.ConfigHash, stepRender, "", false, false, false
		if err := r.writeRecordMarked(ctx, m, rec, false); err != nil {
			return "", 0, err
		}
	}
	// A step that fails is tried again; the message names the node and the step (Cluster
	// API shows it in the Machine's Updating condition, which it does not for a Failure).
	stop := func(err error) (string, int32, error) {
		log.Info("In-place update of a worker stopped", "step", rec.Step, "reason", err.Error())
		return fmt.Sprintf("In-place update stopped at Machine %s (node %s), step %s: %v", m.Name, controlplane.MachineAddress(m), rec.Step, err), workerRetryStopped, nil
	}
	if err := r.markForRender(ctx, u.config, rec.Version); err != nil {
		return "", 0, err
	}
	bundle, err := clustersecrets.Get(ctx, r.Client, u.cluster)
	if err != nil {
		return "", 0, fmt.Errorf("failed to read the secrets bundle of Cluster %s: %w", u.cluster.Name, err)
	}
	node, err := r.TalosClients.New(ctx, bundle, controlplane.MachineAddress(m))
	if err != nil {
		return stop(err)
	}
	defer node.Close() //nolint:errcheck // a client connection
	next := func(rec inPlaceRecord) (string, int32, error) {
		return fmt.Sprintf("Step %s", rec.Step), workerRetry, r.writeRecordMarked(ctx, m, rec, false)
	}
	data, err := r.nodeConfig(ctx, m, u.secret)
	if err != nil {
		return stop(err)
	}

	switch rec.Step {
	case stepRender:
		if why := versionRefusal(ctx, node, m, u.secret, u.config.Spec, rec.Version); why != "" {
			log.Info("In-place update of a worker waits", "reason", why)
			return why, workerRetryStopped, nil
		}
		if u.secret.Annotations[bootstrapv1.RenderedForAnnotation] != configgen.RenderedFor(u.config.Spec, rec.Version) {
			return "Waiting for the bootstrap provider to render the new config", workerRetry, nil
		}
		digest, err := controlplane.RebootDigest(data)
		if err != nil {
			return stop(err)
		}
		if installer := u.secret.Annotations[bootstrapv1.ImageFactoryInstallerAnnotation]; installer != "" && installer != rec.FromInstaller {
			rec.Upgrade = installer
		}
		rec.Reboot, rec.Step = digest != rec.FromReboot, stepDrain
		return next(rec)

	case stepDrain:
		if rec.Reboot || rec.Upgrade != "" {
			if !rec.Cordoned {
				rec.Cordoned = true
				if err := r.writeRecordMarked(ctx, m, rec, false); err != nil {
					return "", 0, err
				}
			}
			kube, err := r.workerClient(ctx, u)
			if err != nil {
				return stop(err)
			}
			left, err := drainNode(ctx, kube, m.Status.NodeRef.Name)
			if err != nil {
				return stop(err)
			}
			if left > 0 {
				return fmt.Sprintf("Draining Node %s: %d Pods left", m.Status.NodeRef.Name, left), workerRetry, nil
			}
		}
		rec.Step = stepApply
		return next(rec)

	case stepApply:
		if rec.Upgrade != "" && !rec.Installed {
			// The node boots the new Talos version before it gets the new config: an older
			// Talos may refuse the new config.
			done, err := r.workerInstalls.poll(ctx, m.UID, rec.Upgrade, func(ctx context.Context) error {
				c, err := r.TalosClients.New(ctx, bundle, controlplane.MachineAddress(m))
				if err != nil {
					return err
				}
				defer c.Close() //nolint:errcheck // a client connection
				log.Info("Installing the new Talos version", "installer", rec.Upgrade)
				return c.InstallUpgrade(ctx, rec.Upgrade)
			})
			switch {
			case !done:
				return fmt.Sprintf("Installing %s", rec.Upgrade), workerRetry, nil
			case err != nil:
				record.Event(r.Events, m, corev1.EventTypeWarning, "InPlaceUpdateFailed", "UpdateInPlace", "Installing %s failed: %v", rec.Upgrade, err)
				return stop(err)
			}
			return r.workerReboot(ctx, m, node, rec, func(rec *inPlaceRecord) { rec.Installed = true })
		}
		err := node.ApplyConfiguration(ctx, data, rec.Reboot)
		if errors.Is(err, talosclient.ErrRebootRequired) && !rec.Reboot {
			// Talos before 1.14 decides itself what needs a reboot: drain first, then stage.
			rec.Reboot, rec.Step = true, stepDrain
			return next(rec)
		}
		if err != nil {
			return stop(err)
		}
		log.Info("Applied the new config", "reboot", rec.Reboot)
		if rec.Reboot {
			return r.workerReboot(ctx, m, node, rec, func(rec *inPlaceRecord) { rec.Applied = true })
		}
		rec.Applied, rec.Step = true, stepVerify
		return next(rec)

	case stepReboot:
		bootID, err := node.BootID(ctx)
		switch {
		case err != nil:
			return "Waiting for the node to come back from its reboot", workerRetry, nil
		case bootID != rec.BootID:
			rec.Step, rec.RebootSent = stepVerify, nil
			if !rec.Applied {
				rec.Step = stepApply
			}
			return next(rec)
		case rec.RebootSent != nil && time.Since(rec.RebootSent.Time) < rebootAgain:
			return "Waiting for the node to reboot", workerRetry, nil
		}
		rec.RebootSent = ptrNow()
		if err := r.writeRecordMarked(ctx, m, rec, false); err != nil {
			return "", 0, err
		}
		log.Info("Rebooting the node")
		if err := node.Reboot(ctx); err != nil {
			return stop(err)
		}
		return "Waiting for the node to reboot", workerRetry, nil

	case stepVerify:
		if why := r.workerUpdated(ctx, u, node, rec, data); why != "" {
			return "Waiting for the node: " + why, workerRetry, nil
		}
		if rec.Cordoned {
			kube, err := r.workerClient(ctx, u)
			if err == nil {
				err = setUnschedulable(ctx, kube, m.Status.NodeRef.Name, false)
			}
			if err != nil {
				return stop(err)
			}
		}
		return "", 0, r.finishWorker(ctx, u, rec)
	}
	return "", 0, fmt.Errorf("machine %s records an unknown in-place update step %q", m.Name, rec.Step)
}

// startRecord is the record of an update that starts from the config in secret.
func startRecord(secret *corev1.Secret) (inPlaceRecord, error) {
	data := secret.Data["value"]
	fromReboot, err := controlplane.RebootDigest(data)
	if err != nil {
		return inPlaceRecord{}, err
	}
	fromKubelet, err := controlplane.KubeletImage(data)
	if err != nil {
		return inPlaceRecord{}, err
	}
	return inPlaceRecord{FromInstaller: secret.Annotations[bootstrapv1.ImageFactoryInstallerAnnotation], FromKubelet: fromKubelet, FromReboot: fromReboot}, nil
}

// markForRender marks config with the Kubernetes version its node is updated to, for the
// bootstrap provider to render it again.
func (r *Reconciler) markForRender(ctx context.Context, config *bootstrapv1.TalosConfig, version string) error {
	if config.Annotations[bootstrapv1.InPlaceUpdateAnnotation] == version {
		return nil
	}
	before := config.DeepCopy()
	if config.Annotations == nil {
		config.Annotations = map[string]string{}
	}
	config.Annotations[bootstrapv1.InPlaceUpdateAnnotation] = version
	if err := r.Client.Patch(ctx, config, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to mark TalosConfig %s for rendering again: %w", config.Name, err)
	}
	return nil
}

// workerReboot records what was done and the node's boot, then moves to the Reboot step.
func (r *Reconciler) workerReboot(ctx context.Context, m *clusterv1.Machine, node talosclient.Client, rec inPlaceRecord, done func(*inPlaceRecord)) (string, int32, error) {
	bootID, err := node.BootID(ctx)
	if err != nil {
		return fmt.Sprintf("In-place update stopped at Machine %s (node %s), step %s: %v", m.Name, controlplane.MachineAddress(m), rec.Step, err), workerRetryStopped, nil
	}
	done(&rec)
	rec.BootID, rec.Step = bootID, stepReboot
	return "Step " + stepReboot, workerRetry, r.writeRecordMarked(ctx, m, rec, false)
}

// workerClient is a client of u's workload cluster.
func (r *Reconciler) workerClient(ctx context.Context, u *workerUpdate) (*kubernetes.Clientset, error) {
	if !u.machine.Status.NodeRef.IsDefined() {
		return nil, fmt.Errorf("machine %s has no Node", u.machine.Name)
	}
	config, err := r.workloadConfigOf(ctx, client.ObjectKeyFromObject(u.cluster))
	if err != nil {
		return nil, fmt.Errorf("no connection to the workload cluster: %w", err)
	}
	return kubernetes.NewForConfig(config)
}

// workerUpdated says what keeps u's node from counting as updated: it must run the new
// config and Talos version (when upgraded), and its Node be Ready with the new kubelet.
func (r *Reconciler) workerUpdated(ctx context.Context, u *workerUpdate, node talosclient.Client, rec inPlaceRecord, data []byte) string {
	if why := nodeRuns(ctx, node, rec, data); why != "" {
		return why
	}
	kube, err := r.workerClient(ctx, u)
	if err != nil {
		return err.Error()
	}
	n, err := kube.CoreV1().Nodes().Get(ctx, u.machine.Status.NodeRef.Name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if kubelet := n.Status.NodeInfo.KubeletVersion; kubelet != rec.Version {
		return fmt.Sprintf("Node %s runs kubelet %s, want %s", n.Name, kubelet, rec.Version)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("Node %s is not Ready", n.Name)
		}
	}
	return ""
}

// finishWorker ends the record of u's update once its node runs the new config; Cluster API
// then ends the update (UpdateInProgressAnnotation) on the Machine and its objects.
func (r *Reconciler) finishWorker(ctx context.Context, u *workerUpdate, rec inPlaceRecord) error {
	before := u.config.DeepCopy()
	delete(u.config.Annotations, bootstrapv1.InPlaceUpdateAnnotation)
	if err := r.Client.Patch(ctx, u.config, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to unmark TalosConfig %s: %w", u.config.Name, err)
	}
	m := u.machine
	beforeMachine := m.DeepCopy()
	delete(m.Annotations, controlplanev1.InPlaceUpdateAnnotation)
	if err := r.Client.Patch(ctx, m, client.MergeFromWithOptions(beforeMachine, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to finish the in-place update of Machine %s: %w", m.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Updated a worker Machine in place", "version", rec.Version, "rebooted", rec.Reboot || rec.Installed)
	observeOperation(operationInPlaceUpdate, rec.startedTime())
	record.Event(r.Events, m, corev1.EventTypeNormal, "InPlaceUpdated", "UpdateInPlace", "The node runs Kubernetes %s%s", rec.Version, map[bool]string{true: " after a reboot"}[rec.Reboot || rec.Installed])
	return nil
}
