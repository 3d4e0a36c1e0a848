package hint

import (
	"fmt"
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// Rank is how a hint ranks a node for its owner's replacement. Each
// scheduler integration maps it onto its own score range: the RebalanceHint
// plugin onto 0-100, the extender onto 0-10.
type Rank int

const (
	// Avoid is the node the pod was evicted from.
	Avoid Rank = iota
	// Neutral is every other node: the scheduler's own scoring orders them.
	Neutral
	// Prefer is the planned target.
	Prefer
)

// RankOf ranks node for the replacement the hint steers.
func (h Hint) RankOf(node string) Rank {
	switch node {
	case h.Target:
		return Prefer
	case h.Source:
		return Avoid
	default:
		return Neutral
	}
}

// DefaultTTL covers a graceful termination, the owner's reaction and a
// scheduling queue backoff with room to spare.
const DefaultTTL = 10 * time.Minute

// MinTTL and MaxTTL bound how long hints steer.
const (
	MinTTL = time.Second
	MaxTTL = 24 * time.Hour
)

// ValidateTTL checks how long hints steer: RebalanceHint's hintTTL and the
// extender's --hint-ttl.
func ValidateTTL(d time.Duration) error {
	if d < MinTTL || d > MaxTTL {
		return fmt.Errorf("invalid value %q: must be between %s and %s", d, MinTTL, MaxTTL)
	}
	return nil
}

// Entry is one hinted pod that has left: its owner's next pod should land
// on Target and avoid Source until Expires.
type Entry struct {
	Hint
	// Pod is the pod that left, so repeated events record it once.
	Pod     types.UID
	Expires time.Time
	// Consumed: a replacement was placed with it. It is kept until it
	// expires so later events of the same pod are not recorded again.
	Consumed bool
	// ClaimedBy is the pending pod the extender scored with this entry:
	// that pod keeps it across retries, its owner's other pods take the
	// next one.
	ClaimedBy types.UID
	// Sticky: a sticky pod left without a hint; Target is the node it ran
	// on, and there is no Source to avoid.
	Sticky bool
	// Rollout: a sticky entry recorded for a pod that still runs, because
	// its Deployment started rolling (Added); Leaving clears it once the
	// pod goes. Until then the pod may still hold its node's room, so a
	// replacement placed elsewhere leaves the entry to a later one (Take).
	Rollout bool
	// Requests are those of the pod that left: what its replacement needs
	// on Target.
	Requests v1.ResourceList
}

func (e *Entry) free(now time.Time) bool {
	return !e.Consumed && e.ClaimedBy == "" && now.Before(e.Expires)
}

// Book holds the hints of pods that left, by owner (OwnerKey), oldest first:
// replacements are created in the order their predecessors left, so they
// take the hints in that order. RebalanceHint and the extender both keep
// their hints in one; it is safe for concurrent use.
type Book struct {
	mu      sync.Mutex
	clock   clock.PassiveClock
	ttl     time.Duration
	byOwner map[types.UID][]*Entry
	// rooms sums, by target node, the requests of the entries that
	// promise room there (see promises), kept as entries change so that a
	// scheduling cycle reads them in time proportional to the targets, not
	// to the hints: a large plan's replay places tens of thousands.
	rooms map[string]*Room
	// expiry is no later than the first entry expires (pruneLocked).
	expiry time.Time
	// running are the bound sticky pods of each Deployment (by OwnerKey)
	// that are not leaving and not yet recorded: when a pod of another
	// pod-template-hash of the same Deployment appears, a rollout has begun
	// and their nodes are recorded for the new pods (Added).
	running map[types.UID]map[types.UID]runningPod
	// everyRollout: follow the bound pods of every Deployment, not only
	// sticky ones (FollowEveryRollout).
	everyRollout bool
}

// runningPod is what the book keeps of a bound sticky pod of a Deployment.
type runningPod struct {
	name, node, hash string
	created          time.Time
	requests         v1.ResourceList
}

// Room is the room a book promises on one node: the summed requests of the
// replacements to come there (CPU in millicores, every other resource in
// its units) and how many they are.
type Room struct {
	Requests map[v1.ResourceName]int64
	Pods     int
}

// promises says whether e holds room on its target: a live hint no pod
// took yet. A sticky pod's node is a preference, not a promise.
func (e *Entry) promises() bool { return !e.Consumed && !e.Sticky }

// count adds e's requests to its target's room (sign 1) or takes them away
// (-1), if it promises room.
func (b *Book) count(e *Entry, sign int64) {
	if !e.promises() {
		return
	}
	r := b.rooms[e.Target]
	if r == nil {
		r = &Room{Requests: map[v1.ResourceName]int64{}}
		b.rooms[e.Target] = r
	}
	for name, q := range e.Requests {
		r.Requests[name] += sign * requests.Units(name, q)
	}
	r.Pods += int(sign)
	if r.Pods == 0 {
		delete(b.rooms, e.Target)
	}
}

// NewBook returns an empty book whose hints steer for ttl after their pod
// is seen leaving; a hint written longer than ttl before that is stale (its
// eviction failed and the pod left later for another reason).
func NewBook(c clock.PassiveClock, ttl time.Duration, opts ...BookOption) *Book {
	b := &Book{clock: c, ttl: ttl, byOwner: map[types.UID][]*Entry{}, rooms: map[string]*Room{}, running: map[types.UID]map[types.UID]runningPod{}}
	for _, o := range opts {
		o(b)
	}
	return b
}

// BookOption configures a Book.
type BookOption func(*Book)

// FollowEveryRollout makes a book follow the rolling updates of every
// Deployment as it follows sticky ones' (Added): a rollout's new pods are
// steered onto the nodes of the pods they replace, so a rolling update
// keeps the placement rebalancer made instead of spreading it afresh.
// Only the rollout's nodes are recorded: a pod that is not sticky and
// leaves for another reason (a crash, a scale-down) records nothing.
func FollowEveryRollout() BookOption {
	return func(b *Book) { b.everyRollout = true }
}

// Leaving records the hint of a pod that is going away, if it carries one,
// else, for a sticky pod (IsSticky), its node as its replacement's target.
// Other pods are ignored; a malformed hint or a pod without a controller is
// logged and ignored. It returns whether a hint was recorded.
func (b *Book) Leaving(logger klog.Logger, pod *v1.Pod) bool {
	b.untrack(pod)
	owner := metav1.GetControllerOf(pod)
	key, _ := OwnerKey(pod)
	h, found, err := FromPod(pod)
	switch {
	case found && err != nil:
		logger.Error(err, "Ignoring malformed rebalance hint", "pod", klog.KObj(pod))
	case found && owner == nil:
		logger.V(2).Info("Ignoring rebalance hint on a pod without a controller", "pod", klog.KObj(pod))
		return false
	case found && b.record(key, pod, h, false):
		logger.V(2).Info("Recorded rebalance hint", "pod", klog.KObj(pod), "owner", owner.Kind+"/"+owner.Name,
			"source", h.Source, "target", h.Target, "plan", h.PlanID)
		return true
	case found:
		// Its eviction failed and the pod left later, for another reason.
		logger.V(4).Info("Rebalance hint not recorded (stale or seen before)", "pod", klog.KObj(pod), "hintedAt", h.Time)
	}
	if owner == nil || pod.Spec.NodeName == "" || !IsSticky(pod) && !b.rollingOut(key, pod.UID) {
		return false
	}
	if !b.record(key, pod, Hint{Target: pod.Spec.NodeName, Time: b.clock.Now()}, true) {
		return false
	}
	logger.V(2).Info("Recorded sticky placement", "pod", klog.KObj(pod), "owner", owner.Kind+"/"+owner.Name, "node", pod.Spec.NodeName)
	return true
}

// Updated follows an update of a pod, so that a hint is known before its
// pod leaves: the executor writes the hint, then evicts, and the owner
// creates the replacement at once; a hint recorded only when the pod is
// seen terminating may come after the replacement was scored. So:
//   - the hint appearing, or changing, on a pod means its eviction is in
//     flight: it is recorded now;
//   - the hint removed from a pod that stays means its eviction failed
//     (the executor takes it back): the unused hint is withdrawn;
//   - the pod marked for deletion is Leaving.
//
// It returns whether a hint was recorded.
func (b *Book) Updated(logger klog.Logger, old, pod *v1.Pod) bool {
	if old.DeletionTimestamp == nil && pod.DeletionTimestamp != nil {
		return b.Leaving(logger, pod)
	}
	if old.Spec.NodeName == "" && pod.Spec.NodeName != "" {
		b.track(pod)
	}
	was, hadHint, _ := FromPod(old)
	now, hasHint, err := FromPod(pod)
	switch {
	case hasHint && (!hadHint || was != now) && err == nil:
		owner := metav1.GetControllerOf(pod)
		key, ok := OwnerKey(pod)
		if !ok || !b.announce(key, pod, now) {
			return false
		}
		logger.V(2).Info("Recorded rebalance hint of an eviction in flight", "pod", klog.KObj(pod), "owner", owner.Kind+"/"+owner.Name,
			"source", now.Source, "target", now.Target, "plan", now.PlanID)
		return true
	case hadHint && !hasHint && pod.DeletionTimestamp == nil:
		if b.withdraw(pod.UID) {
			logger.V(2).Info("Withdrew the rebalance hint of a pod that stays", "pod", klog.KObj(pod), "target", was.Target, "plan", was.PlanID)
		}
	}
	return false
}

// announce records the hint of a pod about to be evicted, or replaces the
// one recorded for it before (an eviction that failed and was planned
// again) unless a replacement used it.
func (b *Book) announce(owner types.UID, pod *v1.Pod, h Hint) bool {
	b.mu.Lock()
	for _, e := range b.byOwner[owner] {
		if e.Pod == pod.UID && !e.Consumed && e.Hint != h {
			b.count(e, -1)
			e.Hint, e.ClaimedBy, e.Sticky, e.Rollout = h, "", false, false
			e.Expires = b.clock.Now().Add(b.ttl)
			b.count(e, 1)
			b.mu.Unlock()
			return true
		}
	}
	b.mu.Unlock()
	return b.record(owner, pod, h, false)
}

// withdraw forgets the unused hint of pod; it says whether there was one.
func (b *Book) withdraw(pod types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for owner, es := range b.byOwner {
		for i, e := range es {
			if e.Pod == pod && !e.Consumed {
				b.count(e, -1)
				if b.byOwner[owner] = append(es[:i:i], es[i+1:]...); len(b.byOwner[owner]) == 0 {
					delete(b.byOwner, owner)
				}
				return true
			}
		}
	}
	return false
}

// record remembers that a pod carrying h left. It returns false when the
// hint is stale or the pod was already recorded.
func (b *Book) record(owner types.UID, pod *v1.Pod, h Hint, sticky bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if now.Sub(h.Time) > b.ttl {
		return false
	}
	b.pruneLocked(now)
	for _, e := range b.byOwner[owner] {
		if e.Pod == pod.UID {
			switch {
			case !e.Rollout:
			case sticky:
				// Recorded when its Deployment started rolling; now it
				// leaves, and its node's room with it: the entry steers
				// for a TTL from now, as any sticky pod's.
				e.Rollout = false
				e.Expires = now.Add(b.ttl)
			case !e.Consumed:
				// rebalancer evicts a pod its rollout recorded, which no
				// new pod took yet: the plan's move wins.
				b.count(e, -1)
				e.Hint, e.ClaimedBy, e.Sticky, e.Rollout = h, "", false, false
				e.Expires = now.Add(b.ttl)
				b.count(e, 1)
				return true
			}
			return false
		}
	}
	e := &Entry{Hint: h, Pod: pod.UID, Expires: now.Add(b.ttl), Sticky: sticky, Requests: requests.Of(pod)}
	b.byOwner[owner] = append(b.byOwner[owner], e)
	b.count(e, 1)
	b.expiresBy(e)
	return true
}

// Promised calls room, under the book's lock, with each node where
// replacements still to be placed by a rebalance hint (live and not
// consumed) are promised room: the room a scheduler keeps for them from
// other pods. owner and except name the hint the pod being scheduled would
// take itself (Next), "" for none: its own room is left out. room must not
// keep r.
func (b *Book) Promised(owner, except types.UID, room func(node string, r Room)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pruneLocked(b.clock.Now())
	own := b.ownLocked(owner, except)
	for node, r := range b.rooms {
		emit(node, r, own, room)
	}
}

// PromisedOn is Promised for the given nodes alone: a cycle that filters
// only those needs no other node's room.
func (b *Book) PromisedOn(owner, except types.UID, nodes []string, room func(node string, r Room)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pruneLocked(b.clock.Now())
	own := b.ownLocked(owner, except)
	for _, node := range nodes {
		if r, ok := b.rooms[node]; ok {
			emit(node, r, own, room)
		}
	}
}

// ownLocked is the hint the pod being scheduled would take itself, nil for
// none.
func (b *Book) ownLocked(owner, except types.UID) *Entry {
	var own *Entry
	for _, e := range b.byOwner[owner] {
		if except != "" && e.Pod == except && e.promises() {
			own = e
		}
	}
	return own
}

// emit gives room the room promised on node, less own's, if own goes there.
func emit(node string, r *Room, own *Entry, room func(node string, r Room)) {
	if own == nil || own.Target != node {
		room(node, *r)
		return
	}
	if r.Pods == 1 {
		return // its own room alone
	}
	less := Room{Requests: maps.Clone(r.Requests), Pods: r.Pods - 1}
	for name, q := range own.Requests {
		less.Requests[name] -= requests.Units(name, q)
	}
	room(node, less)
}

// Next returns the owner's oldest live hint that no pod took yet.
func (b *Book) Next(owner types.UID) (Entry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.freeLocked(owner, b.clock.Now()); e != nil {
		return *e, true
	}
	return Entry{}, false
}

// SetConsumed marks the hint left by pod as used (or, with false, gives it
// back): the scheduler plugin's Reserve and Unreserve.
func (b *Book) SetConsumed(owner, pod types.UID, consumed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.byOwner[owner] {
		if e.Pod == pod {
			b.count(e, -1)
			e.Consumed = consumed
			b.count(e, 1)
		}
	}
}

// Claim returns the hint pending pod is scored with: the one it claimed
// before (a retry), else the owner's oldest free hint, now claimed by it;
// a sticky entry only on a node feasible says yes to (one the pod passed
// the filters on), the oldest such. An extender sees no Reserve, and the
// owner's next pod may be scored before this one binds: claims keep them
// from sharing one hint.
func (b *Book) Claim(owner, pod types.UID, feasible func(node string) bool) (Entry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if e := b.claimedLocked(owner, pod, now); e != nil {
		return *e, true
	}
	e := b.feasibleLocked(owner, b.freeLocked(owner, now), feasible)
	if e == nil {
		return Entry{}, false
	}
	e.ClaimedBy = pod
	return *e, true
}

// Bound consumes the hint of a pod of owner that was bound to node: the
// one it claimed, else (it was placed without being scored, e.g. on the
// only feasible node) the owner's oldest free one, as Take does. It
// returns whether a hint was consumed.
func (b *Book) Bound(owner, pod types.UID, node string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	e := b.claimedLocked(owner, pod, now)
	if e == nil {
		e = b.freeLocked(owner, now)
	}
	if e == nil {
		return false
	}
	_, ok := b.takeLocked(owner, e, node)
	return ok
}

// Release gives back the hint pod claimed: it was deleted before it bound.
func (b *Book) Release(owner, pod types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.byOwner[owner] {
		if e.ClaimedBy == pod && !e.Consumed {
			e.ClaimedBy = ""
		}
	}
}

// freeLocked is the owner's oldest live hint that no pod took or claimed,
// a rebalance hint before a sticky pod's node: the plan's move wins.
func (b *Book) freeLocked(owner types.UID, now time.Time) *Entry {
	var sticky *Entry
	for _, e := range b.byOwner[owner] {
		switch {
		case !e.free(now):
		case !e.Sticky:
			return e
		case sticky == nil:
			sticky = e
		}
	}
	return sticky
}

func (b *Book) claimedLocked(owner, pod types.UID, now time.Time) *Entry {
	for _, e := range b.byOwner[owner] {
		if e.ClaimedBy == pod && !e.Consumed && now.Before(e.Expires) {
			return e
		}
	}
	return nil
}

// Len counts live entries, consumed or not.
func (b *Book) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pruneLocked(b.clock.Now())
	n := 0
	for _, es := range b.byOwner {
		n += len(es)
	}
	return n
}

