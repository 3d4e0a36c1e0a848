// Package history remembers where rebalancer moved pods, for the cooldown:
// a workload's pods stay on a node for a while after an earlier plan moved
// one of its pods there, so a moved pod is not moved again before it
// settles. It is the one cooldown: the executor records each eviction, the
// planner leaves pods in cooldown alone, and the multi-round simulation
// replays it on a simulated clock.
//
// The cooldown is per owner and node, not per owner: a cooldown on whole
// workloads would pin a large Deployment's pods on every node and stop
// drains from emptying any.
package history

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Landing is an owner's pods on one node.
type Landing struct {
	Owner types.UID
	Node  string
}

// History is the record of recent moves. It is safe for concurrent use.
type History struct {
	clock    clock.PassiveClock
	cooldown time.Duration

	mu     sync.Mutex
	landed map[Landing]time.Time // last time a pod of Owner was moved onto Node
}

// New returns an empty history whose cooldown lasts cooldown by clock
// (nil: the real clock). A cooldown of 0 keeps nothing.
func New(c clock.PassiveClock, cooldown time.Duration) *History {
	if c == nil {
		c = clock.RealClock{}
	}
	return &History{clock: c, cooldown: cooldown, landed: map[Landing]time.Time{}}
}

// Record notes that a pod of owner was moved onto node now.
func (h *History) Record(owner types.UID, node string) {
	if h == nil || h.cooldown <= 0 || owner == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	// Drop what has cooled, so a long-lived process does not keep every
	// owner it ever moved.
	for l, t := range h.landed {
		if now.Sub(t) >= h.cooldown {
			delete(h.landed, l)
		}
	}
	h.landed[Landing{owner, node}] = now
}

// Landed returns when a pod of owner was last moved onto node, if that is
// less than the cooldown ago.
func (h *History) Landed(owner types.UID, node string) (time.Time, bool) {
	if h == nil || h.cooldown <= 0 {
		return time.Time{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.landed[Landing{owner, node}]
	if !ok || h.clock.Since(t) >= h.cooldown {
		return time.Time{}, false
	}
	return t, true
}

// InCooldown says whether a pod must stay where it is: a pod of its owner
// was moved onto its node less than the cooldown ago. The planner leaves
// such pods alone.
func (h *History) InCooldown(pod *v1.Pod) bool {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return false
	}
	_, ok := h.Landed(owner.UID, pod.Spec.NodeName)
	return ok
}
