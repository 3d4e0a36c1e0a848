package simulator

import (
	"encoding/binary"
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

// classes are the node classes of one cycle: the first node of each (by
// its index in the cycle's node list), its class, and its class's nodes.
// A node the cycle does not filter through the framework (one carrying
// the drain taint) is in no class.
type classes struct {
	reps []int
	// ids are the classes of reps, by the same index: a class's id names
	// what its nodes are alike in for the simulation's life, so the
	// runner remembers answers by it (see memo.go).
	ids []int
	// members are the nodes of each class, by index in the cycle's node
	// list, ascending (reps[k] is members[k][0]).
	members [][]int
	// unknown are the reps (by index) whose verdict is not remembered
	// (filterByClass).
	unknown []int
}

// classCache keeps the class of each node, by its place in the snapshot's
// node list, and the nodes of each class. A node's class changes only
// when its pods do, and the simulator changes them in one place (state.go's
// addPod and removePod), which names the node here: a cycle computes the
// class only of those nodes, and one over the whole list reads the classes
// as they are kept, without walking the nodes. A change counts once the
// snapshot shows it (synced), so a cycle between the two still sees the
// node as it was.
type classCache struct {
	// at is the class of the node at each place of the list of; stale are
	// the nodes whose classes changed since the last cycle, and changes
	// those changed since the last sync.
	at             []int
	of             listOf
	stale, changes []string
	// live are the classes with nodes, and by the same index, the places
	// of their nodes, ascending, and the first of those: a cycle over the
	// whole list takes them as its classes. livePlace is each class's
	// index in live (-1: it has no node).
	live        []int
	liveMembers [][]int
	liveFirst   []int
	livePlace   []int
	// kindAt is the kind of the node at each place (-1: not known): a
	// class is a kind and what the node's pods request (classOf).
	kindAt []int
	kinds  map[string]int
	// forget: at sync, forget every class (too many changes to list).
	forget bool
	ids    map[string]int
	// seen, indexed by class: the class's place among the current cycle's
	// classes, valid where it holds the cycle's number.
	seen  []seenClass
	cycle int
	// classes are the current cycle's when it takes the classes as kept
	// (their lists are live's), and walked when it walks its nodes (their
	// lists reused from cycle to cycle: cycles do not nest).
	classes, walked classes
	// key and names are classOf's, reused.
	key   []byte
	names []string
	// unlike counts down the cycles that do not look for classes among
	// unlikeOf nodes (a cycle's node list, as PreFilter narrowed it) after
	// one found too many there.
	unlike, unlikeOf int
}

// listOf names a node list by its first node and length: the simulator's
// list changes only when its nodes do (load).
type listOf struct {
	first fwk.NodeInfo
	n     int
}

// unlikeFor is how many cycles do not look for classes after one found
// too many. Nodes become alike slowly (a drain empties one node at a time)
// and either way a cycle gives the framework's answer: this only saves the
// walk over nodes that are rarely alike.
const unlikeFor = 15

type seenClass struct{ cycle, k int }

// changed says that node's pods changed in the scheduler's cache.
// Beyond a quarter of the list, the classes are all forgotten at the sync.
func (cc *classCache) changed(node string) {
	if cc.forget || len(cc.changes)+len(cc.stale) >= cc.of.n/4 {
		cc.forget, cc.changes = true, cc.changes[:0]
		return
	}
	cc.changes = append(cc.changes, node)
}

// synced says that the snapshot shows the cache's changes.
func (cc *classCache) synced() {
	if cc.forget {
		cc.at, cc.stale = nil, cc.stale[:0]
	} else {
		cc.stale = append(cc.stale, cc.changes...)
	}
	cc.changes, cc.forget = cc.changes[:0], false
}

// ready readies the cache for a cycle over all, the snapshot's node list:
// the nodes that changed since the last move to their classes now.
func (cc *classCache) ready(s *Simulator, all []fwk.NodeInfo) {
	if of := (listOf{first: all[0], n: len(all)}); cc.of != of {
		cc.kindAt, cc.at, cc.of = unknown(cc.kindAt, len(all)), nil, of
	}
	if cc.at == nil {
		cc.at, cc.stale = unknown(cc.at, len(all)), cc.stale[:0]
		for _, id := range cc.live {
			cc.livePlace[id] = -1
		}
		cc.live, cc.liveMembers, cc.liveFirst = cc.live[:0], cc.liveMembers[:0], cc.liveFirst[:0]
		for i, ni := range all {
			cc.join(i, cc.classOf(i, ni))
		}
		return
	}
	for _, name := range cc.stale {
		if i, ok := s.placeOf(all, name); ok {
			cc.leave(i, cc.at[i])
			cc.join(i, cc.classOf(i, all[i]))
		}
	}
	cc.stale = cc.stale[:0]
}

// join adds the node at place i to class id.
func (cc *classCache) join(i, id int) {
	cc.at[i] = id
	k := cc.livePlace[id]
	if k < 0 {
		cc.livePlace[id] = len(cc.live)
		cc.live, cc.liveMembers, cc.liveFirst = append(cc.live, id), append(cc.liveMembers, []int{i}), append(cc.liveFirst, i)
		return
	}
	m := cc.liveMembers[k]
	at, _ := slices.BinarySearch(m, i)
	m = slices.Insert(m, at, i)
	cc.liveMembers[k], cc.liveFirst[k] = m, m[0]
}

// leave takes the node at place i out of class id.
func (cc *classCache) leave(i, id int) {
	k := cc.livePlace[id]
	m := cc.liveMembers[k]
	if at, ok := slices.BinarySearch(m, i); ok {
		m = slices.Delete(m, at, at+1)
	}
	if len(m) > 0 {
		cc.liveMembers[k], cc.liveFirst[k] = m, m[0]
		return
	}
	// The last class takes its place.
	last := len(cc.live) - 1
	cc.livePlace[cc.live[last]] = k
	cc.live[k], cc.liveMembers[k], cc.liveFirst[k] = cc.live[last], cc.liveMembers[last], cc.liveFirst[last]
	cc.liveMembers[last] = nil // a class of the past keeps no list
	cc.live, cc.liveMembers, cc.liveFirst = cc.live[:last], cc.liveMembers[:last], cc.liveFirst[:last]
	cc.livePlace[id] = -1
}

// unknown is buf resized to n, every entry -1 (not known).
func unknown(buf []int, n int) []int {
	buf = slices.Grow(buf[:0], n)[:n]
	for i := range buf {
		buf[i] = -1
	}
	return buf
}

// classOf computes the class of ni, the node at place i of the list: equal for
// nodes alike in everything the plugins of filtersByClass and scoresByClass
// read. That is the node's kind (what of it the simulation never changes)
// and what its pods request.
func (cc *classCache) classOf(i int, ni fwk.NodeInfo) int {
	if cc.ids == nil {
		cc.ids, cc.kinds = map[string]int{}, map[string]int{}
	}
	if cc.kindAt[i] < 0 {
		key := kindKey(ni, &cc.names)
		kind, ok := cc.kinds[key]
		if !ok {
			kind = len(cc.kinds)
			cc.kinds[key] = kind
		}
		cc.kindAt[i] = kind
	}
	cc.key = podsKey(cc.key[:0], cc.kindAt[i], ni, &cc.names)
	id, ok := cc.ids[string(cc.key)]
	if !ok {
		id = len(cc.ids)
		cc.ids[string(cc.key)] = id
		cc.seen = append(cc.seen, seenClass{})
		cc.livePlace = append(cc.livePlace, -1)
	}
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

// kindKey is what of a node the simulation never changes (it adds or
// removes pods only): labels, taints, unschedulable, allocatable and
// images. names is a list to reuse.
func kindKey(ni fwk.NodeInfo, names *[]string) string {
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
	b.Write(appendResource(nil, ni.GetAllocatable(), names))
	images := make([]string, 0, len(ni.GetImageStates()))
	for name, st := range ni.GetImageStates() {
		images = append(images, name+"="+strconv.FormatInt(st.Size, 10)+"/"+strconv.Itoa(st.NumNodes))
	}
	slices.Sort(images)
	b.WriteByte(1)
	b.WriteString(strings.Join(images, ","))
	return b.String()
}

// podsKey appends to key the node's kind and what its pods request, in
// full and as the scorers count it (non-zero), and how many they are.
// names is a list to reuse.
func podsKey(key []byte, kind int, ni fwk.NodeInfo, names *[]string) []byte {
	key = binary.AppendUvarint(key, uint64(kind))
	key = appendResource(key, ni.GetRequested(), names)
	key = appendResource(key, ni.GetNonZeroRequested(), names)
	return binary.AppendUvarint(key, uint64(len(ni.GetPods())))
}

// appendResource appends r's quantities to key, its scalar resources
// sorted by name.
func appendResource(key []byte, r fwk.Resource, names *[]string) []byte {
	for _, q := range []int64{r.GetMilliCPU(), r.GetMemory(), r.GetEphemeralStorage(), int64(r.GetAllowedPodNumber())} {
		key = binary.AppendVarint(key, q)
	}
	scalars := r.GetScalarResources()
	*names = (*names)[:0]
	for name := range scalars {
		*names = append(*names, string(name))
	}
	slices.Sort(*names)
	for _, name := range *names {
		key = append(key, name...)
		key = append(key, 0)
		key = binary.AppendVarint(key, scalars[v1.ResourceName(name)])
	}
	return append(key, 1)
}

// byClass groups f's nodes into classes for a cycle of pod, when the
// cycle may filter by class (see filtersByClass); nil otherwise. Nodes
// with the drain taint (f.tainted) are filtered by the caller, one by one.
func (s *Simulator) byClass(sc *scheduler, state fwk.CycleState, pod *v1.Pod, f *cycleFilter) *classes {
	if !sc.classes || !alikeToPod(pod) || !onlyThese(sc.filters, state.GetSkipFilterPlugins(), filtersByClass) {
		return nil
	}
	cc, nodes := &s.nodeClasses, f.nodes
	if cc.unlike > 0 && cc.unlikeOf == len(nodes) {
		// These nodes were too unlike a moment ago: walking them again
		// costs more than it is likely to save.
		cc.unlike--
		return nil
	}
	cc.ready(s, f.all)
	most := len(nodes) * 3 / 4 // more classes are not worth the bookkeeping
	if f.slots == nil && f.tainted == nil {
		// Every node of the list: its classes as kept.
		if len(cc.live) > most {
			cc.unlike, cc.unlikeOf = unlikeFor, len(nodes)
			return nil
		}
		cc.classes.reps, cc.classes.ids, cc.classes.members = cc.liveFirst, cc.live, cc.liveMembers
		return &cc.classes
	}
	cl := &cc.walked
	cl.reps, cl.ids, cl.members = cl.reps[:0], cl.ids[:0], cl.members[:cap(cl.members)]
	cc.cycle++
	for i := range nodes {
		if f.tainted != nil && f.tainted[i] {
			continue
		}
		id := cc.at[f.slot(i)]
		seen := &cc.seen[id]
		if seen.cycle != cc.cycle {
			k := len(cl.reps)
			if k == most {
				cc.unlike, cc.unlikeOf = unlikeFor, len(nodes)
				return nil
			}
			*seen = seenClass{cycle: cc.cycle, k: k}
			if k == len(cl.members) {
				cl.members = append(cl.members, nil)
			}
			cl.reps, cl.ids, cl.members[k] = append(cl.reps, i), append(cl.ids, id), cl.members[k][:0]
		}
		cl.members[seen.k] = append(cl.members[seen.k], i)
	}
	cl.members = cl.members[:len(cl.reps)]
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
