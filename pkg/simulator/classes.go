package simulator

import (
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// Node classes: nodes a pod's profile cannot tell apart.
//
// For most pods a scheduling cycle looks at a node only through its labels,
// taints, allocatable, what its pods request and the images it holds: nodes
// alike in all of that get the same filter verdict and the same scores. The
// simulator then runs the framework on the first node of each class and
// gives its result to every node of the class, which is the framework's own
// answer at a fraction of the cost where many nodes are alike (a fleet of
// one instance type, its empty nodes). Whether a cycle may do so is the
// framework's to say: after PreFilter, and again after PreScore, every
// plugin that did not skip itself must be one of these, which read nothing
// else of a node. Any other plugin at work (inter-pod affinity, topology
// spread, volumes, ports, DRA, LoadAware, a hint's promise or score) and
// the cycle runs on every node. (NodeResourcesFit also counts extended
// resources backed by DRA devices, from ResourceSlices: a snapshot carries
// none yet; when it does, a node's devices belong in its class.)
var (
	filtersByClass = sets.New(names.NodeUnschedulable, names.NodeName, names.NodeAffinity, names.NodeResourcesFit, names.TaintToleration)
	scoresByClass  = sets.New(names.NodeResourcesFit, names.NodeResourcesBalancedAllocation, names.ImageLocality, names.TaintToleration, names.NodeAffinity)
	// scoreNothingUnfiltered score 0 on every node for a pod whose PreFilter
	// they skipped (DynamicResources: a pod without claims), though they
	// have no PreScore to skip their Score.
	scoreNothingUnfiltered = sets.New(names.DynamicResources)
)

// nodeNameLabel is the one label no two nodes share; classes leave it out,
// so a pod or profile that selects by it is not scheduled by class.
const nodeNameLabel = v1.LabelHostname

// classes are the node classes of one cycle: for each node of the cycle's
// list, the index of its class's first node (-1 for a node the cycle does
// not filter through the framework: one carrying the drain taint), and
// those first nodes.
type classes struct {
	first []int
	reps  []int
	// ids are the classes of reps, by the same index: a class's id names
	// what its nodes are alike in for the simulation's life, so the
	// runner remembers answers by it (see memo.go).
	ids []int
	// unknown are the reps (by index) whose verdict is not remembered
	// (filterByClass).
	unknown []int
}

// classCache remembers the class of the node at each place of the node
// list, with the node's generation in kube-scheduler's cache, which every
// change to the node or its pods moves on: a cycle computes the class only
// of nodes that changed.
type classCache struct {
	at  []nodeClass
	ids map[string]int
	// seen, indexed by class: the class's first node in the current
	// cycle, valid where it holds the cycle's number.
	seen  []seenClass
	cycle int
	// classes are the current cycle's, their lists reused from cycle to
	// cycle (cycles do not nest).
	classes classes
	// unlike counts down the cycles that do not look for classes among
	// unlikeOf nodes (a cycle's node list, as PreFilter narrowed it) after
	// one found too many there.
	unlike, unlikeOf int
}

// unlikeFor is how many cycles do not look for classes after one found
// too many. Nodes become alike slowly (a drain empties one node at a time)
// and either way a cycle gives the framework's answer: this only saves the
// walk over nodes that are rarely alike.
const unlikeFor = 15

type seenClass struct{ cycle, first int }

type nodeClass struct {
	node       fwk.NodeInfo
	generation int64
	id         int
}

// classOf is the class of ni, the i-th node of the list: equal for nodes
// alike in everything the plugins of filtersByClass and scoresByClass read.
func (cc *classCache) classOf(i int, ni fwk.NodeInfo) int {
	if i < len(cc.at) && cc.at[i].node == ni && cc.at[i].generation == ni.GetGeneration() {
		return cc.at[i].id
	}
	if cc.ids == nil {
		cc.ids = map[string]int{}
	}
	key := classKey(ni)
	id, ok := cc.ids[key]
	if !ok {
		id = len(cc.ids)
		cc.ids[key] = id
		cc.seen = append(cc.seen, seenClass{})
	}
	for len(cc.at) <= i {
		cc.at = append(cc.at, nodeClass{})
	}
	cc.at[i] = nodeClass{node: ni, generation: ni.GetGeneration(), id: id}
	return id
}

// writeLabels writes n's labels but the hostname (nodeNameLabel), sorted,
// each ended by a NUL.
func writeLabels(b *strings.Builder, n *v1.Node) {
	labels := make([]string, 0, len(n.Labels))
	for k, v := range n.Labels {
		if k != nodeNameLabel {
			labels = append(labels, k+"="+v)
		}
	}
	slices.Sort(labels)
	for _, l := range labels {
		b.WriteString(l)
		b.WriteByte(0)
	}
}

func classKey(ni fwk.NodeInfo) string {
	var b strings.Builder
	n := ni.Node()
	writeLabels(&b, n)
	b.WriteByte(1)
	for _, t := range n.Spec.Taints {
		b.WriteString(t.Key + "=" + t.Value + ":" + string(t.Effect))
		b.WriteByte(0)
	}
	b.WriteByte(1)
	b.WriteString(strconv.FormatBool(n.Spec.Unschedulable))
	for _, r := range []fwk.Resource{ni.GetAllocatable(), ni.GetRequested(), ni.GetNonZeroRequested()} {
		for _, q := range []int64{r.GetMilliCPU(), r.GetMemory(), r.GetEphemeralStorage(), int64(r.GetAllowedPodNumber())} {
			b.WriteByte(1)
			b.WriteString(strconv.FormatInt(q, 10))
		}
		scalars := make([]string, 0, len(r.GetScalarResources()))
		for name, q := range r.GetScalarResources() {
			scalars = append(scalars, string(name)+"="+strconv.FormatInt(q, 10))
		}
		slices.Sort(scalars)
		b.WriteByte(1)
		b.WriteString(strings.Join(scalars, ","))
	}
	b.WriteByte(1)
	b.WriteString(strconv.Itoa(len(ni.GetPods())))
	images := make([]string, 0, len(ni.GetImageStates()))
	for name, st := range ni.GetImageStates() {
		images = append(images, name+"="+strconv.FormatInt(st.Size, 10)+"/"+strconv.Itoa(st.NumNodes))
	}
	slices.Sort(images)
	b.WriteByte(1)
	b.WriteString(strings.Join(images, ","))
	return b.String()
}

// byClass groups nodes into classes for a cycle of pod, when the cycle may
// filter by class (see filtersByClass); nil otherwise. Nodes tainted (by
// place in nodes; nil: none) are filtered by the caller, one by one.
func (s *Simulator) byClass(sc *scheduler, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, tainted []bool) *classes {
	if !sc.classes || !alikeToPod(pod) || !onlyThese(sc.filters, state.GetSkipFilterPlugins(), filtersByClass) {
		return nil
	}
	cc := &s.nodeClasses
	if cc.unlike > 0 && cc.unlikeOf == len(nodes) {
		// These nodes were too unlike a moment ago: walking them again
		// costs more than it is likely to save.
		cc.unlike--
		return nil
	}
	cc.cycle++
	cl := &cc.classes
	cl.first, cl.reps, cl.ids = reuse(&cl.first, len(nodes)), cl.reps[:0], cl.ids[:0]
	most := len(nodes) * 3 / 4 // more classes are not worth the bookkeeping
	for i, ni := range nodes {
		if tainted != nil && tainted[i] {
			cl.first[i] = -1
			continue
		}
		id := cc.classOf(i, ni)
		seen := &cc.seen[id]
		if seen.cycle != cc.cycle {
			if len(cl.reps) == most {
				cc.unlike, cc.unlikeOf = unlikeFor, len(nodes)
				return nil
			}
			*seen = seenClass{cycle: cc.cycle, first: i}
			cl.reps, cl.ids = append(cl.reps, i), append(cl.ids, id)
		}
		cl.first[i] = seen.first
	}
	return cl
}

// onlyThese says whether every enabled plugin is skipped or one of allowed.
func onlyThese(enabled []string, skipped, allowed sets.Set[string]) bool {
	for _, name := range enabled {
		if !allowed.Has(name) && !skipped.Has(name) {
			return false
		}
	}
	return true
}

// scoresAlike says whether every Score plugin of a cycle past PreScore
// scores alike nodes alike: it skipped itself, is one of scoresByClass, or
// scores nothing for a pod whose PreFilter it skipped.
func scoresAlike(scores []string, state fwk.CycleState) bool {
	skipped, unfiltered := state.GetSkipScorePlugins(), state.GetSkipFilterPlugins()
	for _, name := range scores {
		alike := skipped.Has(name) || scoresByClass.Has(name) || scoreNothingUnfiltered.Has(name) && unfiltered.Has(name)
		if !alike {
			return false
		}
	}
	return true
}

// alikeToPod says whether pod asks nothing that tells alike nodes apart:
// it names no node (by the hostname label or by field), and has no inter-pod
// affinity or topology spread constraints, whose plugins would not skip.
func alikeToPod(pod *v1.Pod) bool {
	if pod.Spec.NodeName != "" || len(pod.Spec.TopologySpreadConstraints) > 0 {
		return false
	}
	if _, ok := pod.Spec.NodeSelector[nodeNameLabel]; ok {
		return false
	}
	a := pod.Spec.Affinity
	if a == nil {
		return true
	}
	if a.PodAffinity != nil || a.PodAntiAffinity != nil {
		return false
	}
	return a.NodeAffinity == nil || !namesNodes(a.NodeAffinity)
}

// alikeToProfile says whether prof's NodeAffinity adds no affinity that
// names a node.
func alikeToProfile(prof *config.KubeSchedulerProfile) bool {
	for _, pc := range prof.PluginConfig {
		if args, ok := pc.Args.(*config.NodeAffinityArgs); ok && args.AddedAffinity != nil && namesNodes(args.AddedAffinity) {
			return false
		}
	}
	return true
}

// namesNodes says whether a node affinity selects by the hostname label or
// by a node's fields.
func namesNodes(na *v1.NodeAffinity) bool {
	var terms []v1.NodeSelectorTerm
	if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = append(terms, na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms...)
	}
	for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		terms = append(terms, p.Preference)
	}
	for _, t := range terms {
		if len(t.MatchFields) > 0 {
			return true
		}
		for _, r := range t.MatchExpressions {
			if r.Key == nodeNameLabel {
				return true
			}
		}
	}
	return false
}
