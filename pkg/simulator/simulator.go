package simulator

import (
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/utils/clock"
)

// Simulator is the one simulated cluster: the nodes and pods of a snapshot in
// kube-scheduler's own cache, the schedulers that place pods on it (each
// pod is placed by the profile its spec.schedulerName names), and the
// snapshot's other objects. Every what-if forks it (Fork), changes it (Move,
// Evict, Place) and keeps or reverts the changes (Commit, Revert).
// It is not safe for concurrent use.
type Simulator struct {
	logger     klog.Logger
	clock      clock.PassiveClock
	schedulers map[string]*scheduler
	names      []string // schedulers in configuration order
	cache      internalcache.Cache
	snapshot   *internalcache.Snapshot
	optIn      OptIn
	namespaces map[string]*v1.Namespace
	loads      loads
	// held are nodes every placement treats as carrying the drain taint
	// (see Hold).
	held sets.Set[string]
	// keepCodes: the next cycle keeps its filters' status codes (Resolvable).
	keepCodes bool
	// draBacked says which resources DRA devices may back (draBacked).
	draBacked func(v1.ResourceName) bool
	// nodeClasses remembers the class of each node (see classes.go);
	// byClassCycles counts the cycles filtered and scored by class.
	nodeClasses   classCache
	byClassCycles int
	// cycleLists are schedule's lists of the nodes of a cycle, reused
	// from cycle to cycle (cycles do not nest, and a cycle's lists are
	// not read after it).
	cycleLists struct {
		feasible, reps      []fwk.NodeInfo
		reasons             []*fwk.Status
		slots, repSlots     []int
		repClasses, scoreOf []int
		tainted             []bool
	}
	// places are the nodes' places in the node list, by name, for the
	// list whose first element and length placesOf says (see placeOf).
	places   map[string]int
	placesOf struct {
		first fwk.NodeInfo
		n     int
	}
	// dra is the DRA manager the schedulers read claims through, with the
	// simulation's own changes (see dra.go); nil when DRA is off.
	dra *draManager
	// podsOn remembers PodsOn's sorted lists by node name.
	podsOn map[string]podsOnNode

	state
}

// Hold makes every placement from now on treat nodes as carrying the drain
// taint, as the executor taints the nodes a plan holds empty for its cycle
// (plan.Plan.HeldEmpty); Hold(nil) lifts it. It is not part of a fork: the
// caller lifts it.
func (s *Simulator) Hold(nodes sets.Set[string]) {
	s.held = nodes
}

// Now is the simulation's time (WithClock).
func (s *Simulator) Now() time.Time { return s.clock.Now() }

// PodsOn lists the pods the simulation has on a node, in a stable order.
// The caller owns the list. The order is remembered per node and its
// generation in kube-scheduler's cache, which moves on at every change to
// the node or its pods: the plugins list every node's pods again for each
// strategy, and most nodes have not changed since.
func (s *Simulator) PodsOn(node string) ([]*v1.Pod, error) {
	ni, err := s.snapshot.NodeInfos().Get(node)
	if err != nil {
		return nil, err
	}
	if c, ok := s.podsOn[node]; ok && c.node == ni && c.generation == ni.GetGeneration() {
		return slices.Clone(c.pods), nil
	}
	pods := make([]*v1.Pod, 0, len(ni.GetPods()))
	for _, pi := range ni.GetPods() {
		pods = append(pods, pi.GetPod())
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	if s.podsOn == nil {
		s.podsOn = map[string]podsOnNode{}
	}
	s.podsOn[node] = podsOnNode{node: ni, generation: ni.GetGeneration(), pods: pods}
	return slices.Clone(pods), nil
}

// podsOnNode is PodsOn's list of a node's pods at one generation of it.
type podsOnNode struct {
	node       fwk.NodeInfo
	generation int64
	pods       []*v1.Pod
}

// Node returns the simulation's view of a node: its object and requested resources.
func (s *Simulator) Node(name string) (fwk.NodeInfo, error) {
	return s.snapshot.NodeInfos().Get(name)
}

// Nodes returns every node of the simulation.
func (s *Simulator) Nodes() ([]fwk.NodeInfo, error) {
	return s.snapshot.NodeInfos().List()
}
