package simulator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/claims"
)

// Devices (Dynamic Resource Allocation) in the simulation.
//
// kube-scheduler's DynamicResources plugin reads ResourceClaims through a
// claim tracker. The simulation's tracker is the scheduler's own over the
// snapshot's claims, with the changes the simulation made on top, as
// cluster-autoscaler's simulator does: the claims the resourceclaim
// controller would make from their templates for replacement pods, the
// claims released with the pods that own them, and the allocations the
// plugin made while placing pods (its Reserve signals them). Each change is
// journaled, so a fork reverts it with the pods.

// claimsOverlay is the simulation's ResourceClaim tracker.
type claimsOverlay struct {
	inner fwk.ResourceClaimTracker
	// log journals a change (the key and what it held before).
	log func(claimChange)

	mu sync.RWMutex
	// changed holds the claims the simulation changed, by namespace/name;
	// nil: deleted.
	changed map[string]*resourceapi.ResourceClaim
}

// claimChange is one change to the overlay, as Revert undoes it: key held
// prev before (had false: the key was not changed yet).
type claimChange struct {
	key  string
	prev *resourceapi.ResourceClaim
	had  bool
}

var _ fwk.ResourceClaimTracker = &claimsOverlay{}

func claimKey(namespace, name string) string { return namespace + "/" + name }

// set changes the claim at key (nil: deletes it) and journals the change.
func (o *claimsOverlay) set(key string, claim *resourceapi.ResourceClaim) {
	o.mu.Lock()
	prev, had := o.changed[key]
	o.changed[key] = claim
	o.mu.Unlock()
	o.log(claimChange{key: key, prev: prev, had: had})
}

// undo reverts one change.
func (o *claimsOverlay) undo(c claimChange) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.had {
		o.changed[c.key] = c.prev
	} else {
		delete(o.changed, c.key)
	}
}

func (o *claimsOverlay) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	o.mu.RLock()
	c, ok := o.changed[claimKey(namespace, name)]
	o.mu.RUnlock()
	switch {
	case ok && c == nil:
		return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
	case ok:
		return c, nil
	}
	return o.inner.Get(namespace, name)
}

func (o *claimsOverlay) List() ([]*resourceapi.ResourceClaim, error) {
	all, err := o.inner.List()
	if err != nil {
		return nil, err
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make([]*resourceapi.ResourceClaim, 0, len(all)+len(o.changed))
	for _, c := range all {
		if _, ok := o.changed[claimKey(c.Namespace, c.Name)]; !ok {
			out = append(out, c)
		}
	}
	for _, c := range o.changed {
		if c != nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// ListAllAllocatedDevices is the snapshot's allocated devices, less those
// of claims the simulation changed, plus those the changed claims hold.
func (o *claimsOverlay) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	inner, err := o.inner.ListAllAllocatedDevices()
	if err != nil {
		return nil, err
	}
	out := inner.Clone()
	o.adjust(func(r resourceapi.DeviceRequestAllocationResult, add bool) {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if add {
			out.Insert(id)
		} else {
			out.Delete(id)
		}
	})
	return out, nil
}

// GatherAllocatedState is the snapshot's allocated state with the
// simulation's changes, as ListAllAllocatedDevices: devices allocated
// whole, shares of devices allocated more than once, and the capacity
// those shares consume (as the DynamicResources plugin's own manager
// gathers them).
func (o *claimsOverlay) GatherAllocatedState() (*structured.AllocatedState, error) {
	inner, err := o.inner.GatherAllocatedState()
	if err != nil {
		return nil, err
	}
	out := &structured.AllocatedState{
		AllocatedDevices:         inner.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: inner.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       inner.AggregatedCapacity.Clone(),
	}
	if out.AggregatedCapacity == nil {
		out.AggregatedCapacity = structured.NewConsumedCapacityCollection()
	}
	o.adjust(func(r resourceapi.DeviceRequestAllocationResult, add bool) {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID != nil {
			shared := structured.MakeSharedDeviceID(id, r.ShareID)
			consumed := structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity)
			if add {
				out.AllocatedSharedDeviceIDs.Insert(shared)
				if r.ConsumedCapacity != nil {
					out.AggregatedCapacity.Insert(consumed)
				}
			} else {
				out.AllocatedSharedDeviceIDs.Delete(shared)
				if r.ConsumedCapacity != nil {
					out.AggregatedCapacity.Remove(consumed)
				}
			}
			return
		}
		if add {
			out.AllocatedDevices.Insert(id)
		} else {
			out.AllocatedDevices.Delete(id)
		}
	})
	return out, nil
}

// adjust calls fn for each device allocated to a claim the simulation
// changed: add false for every such claim as the snapshot has it, then add
// true for every one as the simulation has it.
func (o *claimsOverlay) adjust(fn func(r resourceapi.DeviceRequestAllocationResult, add bool)) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	each := func(c *resourceapi.ResourceClaim, add bool) {
		if c == nil || c.Status.Allocation == nil {
			return
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if !ptr.Deref(r.AdminAccess, false) { // not allocated, for the scheduler
				fn(r, add)
			}
		}
	}
	// Every removal before any addition: a device a released claim held
	// may be held by another changed claim now.
	for key := range o.changed {
		ns, name, _ := strings.Cut(key, "/")
		if old, err := o.inner.Get(ns, name); err == nil {
			each(old, false)
		}
	}
	for _, c := range o.changed {
		each(c, true)
	}
}

