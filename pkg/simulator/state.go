package simulator

import (
	"cmp"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// state is the simulated cluster's pods and the log that lets a fork be
// reverted. Bound pods are in kube-scheduler's cache; pending pods wait for
// Place; finished pods hold nothing and are kept only so State lists them.
type state struct {
	objects  snapshot.Snapshot // nodes and the other kinds; Pods unused
	bound    map[types.UID]entry
	pending  map[*v1.Pod]entry // by pointer: a pending pod may have no UID yet
	finished map[*v1.Pod]entry
	seq      uint64 // order of arrival, so State and Pending are repeatable
	// replacements counts simulated replacement pods, for unique UIDs.
	replacements int

	// journal records every change made while a fork is open, and forks
	// the journal length at each Fork: reverting a fork undoes its changes,
	// newest first, so a what-if costs what it changed, not a copy.
	journal []change
	forks   []mark
}

// mark is where a fork began: the journal's length and the hints every
// scheduler held.
type mark struct {
	journal int
	hints   map[*scheduler]hint.Checkpoint
	// next is each scheduler's node search start (see scheduler.next).
	next map[*scheduler]int
}

type entry struct {
	pod *v1.Pod
	seq uint64
}

// change is one pod entering (added) or leaving one of the sets.
type change struct {
	entry
	set   set
	added bool
	// claim, when set, is a change to the simulation's ResourceClaims
	// instead (see claimsOverlay).
	claim *claimChange
}

type set int

const (
	boundSet set = iota
	pendingSet
	finishedSet
)

// unbound returns the map of a set of pods that are not on a node.
func (s *state) unbound(which set) map[*v1.Pod]entry {
	if which == pendingSet {
		return s.pending
	}
	return s.finished
}

func newState(snap *snapshot.Snapshot) state {
	objects := *snap
	objects.Pods = nil
	return state{objects: objects, bound: map[types.UID]entry{}, pending: map[*v1.Pod]entry{}, finished: map[*v1.Pod]entry{}}
}

// admit takes a pod of the snapshot into the state.
func (s *Simulator) admit(pod *v1.Pod) error {
	s.seq++
	e := entry{pod: pod, seq: s.seq}
	switch {
	case podutil.IsPodTerminal(pod):
		s.finished[pod] = e
		return nil
	case pod.Spec.NodeName == "":
		s.pending[pod] = e
		return nil
	}
	return s.bind(e)
}

// bind puts a pod on its node (pod.Spec.NodeName).
func (s *Simulator) bind(e entry) error {
	pod := e.pod
	if pod.UID == "" {
		return fmt.Errorf("pod %s has no UID", klog.KObj(pod))
	}
	if _, dup := s.bound[pod.UID]; dup {
		return fmt.Errorf("pod %s: UID %s is already in the simulation", klog.KObj(pod), pod.UID)
	}
	if err := s.addPod(pod); err != nil {
		return fmt.Errorf("adding pod %s to the simulation: %w", klog.KObj(pod), err)
	}
	s.bound[pod.UID] = e
	s.log(change{entry: e, set: boundSet, added: true})
	return nil
}

// unbind takes a bound pod off its node and returns its entry.
func (s *Simulator) unbind(pod *v1.Pod) (entry, error) {
	e, ok := s.bound[pod.UID]
	if !ok {
		return entry{}, fmt.Errorf("pod %s (UID %s) is not in the simulation", klog.KObj(pod), pod.UID)
	}
	// The cache must be handed back exactly the object it was given.
	if err := s.removePod(e.pod); err != nil {
		return entry{}, fmt.Errorf("removing pod %s from the simulation: %w", klog.KObj(pod), err)
	}
	delete(s.bound, pod.UID)
	s.log(change{entry: e, set: boundSet})
	return e, nil
}

func (s *Simulator) enqueue(e entry) {
	s.pending[e.pod] = e
	s.log(change{entry: e, set: pendingSet, added: true})
}

// drop takes a pod that is not on a node out of its set.
func (s *Simulator) drop(which set, e entry) {
	delete(s.unbound(which), e.pod)
	s.log(change{entry: e, set: which})
}

func (s *Simulator) log(c change) {
	if len(s.forks) > 0 {
		s.journal = append(s.journal, c)
	}
}

// addPod and removePod are the simulation's only changes to the
// scheduler's cache once its nodes are in: each says which node changed
// (to the node classes, see classes.go).
func (s *Simulator) addPod(pod *v1.Pod) error {
	s.nodeClasses.changed(pod.Spec.NodeName)
	return s.cache.AddPod(s.logger, pod)
}

func (s *Simulator) removePod(pod *v1.Pod) error {
	s.nodeClasses.changed(pod.Spec.NodeName)
	return s.cache.RemovePod(s.logger, pod)
}

// sync brings the scheduler's snapshot up to date with the cache; only the
// nodes that changed since the last sync are copied.
func (s *Simulator) sync() error {
	if err := s.cache.UpdateSnapshot(s.logger, s.snapshot); err != nil {
		return err
	}
	s.nodeClasses.synced()
	return nil
}

// Fork marks the state so that Revert can bring it back. Forks nest: the
// planner forks a plan, Consolidation a drain inside it, and a drain a
// savepoint per node.
type Fork struct{ depth int }

// Fork opens a fork of the current state.
func (s *Simulator) Fork() Fork {
	m := mark{journal: len(s.journal), next: map[*scheduler]int{}}
	for _, sc := range s.schedulers {
		m.next[sc] = sc.next
		if sc.hints != nil {
			if m.hints == nil {
				m.hints = map[*scheduler]hint.Checkpoint{}
			}
			m.hints[sc] = sc.hints.Checkpoint()
		}
	}
	s.forks = append(s.forks, m)
	return Fork{depth: len(s.forks)}
}

// Commit keeps the changes made since f (and since any fork opened inside
// it): they become part of the enclosing fork, or of the state itself.
func (s *Simulator) Commit(f Fork) {
	s.close(f)
	if len(s.forks) == 0 {
		s.journal = s.journal[:0]
	}
}

// Revert undoes every change made since f, newest first, and closes f and
// the forks opened inside it.
func (s *Simulator) Revert(f Fork) error {
	m := s.close(f)
	for sc, c := range m.hints {
		sc.hints.Restore(c)
	}
	for sc, next := range m.next {
		sc.next = next
	}
	undo := s.journal[m.journal:]
	s.journal = s.journal[:m.journal]
	forks := s.forks
	s.forks = nil // undoing is not itself logged
	defer func() { s.forks = forks }()
	for i := len(undo) - 1; i >= 0; i-- {
		c := undo[i]
		var err error
		switch {
		case c.claim != nil:
			s.dra.claims.undo(*c.claim)
		case c.set != boundSet && c.added:
			delete(s.unbound(c.set), c.pod)
		case c.set != boundSet:
			s.unbound(c.set)[c.pod] = c.entry
		case c.added:
			_, err = s.unbind(c.pod)
		default:
			err = s.bind(c.entry)
		}
		if err != nil {
			return fmt.Errorf("reverting the simulation: %w", err)
		}
	}
	return s.sync()
}

// close closes f and the forks inside it, and returns f's mark.
func (s *Simulator) close(f Fork) mark {
	if f.depth < 1 || f.depth > len(s.forks) {
		panic(fmt.Sprintf("simulator: fork %d is not open (%d open)", f.depth, len(s.forks)))
	}
	mark := s.forks[f.depth-1]
	s.forks = s.forks[:f.depth-1]
	return mark
}

// Bound lists the pods bound to nodes, in the order they arrived.
func (s *Simulator) Bound() []*v1.Pod {
	return pods(s.bound)
}

// Runs says whether pod (by UID) is bound to a node in the simulation:
// not once it was moved (its replacement has a UID of its own) or evicted.
func (s *Simulator) Runs(pod *v1.Pod) bool {
	_, ok := s.bound[pod.UID]
	return ok
}

// Pending lists the pods waiting for a node, in the order they arrived.
func (s *Simulator) Pending() []*v1.Pod {
	return pods(s.pending)
}

// State is the simulated cluster as a snapshot: its nodes and other
// objects, and its pods (bound, pending and finished) in arrival order.
// The objects are shared with the simulation, not copies.
func (s *Simulator) State() *snapshot.Snapshot {
	out := s.objects
	all := make([]entry, 0, len(s.bound)+len(s.pending)+len(s.finished))
	for _, e := range s.bound {
		all = append(all, e)
	}
	for _, e := range s.pending {
		all = append(all, e)
	}
	for _, e := range s.finished {
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	out.Pods = make([]*v1.Pod, len(all))
	for i, e := range all {
		out.Pods[i] = e.pod
	}
	if s.dra != nil {
		// The claims as the simulation changed them.
		if claims, err := s.dra.claims.List(); err == nil {
			slices.SortFunc(claims, func(a, b *resourceapi.ResourceClaim) int {
				return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
			})
			out.ResourceClaims = claims
		}
	}
	return &out
}

func pods[K comparable](m map[K]entry) []*v1.Pod {
	es := make([]entry, 0, len(m))
	for _, e := range m {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]*v1.Pod, len(es))
	for i, e := range es {
		out[i] = e.pod
	}
	return out
}
