package hint

import (
	"cmp"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// Sticky pods through a rolling update. A rolling update creates the new
// ReplicaSet's pods while the old ones still run (maxSurge), or before they
// are marked for deletion (the two ReplicaSets' syncs race even with
// maxSurge 0): recorded only as each old pod leaves, a node comes too late
// for the new pod that replaces it. So the book follows the bound sticky
// pods of each Deployment, and when a pod of another pod-template-hash of
// the same Deployment appears (its ReplicaSet's name is the Deployment's,
// OwnerKey), it records at once the node of every old pod still running,
// one entry each: the rollout's new pods take them one per pod, as any
// sticky entries. The old pod may still hold its node when a new pod is
// scheduled: the plugin prefers a recorded node the pod passes the filters
// on (NextOn), and a pod that lands on no recorded node leaves its entry to
// a later new pod (Take).

// Added follows a pod the book's watch sees created (or listed): a bound
// sticky pod of a Deployment is followed; a pending pod of a Deployment
// whose followed sticky pods all have another pod-template-hash starts its
// rollout (or a rollback), and their nodes are recorded. A pending pod of
// a pod-template-hash some followed pod has is a scale-up or a
// replacement, not a rollout. It returns how many nodes were recorded.
func (b *Book) Added(logger klog.Logger, pod *v1.Pod) int {
	if pod.DeletionTimestamp != nil {
		return 0
	}
	if pod.Spec.NodeName != "" {
		b.track(pod)
		return 0
	}
	key, ok := deploymentKey(pod)
	if !ok {
		return 0
	}
	hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	b.mu.Lock()
	defer b.mu.Unlock()
	var old []types.UID
	for uid, r := range b.running[key] {
		if r.hash == hash {
			// Its ReplicaSet has running pods: a scale-up, or an old
			// ReplicaSet replacing a pod in the middle of a rollout.
			return 0
		}
		old = append(old, uid)
	}
	if len(old) == 0 {
		return 0
	}
	running := b.running[key]
	// The oldest pods first: an order that does not depend on the map's.
	slices.SortFunc(old, func(x, y types.UID) int {
		return cmp.Or(running[x].created.Compare(running[y].created), cmp.Compare(running[x].name, running[y].name))
	})
	now := b.clock.Now()
	b.pruneLocked(now)
	n := 0
	for _, uid := range old {
		r := running[uid]
		delete(running, uid)
		if b.hasLocked(key, uid) {
			continue
		}
		e := &Entry{Hint: Hint{Target: r.node, Time: now}, Pod: uid, Expires: now.Add(b.ttl), Sticky: true, Rollout: true, Requests: r.requests}
		b.byOwner[key] = append(b.byOwner[key], e)
		b.expiresBy(e)
		n++
		logger.V(2).Info("Recorded sticky placement of a pod its Deployment's rollout replaces", "pod", klog.KRef(pod.Namespace, r.name),
			"node", r.node, "newPod", klog.KObj(pod), "podTemplateHash", hash)
	}
	if len(running) == 0 {
		delete(b.running, key)
	}
	return n
}

// deploymentKey is the OwnerKey of a pod of a Deployment's ReplicaSet.
func deploymentKey(pod *v1.Pod) (types.UID, bool) {
	if _, ok := DeploymentOf(pod); !ok {
		return "", false
	}
	return OwnerKey(pod)
}

// track follows a bound sticky pod of a Deployment, or any with
// FollowEveryRollout.
func (b *Book) track(pod *v1.Pod) {
	if !b.everyRollout && !IsSticky(pod) || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return
	}
	key, ok := deploymentKey(pod)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hasLocked(key, pod.UID) {
		return
	}
	if b.running[key] == nil {
		b.running[key] = map[types.UID]runningPod{}
	}
	b.running[key][pod.UID] = runningPod{
		name: pod.Name, node: pod.Spec.NodeName, hash: pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey],
		created: pod.CreationTimestamp.Time, requests: requests.Of(pod),
	}
}

// untrack stops following a pod that leaves.
func (b *Book) untrack(pod *v1.Pod) {
	key, ok := deploymentKey(pod)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if running, ok := b.running[key]; ok {
		delete(running, pod.UID)
		if len(running) == 0 {
			delete(b.running, key)
		}
	}
}

// rollingOut says whether pod's node was recorded for its Deployment's
// rollout (Entry.Rollout) and is still waiting for it to leave.
func (b *Book) rollingOut(owner, pod types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.byOwner[owner] {
		if e.Pod == pod {
			return e.Rollout
		}
	}
	return false
}

// Running counts the sticky pods the book follows.
func (b *Book) Running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.running {
		n += len(r)
	}
	return n
}

func (b *Book) hasLocked(owner, pod types.UID) bool {
	for _, e := range b.byOwner[owner] {
		if e.Pod == pod {
			return true
		}
	}
	return false
}

// NextOn is Next for a pod that passes the filters on the nodes feasible
// says yes to: a rebalance hint first, as Next, else the owner's oldest
// free sticky entry whose node is feasible, else (none is) Next's.
func (b *Book) NextOn(owner types.UID, feasible func(node string) bool) (Entry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := b.freeLocked(owner, b.clock.Now())
	if first == nil {
		return Entry{}, false
	}
	if e := b.feasibleLocked(owner, first, feasible); e != nil {
		return *e, true
	}
	return *first, true
}

// feasibleLocked is first, the owner's free entry Next would give, if it
// is a rebalance hint or a sticky entry on a feasible node; else the
// owner's oldest free sticky entry on a feasible node; nil for none.
func (b *Book) feasibleLocked(owner types.UID, first *Entry, feasible func(node string) bool) *Entry {
	if first == nil || !first.Sticky || feasible(first.Target) {
		return first
	}
	now := b.clock.Now()
	for _, e := range b.byOwner[owner] {
		if e.Sticky && e.free(now) && feasible(e.Target) {
			return e
		}
	}
	return nil
}

// Take consumes, for a pod of owner reserved node, the entry it was
// scored with (chosen, an Entry's Pod), and returns the Pod of the entry
// consumed (takeLocked). ok is false when nothing was consumed.
func (b *Book) Take(owner, chosen types.UID, node string) (consumed types.UID, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.byOwner[owner] {
		if e.Pod == chosen {
			return b.takeLocked(owner, e, node)
		}
	}
	return "", false
}

// takeLocked consumes, for a pod of owner placed on node, the entry own it
// was scored with, or claimed. A rebalance hint, or a sticky entry whose
// node the pod got, is consumed as is. A pod placed off its sticky entry's
// node takes another free sticky entry of its owner for the node it got,
// if there is one, so that two pods never take one node's entry; else it
// consumes its own, but for a rollout's entry whose pod still runs
// (Entry.Rollout): that node may be full only until the old pod leaves,
// and the entry is left to the rollout's next pod. An entry not consumed
// is no longer claimed by the pod.
func (b *Book) takeLocked(owner types.UID, own *Entry, node string) (consumed types.UID, ok bool) {
	if !own.Sticky || own.Target == node {
		b.consumeLocked(own)
		return own.Pod, true
	}
	now := b.clock.Now()
	for _, e := range b.byOwner[owner] {
		if e.Sticky && e.Target == node && e.free(now) {
			b.consumeLocked(e)
			own.ClaimedBy = ""
			return e.Pod, true
		}
	}
	if own.Rollout {
		own.ClaimedBy = ""
		return "", false
	}
	b.consumeLocked(own)
	return own.Pod, true
}

func (b *Book) consumeLocked(e *Entry) {
	b.count(e, -1)
	e.Consumed = true
	b.count(e, 1)
}
