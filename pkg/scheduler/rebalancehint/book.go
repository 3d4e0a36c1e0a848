package rebalancehint

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// entry is one hinted pod that has left: its owner's next pod should land on
// hint.Target and avoid hint.Source until expires.
type entry struct {
	hint.Hint
	pod      types.UID // the evicted pod, so repeated events record it once
	expires  time.Time
	consumed bool // a replacement was reserved with it; kept until expiry to ignore later events of the same pod
}

// book holds the hints by owner UID, oldest first: replacements are created
// in the order their predecessors left, so they take the hints in that order.
type book struct {
	mu      sync.Mutex
	clock   clock.PassiveClock
	ttl     time.Duration
	byOwner map[types.UID][]*entry
}

func newBook(c clock.PassiveClock, ttl time.Duration) *book {
	return &book{clock: c, ttl: ttl, byOwner: map[types.UID][]*entry{}}
}

// record remembers that a pod carrying h left. It returns false when the hint
// is stale or the pod was already recorded.
func (b *book) record(owner, pod types.UID, h hint.Hint) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if now.Sub(h.Time) > b.ttl {
		return false
	}
	b.pruneLocked(now)
	for _, e := range b.byOwner[owner] {
		if e.pod == pod {
			return false
		}
	}
	b.byOwner[owner] = append(b.byOwner[owner], &entry{Hint: h, pod: pod, expires: now.Add(b.ttl)})
	return true
}

// next returns the oldest live, unconsumed hint of owner.
func (b *book) next(owner types.UID) (entry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for _, e := range b.byOwner[owner] {
		if !e.consumed && now.Before(e.expires) {
			return *e, true
		}
	}
	return entry{}, false
}

// setConsumed marks the hint left by pod as used (or, with false, gives it back).
func (b *book) setConsumed(owner, pod types.UID, consumed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.byOwner[owner] {
		if e.pod == pod {
			e.consumed = consumed
		}
	}
}

// len counts live entries, consumed or not.
func (b *book) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pruneLocked(b.clock.Now())
	n := 0
	for _, es := range b.byOwner {
		n += len(es)
	}
	return n
}

func (b *book) pruneLocked(now time.Time) {
	for owner, es := range b.byOwner {
		live := es[:0]
		for _, e := range es {
			if now.Before(e.expires) {
				live = append(live, e)
			}
		}
		if len(live) == 0 {
			delete(b.byOwner, owner)
		} else {
			b.byOwner[owner] = live
		}
	}
}

// Checkpoint is a copy of the hints a plugin holds. A simulation that forks
// the cluster takes one with the fork and restores it on revert, so hints
// recorded or consumed in a what-if do not outlive it.
type Checkpoint map[types.UID][]entry

func (b *book) checkpoint() Checkpoint {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(Checkpoint, len(b.byOwner))
	for owner, es := range b.byOwner {
		cp := make([]entry, len(es))
		for i, e := range es {
			cp[i] = *e
		}
		out[owner] = cp
	}
	return out
}

func (b *book) restore(c Checkpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.byOwner = make(map[types.UID][]*entry, len(c))
	for owner, es := range c {
		ptrs := make([]*entry, len(es))
		for i := range es {
			e := es[i]
			ptrs[i] = &e
		}
		b.byOwner[owner] = ptrs
	}
}
