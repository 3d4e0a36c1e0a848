package simulator

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// Eviction is one pod a replay evicts.
type Eviction struct {
	Pod *v1.Pod
	// Hint is the rebalance hint the pod leaves with; nil: none. Only a
	// scheduler that follows hints sees it. A zero Time is stamped with the
	// simulation's clock.
	Hint *hint.Hint
	// Replacement is the pod its owner creates in its place, unbound; nil
	// when nobody recreates it.
	Replacement *v1.Pod
	// Drain says the pod leaves a node being emptied: the node carries the
	// drain taint (wellknown.DrainTaint) from this eviction to the replay's end.
	Drain bool
}

// Replay carries evictions out the way a cluster does: every pod is evicted
// (leaving with its hint, if any), then all the replacements are pending together
// with the pods already pending, and each is placed in kube-scheduler's
// queue order (priority first, then the order they arrived: pods already
// pending before the replacements, replacements in eviction order) by its
// own scheduler. Drained nodes are tainted as the executor taints them. It
// returns where each eviction's replacement landed.
//
// With random nil every placement is the prediction's (ties to the node
// name, every feasible node scored). With a random source it is
// kube-scheduler's own choice: among the sample of feasible nodes the
// profile's percentageOfNodesToScore lets it score, and at random between
// equal best scores; that is how often a plan holds in a real cluster.
func (s *Simulator) Replay(ctx context.Context, evictions []Eviction, random *rand.Rand) ([]Landing, error) {
	for _, e := range evictions {
		// Without a hint the pod still leaves: a sticky pod's replacement
		// returns to its node.
		leaving := e.Pod
		if e.Hint != nil {
			h := *e.Hint
			if h.Time.IsZero() {
				h.Time = s.clock.Now()
			}
			leaving = e.Pod.DeepCopy()
			leaving.Annotations = hint.Without(leaving.Annotations)
			if leaving.Annotations == nil {
				leaving.Annotations = map[string]string{}
			}
			for k, v := range h.Annotations() {
				leaving.Annotations[k] = v
			}
		}
		s.Leaving(leaving)
		if err := s.Evict(e.Pod); err != nil {
			return nil, err
		}
	}
	drained := sets.New[string]()
	for _, e := range evictions {
		if e.Drain {
			drained.Insert(e.Pod.Spec.NodeName)
		}
	}
	queue := s.Pending()
	index := map[*v1.Pod]int{}
	for i, e := range evictions {
		if e.Replacement != nil {
			index[e.Replacement] = i
			queue = append(queue, e.Replacement)
		}
	}
	slices.SortStableFunc(queue, func(a, b *v1.Pod) int {
		return cmp.Compare(corev1helpers.PodPriority(b), corev1helpers.PodPriority(a))
	})
	landed := make([]Landing, len(evictions))
	for _, pod := range queue {
		pl, err := s.place(ctx, pod, random, drained, true)
		if err != nil {
			return nil, err
		}
		if i, ok := index[pod]; ok && pl.bound != nil {
			landed[i] = Landing{Node: pl.bound.Spec.NodeName, Score: pl.score, Certain: pl.certain, Candidates: pl.candidates}
		}
	}
	return landed, nil
}

// Landing is where a replayed eviction's replacement went.
type Landing struct {
	// Node is "" when nobody recreates the pod or its replacement is pending.
	Node string
	// Score is Node's total score for the replacement.
	Score int64
	// Certain says kube-scheduler, with the same cluster and queue, would
	// have chosen Node too: its scheduler scored every feasible node and
	// Node alone scored highest.
	Certain bool
	// Candidates are the nodes a scheduler that does not follow hints may
	// have chosen instead when not Certain (see Prediction.Candidates);
	// with a random source they are not computed.
	Candidates []string
}

// NewReplacement is the pod an owner creates in place of pod: the same
// template under a new name and UID, created at created, without a hint,
// not yet scheduled.
func NewReplacement(pod *v1.Pod, name string, uid types.UID, created time.Time) *v1.Pod {
	r := pod.DeepCopy()
	r.Name, r.UID = name, uid
	r.Annotations = hint.Without(r.Annotations)
	r.CreationTimestamp = metav1.NewTime(created)
	r.Spec.NodeName = ""
	r.Status = v1.PodStatus{Phase: v1.PodPending}
	return r
}

// StartSearches starts every scheduler's next node search at a node drawn
// from random, as kube-scheduler's rotating search may stand at any node
// when a plan is carried out. A Revert puts the searches back.
func (s *Simulator) StartSearches(random *rand.Rand) {
	nodes, err := s.snapshot.NodeInfos().List()
	n := len(nodes)
	if err != nil || n == 0 {
		return // no search to start
	}
	for _, name := range s.names {
		s.schedulers[name].next = random.IntN(n)
	}
}
