package hint

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ArrivalWait bounds how long a scheduling cycle waits for the book's pod
// watch to see its pod (Arrivals.Await). The watch is normally a few
// milliseconds behind at most; a pod it never delivers must not stall the
// scheduler for long.
const ArrivalWait = time.Second

// Arrivals lets a scheduling cycle wait until the watch that feeds a Book
// has seen the pod being scheduled. The scheduler takes pods from its own
// watch handler (the extender: from another process's watch), which may run
// ahead of the book's handler: the replacement of a pod can reach a cycle
// before the book has processed the events that made it, its predecessor
// marked for deletion or deleted, or its hint written. A watch delivers
// events in the order the API server wrote them, so once the book's handler
// has seen the replacement arrive it has seen every event before it.
type Arrivals struct {
	mu      sync.Mutex
	pending map[types.UID]struct{}
	// arrived is closed, and replaced, when a pod is first seen pending.
	arrived chan struct{}
	limit   time.Duration
}

// NewArrivals returns Arrivals whose Await gives up after limit.
func NewArrivals(limit time.Duration) *Arrivals {
	return &Arrivals{pending: map[types.UID]struct{}{}, arrived: make(chan struct{}), limit: limit}
}

// Seen follows a pod the book's handler received (added or updated): a pod
// without a node is pending, a bound one no longer needs following. Call it
// after the book has processed the same event. Nil Arrivals ignore it.
func (a *Arrivals) Seen(pod *v1.Pod) {
	if a == nil || pod.UID == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if pod.Spec.NodeName != "" {
		delete(a.pending, pod.UID)
		return
	}
	if _, ok := a.pending[pod.UID]; ok {
		return
	}
	a.pending[pod.UID] = struct{}{}
	close(a.arrived)
	a.arrived = make(chan struct{})
}

// Gone forgets a deleted pod.
func (a *Arrivals) Gone(pod *v1.Pod) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.pending, pod.UID)
}

// Await returns true once the book's handler has seen pod pending, false if
// it has not within the limit or ctx ends first. A pod waited for in vain is
// not waited for again. Nil Arrivals (a simulation that feeds its book
// directly) return true at once.
func (a *Arrivals) Await(ctx context.Context, pod *v1.Pod) bool {
	if a == nil || pod.UID == "" {
		return true
	}
	var timeout <-chan time.Time
	for {
		a.mu.Lock()
		_, ok := a.pending[pod.UID]
		arrived := a.arrived
		a.mu.Unlock()
		if ok {
			return true
		}
		if timeout == nil {
			t := time.NewTimer(a.limit)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-arrived:
		case <-timeout:
			a.mu.Lock()
			a.pending[pod.UID] = struct{}{}
			a.mu.Unlock()
			return false
		case <-ctx.Done():
			return false
		}
	}
}
