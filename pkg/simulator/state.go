package simulator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
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
	if err := s.cache.AddPod(s.logger, pod); err != nil {
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
	if err := s.cache.RemovePod(s.logger, e.pod); err != nil {
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

// sync brings the scheduler's snapshot up to date with the cache; only the
// nodes that changed since the last sync are copied.
func (s *Simulator) sync() error {
	return s.cache.UpdateSnapshot(s.logger, s.snapshot)
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

// Move applies an accepted move: the pod leaves its node and a replacement
// (a copy with a new UID) is bound to target. It returns the replacement.
// The pod's claims made from templates go with it and the replacement's
// are made and allocated on target, as the cluster's controllers and the
// scheduler's DynamicResources plugin would.
func (s *Simulator) Move(ctx context.Context, pod *v1.Pod, target string) (*v1.Pod, error) {
	if _, err := s.snapshot.NodeInfos().Get(target); err != nil {
		return nil, fmt.Errorf("moving pod %s: target node %q is not in the simulation", klog.KObj(pod), target)
	}
	e, err := s.unbind(pod)
	if err != nil {
		return nil, err
	}
	s.releaseClaims(e.pod)
	s.replacements++
	r := e.pod.DeepCopy()
	r.UID = types.UID(fmt.Sprintf("%s-r%d", pod.UID, s.replacements))
	r.Status = v1.PodStatus{Phase: v1.PodPending}
	if r, err = s.withClaims(r); err != nil {
		return nil, err
	}
	if sc, err := s.schedulerOf(r); err == nil {
		if err := s.allocateOn(ctx, sc, r, target); err != nil {
			return nil, err
		}
	}
	r.Spec.NodeName = target
	s.seq++
	if err := s.bind(entry{pod: r, seq: s.seq}); err != nil {
		return nil, err
	}
	return r, s.sync()
}

// Evict removes a pod: bound, or as State listed it, pending or finished. A
// replacement, if its owner makes one, is the caller's to Place.
func (s *Simulator) Evict(pod *v1.Pod) error {
	for _, which := range []set{pendingSet, finishedSet} {
		if e, ok := s.unbound(which)[pod]; ok {
			s.drop(which, e)
			return nil
		}
	}
	e, err := s.unbind(pod)
	if err != nil {
		return err
	}
	s.releaseClaims(e.pod)
	return s.sync()
}

// Place schedules a pending pod with its scheduler's profile and binds it:
// the best node by the profile's scores (ties to the node name; see
// Replay for kube-scheduler's own choice), after the Reserve plugins ran
// there (RebalanceHint consumes the hint it followed). It returns the bound
// copy; when no node fits, or the pod's scheduler is not modelled, it
// returns nil and the reason, and the pod stays (or becomes) pending.
func (s *Simulator) Place(ctx context.Context, pod *v1.Pod) (*v1.Pod, string, error) {
	pl, err := s.place(ctx, pod, nil, nil, false)
	return pl.bound, pl.diagnosis, err
}

// PlaceAsScheduled is Place with kube-scheduler's own choice (see Replay):
// it filters nodes, from where its last search stopped, only until it has
// the feasible nodes the profile's percentageOfNodesToScore lets it score,
// and breaks ties with random. Whether a pod fits somewhere is the same;
// where it lands is what the scheduler might have chosen.
func (s *Simulator) PlaceAsScheduled(ctx context.Context, pod *v1.Pod, random *rand.Rand) (*v1.Pod, string, error) {
	pl, err := s.place(ctx, pod, random, nil, false)
	return pl.bound, pl.diagnosis, err
}

// placement is the outcome of place.
type placement struct {
	bound     *v1.Pod // nil: still pending
	diagnosis string  // why it is pending
	// certain: the pod's scheduler scored every feasible node and one
	// scored highest, so kube-scheduler would have chosen the same node.
	certain bool
	score   int64 // 0 when the hint alone decided (see hinted)
	// candidates: the nodes its scheduler, not steered, may have chosen
	// instead when not certain (Prediction.Candidates); without random only.
	candidates []string
}

// place is Place; with random set, the node is chosen as kube-scheduler
// chooses it (see Replay); drained nodes carry the drain taint. The
// candidates are listed only when asked for (withCandidates).
func (s *Simulator) place(ctx context.Context, pod *v1.Pod, random *rand.Rand, drained sets.Set[string], withCandidates bool) (placement, error) {
	if pod.Spec.NodeName != "" {
		return placement{}, fmt.Errorf("placing pod %s: it is already bound to %s", klog.KObj(pod), pod.Spec.NodeName)
	}
	e, known := s.pending[pod]
	if !known {
		s.seq++
		e = entry{pod: pod, seq: s.seq}
	}
	sc, err := s.schedulerOf(pod)
	if errors.Is(err, ErrUnknownScheduler) {
		// Nobody here knows where its scheduler would put it.
		if !known {
			s.enqueue(e)
		}
		return placement{diagnosis: err.Error()}, nil
	}
	// The resourceclaim controller makes a new pod's claims from their
	// templates before the scheduler sees it.
	if pod, err = s.withClaims(pod); err != nil {
		return placement{}, err
	}
	c, hinted, err := s.hinted(ctx, sc, pod, drained)
	if err == nil && !hinted {
		c, err = s.schedule(ctx, sc, pod, random, drained)
	}
	if err != nil {
		return placement{}, err
	}
	if len(c.scores) == 0 {
		if !known {
			s.enqueue(e)
		}
		return placement{diagnosis: c.diagnosis}, nil
	}
	node, ties, score := choose(c.scores, random)
	if st := sc.framework.RunReservePluginsReserve(ctx, c.state, pod, node); !st.IsSuccess() {
		return placement{}, fmt.Errorf("reserving %s for pod %s: %w", node, klog.KObj(pod), st.AsError())
	}
	bound := pod.DeepCopy()
	bound.Spec.NodeName = node
	bound.Status = v1.PodStatus{Phase: v1.PodRunning, ResourceClaimStatuses: pod.Status.ResourceClaimStatuses}
	if known {
		s.drop(pendingSet, e)
	}
	if err := s.bind(entry{pod: bound, seq: e.seq}); err != nil {
		return placement{}, err
	}
	pl := placement{bound: bound, score: score, certain: ties == 1 && (c.hinted || !c.partial && sc.scoresAll(c.feasible, c.considered))}
	if withCandidates && random == nil && !pl.certain && !sc.steered {
		pl.candidates = sc.candidates(c.scores, sc.scoresAll(c.feasible, c.considered), c.considered)
	}
	return pl, s.sync()
}

// choose picks the node among scored ones: the best score, ties to the
// node name, or with random set at random, as kube-scheduler does. It
// returns how many nodes share the best score, and that score.
func choose(scores []fwk.NodePluginScores, random *rand.Rand) (string, int, int64) {
	best, ties := 0, 1
	for i := 1; i < len(scores); i++ {
		switch {
		case scores[i].TotalScore > scores[best].TotalScore:
			best, ties = i, 1
		case scores[i].TotalScore < scores[best].TotalScore:
		case random != nil:
			// Reservoir sampling over the ties, as kube-scheduler's selectHost.
			ties++
			if random.IntN(ties) == 0 {
				best = i
			}
		default:
			ties++
			if scores[i].Name < scores[best].Name {
				best = i
			}
		}
	}
	return scores[best].Name, ties, scores[best].TotalScore
}

// Leaving tells the RebalanceHint plugin of the pod's scheduler that the pod
// is going away, as that scheduler's pod informer would, so that the
// replacement follows the hint the pod carries. A scheduler that does not
// follow hints ignores it. It does not remove the pod.
func (s *Simulator) Leaving(pod *v1.Pod) {
	if sc, err := s.schedulerOf(pod); err == nil && sc.hints != nil {
		sc.hints.PodLeaving(s.logger, pod)
	}
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

// Clientset is a fake clientset serving every object of snap, for code that
// reads the cluster through the API (the descheduler, the scheduler
// framework's informers, policy loading). Objects are added one by one: the
// fake's constructor panics on an object it cannot store.
func Clientset(snap *snapshot.Snapshot) (*fake.Clientset, error) {
	client := fake.NewClientset()
	for _, o := range snap.Objects() {
		if err := client.Tracker().Add(o); err != nil {
			return nil, fmt.Errorf("seeding the fake API with %T: %w", o, err)
		}
	}
	return client, nil
}

// Sandbox is what the descheduler's plugins read besides the pods on a
// node: a clientset with the PriorityClasses of st, a State of the
// simulation (plugins ask the API only for those), and informers whose
// stores hold st. The informers are never started; their stores are filled
// directly, so listing 150,000 pods costs pointers, not copies, and nothing
// is read before it is all there.
func Sandbox(st *snapshot.Snapshot) (*fake.Clientset, informers.SharedInformerFactory, error) {
	client, err := Clientset(&snapshot.Snapshot{PriorityClasses: st.PriorityClasses})
	if err != nil {
		return nil, nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	core, storage := factory.Core().V1(), factory.Storage().V1()
	for _, step := range []struct {
		inf   cache.SharedIndexInformer
		items []any
	}{
		{core.Nodes().Informer(), anys(st.Nodes)},
		{core.Pods().Informer(), anys(st.Pods)},
		{core.Namespaces().Informer(), anys(st.Namespaces)},
		{core.PersistentVolumeClaims().Informer(), anys(st.PersistentVolumeClaims)},
		{core.PersistentVolumes().Informer(), anys(st.PersistentVolumes)},
		{storage.StorageClasses().Informer(), anys(st.StorageClasses)},
		{factory.Policy().V1().PodDisruptionBudgets().Informer(), anys(st.PodDisruptionBudgets)},
		{factory.Scheduling().V1().PriorityClasses().Informer(), anys(st.PriorityClasses)},
	} {
		for _, it := range step.items {
			if err := step.inf.GetIndexer().Add(it); err != nil {
				return nil, nil, err
			}
		}
	}
	return client, factory, nil
}

func anys[T any](in []T) []any {
	out := make([]any, len(in))
	for i, v := range in {
		out[i] = v
	}
	return out
}