// expiresBy keeps expiry no later than e expires.
func (b *Book) expiresBy(e *Entry) {
	if b.expiry.IsZero() || e.Expires.Before(b.expiry) {
		b.expiry = e.Expires
	}
}

// pruneLocked forgets the entries that expired by now. It walks the book
// only once its first entry has expired (expiry).
func (b *Book) pruneLocked(now time.Time) {
	if b.expiry.IsZero() || now.Before(b.expiry) {
		return
	}
	b.expiry = time.Time{}
	for owner, es := range b.byOwner {
		live := es[:0]
		for _, e := range es {
			if now.Before(e.Expires) {
				live = append(live, e)
				b.expiresBy(e)
			} else {
				b.count(e, -1)
			}
		}
		if len(live) == 0 {
			delete(b.byOwner, owner)
		} else {
			b.byOwner[owner] = live
		}
	}
}

// Checkpoint is a copy of the hints a book holds. A simulation that forks
// the cluster takes one with the fork and restores it on revert, so hints
// recorded or consumed in a what-if do not outlive it.
type Checkpoint map[types.UID][]Entry

// Checkpoint copies the hints the book holds.
func (b *Book) Checkpoint() Checkpoint {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(Checkpoint, len(b.byOwner))
	for owner, es := range b.byOwner {
		cp := make([]Entry, len(es))
		for i, e := range es {
			cp[i] = *e
		}
		out[owner] = cp
	}
	return out
}

// Restore replaces the hints the book holds with a checkpoint's.
func (b *Book) Restore(c Checkpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.byOwner = make(map[types.UID][]*Entry, len(c))
	b.rooms, b.expiry = map[string]*Room{}, time.Time{}
	for owner, es := range c {
		ptrs := make([]*Entry, len(es))
		for i := range es {
			e := es[i]
			ptrs[i] = &e
			b.count(&e, 1)
			b.expiresBy(&e)
		}
		b.byOwner[owner] = ptrs
	}
}
