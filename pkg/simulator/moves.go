package simulator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Relocate applies an accepted move: the pod leaves its node and a replacement
// (a copy with a new UID) is bound to target. It returns the replacement.
// The pod's claims made from templates go with it and the replacement's
// are made and allocated on target, as the cluster's controllers and the
// scheduler's DynamicResources plugin would.
func (s *Simulator) Relocate(ctx context.Context, pod *v1.Pod, target string) (*v1.Pod, error) {
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
// copy, which shares the pod's metadata and spec (the maps and slices in
// them): neither may be changed afterwards. When no node fits, or the
// pod's scheduler is not modelled, it returns nil and the reason, and the
// pod stays (or becomes) pending.
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
	if c.fit() == 0 {
		if !known {
			s.enqueue(e)
		}
		return placement{diagnosis: c.diagnosis}, nil
	}
	node, ties, score := c.choose(random)
	if st := sc.framework.RunReservePluginsReserve(ctx, c.state, pod, node); !st.IsSuccess() {
		return placement{}, fmt.Errorf("reserving %s for pod %s: %w", node, klog.KObj(pod), st.AsError())
	}
	// The bound pod shares what it does not change with the pending one:
	// pods are only read once made, here and in kube-scheduler's cache (a
	// deep copy here would be a tenth of what an import allocates).
	bound := &v1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}
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
		pl.candidates = sc.candidates(c.list(), sc.scoresAll(c.feasible, c.considered), c.considered)
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