// SignalClaimPendingAllocation takes the allocation the DynamicResources
// plugin made while placing a pod (its Reserve) as done: the simulation
// does not run the binding phase that would write it.
func (o *claimsOverlay) SignalClaimPendingAllocation(_ types.UID, allocated *resourceapi.ResourceClaim) error {
	if allocated == nil || allocated.Status.Allocation == nil {
		return fmt.Errorf("claim %s signalled without an allocation", klog.KObj(allocated))
	}
	o.set(claimKey(allocated.Namespace, allocated.Name), allocated)
	return nil
}

// GetPendingAllocation: allocations are never pending in the simulation.
func (o *claimsOverlay) GetPendingAllocation(types.UID) *resourceapi.AllocationResult { return nil }

// MaybeRemoveClaimPendingAllocation: nothing is pending (see
// SignalClaimPendingAllocation).
func (o *claimsOverlay) MaybeRemoveClaimPendingAllocation(types.UID, bool) bool { return false }

// AssumeClaimAfterAPICall is the binding phase's, which the simulation
// does not run.
func (o *claimsOverlay) AssumeClaimAfterAPICall(claim *resourceapi.ResourceClaim) error {
	o.set(claimKey(claim.Namespace, claim.Name), claim)
	return nil
}

// AssumedClaimRestore is the binding phase's, which the simulation does not
// run.
func (o *claimsOverlay) AssumedClaimRestore(string, string) {}

// draManager is the scheduler's DRA manager with the simulation's claims.
type draManager struct {
	fwk.SharedDRAManager
	claims *claimsOverlay
}

func (m *draManager) ResourceClaims() fwk.ResourceClaimTracker { return m.claims }

// withClaims returns pod as the resourceclaim controller leaves it: each of
// its claims made from a template exists, and its status names it. A pod
// whose claims all exist is returned as it is; otherwise a copy, and the
// claims made are in the simulation (journaled). The claims are named and
// owned after the pod's UID, as the controller owns them by the pod.
func (s *Simulator) withClaims(pod *v1.Pod) (*v1.Pod, error) {
	if s.dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return pod, nil
	}
	var out *v1.Pod
	for _, entry := range pod.Spec.ResourceClaims {
		if entry.ResourceClaimTemplateName == nil || claims.Generated(pod, entry.Name) != "" {
			continue
		}
		tmpl, err := s.claimTemplate(pod.Namespace, *entry.ResourceClaimTemplateName)
		if err != nil {
			return nil, fmt.Errorf("pod %s, claim %s: %w", klog.KObj(pod), entry.Name, err)
		}
		if out == nil {
			out = pod.DeepCopy()
		}
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:        claimName(pod, entry.Name),
				Namespace:   pod.Namespace,
				UID:         types.UID(fmt.Sprintf("claim-%s-%s", pod.UID, entry.Name)),
				Labels:      maps.Clone(tmpl.Spec.Labels),
				Annotations: map[string]string{resourceapi.PodResourceClaimAnnotation: entry.Name},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
				}},
			},
			Spec: *tmpl.Spec.Spec.DeepCopy(),
		}
		s.dra.claims.set(claimKey(claim.Namespace, claim.Name), claim)
		out.Status.ResourceClaimStatuses = append(out.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: entry.Name, ResourceClaimName: ptr.To(claim.Name)})
	}
	if out == nil {
		return pod, nil
	}
	return out, nil
}

// claimName names a claim made for pod from a template as the
// resourceclaim controller does, "<pod>-<claim>-<5 characters>" with the
// prefix cut to 57, but with characters drawn from the pod's UID rather
// than at random, so plans repeat.
func claimName(pod *v1.Pod, entry string) string {
	prefix := pod.Name + "-" + entry
	if len(prefix) > 57 {
		prefix = prefix[:57]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(pod.UID))
	suffix := strconv.FormatUint(uint64(h.Sum32()), 36)
	for len(suffix) < 5 {
		suffix = "0" + suffix
	}
	return prefix + "-" + suffix[:5]
}

// claimTemplate is the ResourceClaimTemplate of the simulation.
func (s *Simulator) claimTemplate(namespace, name string) (*resourceapi.ResourceClaimTemplate, error) {
	for _, t := range s.objects.ResourceClaimTemplates {
		if t.Namespace == namespace && t.Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("ResourceClaimTemplate %s/%s is not in the snapshot", namespace, name)
}

// releaseClaims deletes the claims made for pod from templates, as the
// resourceclaim controller deletes them once their pod is gone, which
// frees their devices (journaled).
func (s *Simulator) releaseClaims(pod *v1.Pod) {
	if s.dra == nil {
		return
	}
	for _, entry := range pod.Spec.ResourceClaims {
		if entry.ResourceClaimTemplateName == nil {
			continue
		}
		if name := claims.Generated(pod, entry.Name); name != "" {
			s.dra.claims.set(claimKey(pod.Namespace, name), nil)
		}
	}
}

// devicePlugin is the DynamicResources plugin of a profile, as allocateOn
// drives it.
type devicePlugin interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
	fwk.ReservePlugin
}

// allocateOn allocates the devices pod's claims need on node, as the
// DynamicResources plugin does when kube-scheduler places the pod there:
// its PreFilter, its Filter on node, its Reserve (which the simulation's
// tracker takes as the allocation, journaled). The pod's other plugins do
// not run: the move was judged already.
func (s *Simulator) allocateOn(ctx context.Context, sc *scheduler, pod *v1.Pod, node string) error {
	if sc.devices == nil || len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	if err := s.sync(); err != nil { // the pod's old node without it
		return err
	}
	nodes, err := s.snapshot.NodeInfos().List()
	if err != nil {
		return err
	}
	ni, err := s.snapshot.NodeInfos().Get(node)
	if err != nil {
		return err
	}
	state := framework.NewCycleState()
	_, st := sc.devices.PreFilter(ctx, state, pod, nodes)
	switch {
	case st.IsSkip():
		return nil
	case !st.IsSuccess():
		return fmt.Errorf("allocating the devices of pod %s: %w", klog.KObj(pod), st.AsError())
	}
	if st := sc.devices.Filter(ctx, state, pod, ni); !st.IsSuccess() {
		return fmt.Errorf("allocating the devices of pod %s on %s: %w", klog.KObj(pod), node, st.AsError())
	}
	if st := sc.devices.Reserve(ctx, state, pod, node); !st.IsSuccess() {
		return fmt.Errorf("allocating the devices of pod %s on %s: %w", klog.KObj(pod), node, st.AsError())
	}
	return nil
}

// failedCycle says whether a PreFilter or Filter error (a status neither a
// success nor a rejection) fails only the pod's own scheduling cycle, and
// why: those of the DynamicResources plugin are the pod's claims' doing (a
// device class or a claim whose CEL selector compiles but fails on some
// device at run time, "class gpu: selector #0: CEL runtime error: no such
// key: model"; an allocation that timed out). kube-scheduler then leaves
// that pod pending, to be retried after a backoff, and goes on scheduling
// the others; the simulation does the same: the pod fits no node this
// cycle, the error its diagnosis, and the plan goes on without it. Any
// other plugin's error still ends the simulation: it says the simulation
// is wrong, not the pod.
func failedCycle(st *fwk.Status) (string, bool) {
	if st == nil || st.IsSuccess() || st.IsRejected() || st.Plugin() != names.DynamicResources {
		return "", false
	}
	err := st.AsError()
	if inner := errors.Unwrap(err); inner != nil {
		err = inner // without the framework's "running ... plugin" wrapping
	}
	return fmt.Sprintf("kube-scheduler's %s plugin fails the pod's scheduling cycle: %v", names.DynamicResources, err), true
}

// failedFilters is failedCycle for the statuses of a cycle's Filter pass,
// indexed like its nodes (nil: passed), when every error among them is
// the pod's own: the diagnosis is the first in node order, so that it
// does not depend on which node's filters ran first.
func failedFilters(statuses []*fwk.Status) (why string, failed bool) {
	for _, st := range statuses {
		if st == nil || st.IsSuccess() || st.IsRejected() {
			continue
		}
		w, ok := failedCycle(st)
		if !ok {
			return "", false // an error of the simulation's: it ends it
		}
		if !failed {
			why, failed = w, true
		}
	}
	return why, failed
}

// Claim is the ResourceClaim namespace/name as the simulation has it: nil
// when there is none, or DRA is off.
func (s *Simulator) Claim(namespace, name string) *resourceapi.ResourceClaim {
	if s.dra == nil {
		return nil
	}
	c, err := s.dra.claims.Get(namespace, name)
	if err != nil {
		return nil
	}
	return c
}
