package simulator

import (
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/pkg/lowerbound"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// ClassBound is ClassLowerBound and how it was reached.
type ClassBound struct {
	// Nodes is the bound: the larger of PerResource and the bound by
	// classes (Result.Nodes), or every node when the classes cannot hold
	// the pods (Result.Infeasible).
	Nodes int
	// PerResource is LowerBound's.
	PerResource int
	// NodeClasses and PodGroups are the classes and groups the problem was
	// built of, before lowerbound merged alike ones.
	NodeClasses, PodGroups int
	Result                 lowerbound.Result
}

// ClassLowerBound is the fewest nodes that could hold the cluster's pods,
// as LowerBound, but counting where each pod may go: nodes fall into
// classes (alike in capacity, labels and taints), pods into groups (alike
// in requests and in the classes they are allowed on), and the bound is
// lowerbound's over them, never less than LowerBound's. It counts the same
// pods (running ones that are not NodeBound, and pending ones) and leaves
// out the same nodes (cordoned ones; tainted ones only hold pods that
// tolerate them).
func (s *Simulator) ClassLowerBound() (int, error) {
	b, err := s.ClassBound()
	return b.Nodes, err
}

// ClassBound is ClassLowerBound with how it was reached.
//
// A pod's classes are those whose nodes its node selector and required
// node affinity select and whose NoSchedule and NoExecute taints it
// tolerates, which have some of each resource it requests and room for
// it, and the class of the node it runs on (it may stay). The bound errs
// low wherever the scheduler may be stricter: what the hostname label or a
// node's fields select is not read (such a term selects every node its
// other requirements do), nor inter-pod affinity, topology spread,
// volumes, ports or a profile's added affinity; resources that no usable
// node has are not counted (a pod requesting one fits nowhere, or the
// scheduler ignores it), nor devices that are not on one node, nor a claim
// that is not allocated; and pods that fit no class at all are left out
// (lowerbound.Result.Unplaceable).
func (s *Simulator) ClassBound() (ClassBound, error) {
	var out ClassBound
	perResource, err := s.LowerBound()
	if err != nil {
		return out, err
	}
	out.PerResource, out.Nodes = perResource, perResource
	nodes, err := s.Nodes()
	if err != nil {
		return out, err
	}
	res := newResourceIndex()
	needs, sigPods, bound := s.podNeeds(nodes, res)
	if len(needs) == 0 {
		return out, nil
	}
	classes, classOf, held := s.boundClasses(nodes, bound, res)
	allowed := allowedClasses(sigPods, classes)
	groups := podGroups(needs, len(res.dims), held, classOf, allowed)
	lc := make([]lowerbound.Class, len(classes))
	for i, c := range classes {
		lc[i] = lowerbound.Class{Capacity: c.capacity, Count: c.count}
	}
	out.NodeClasses, out.PodGroups = len(lc), len(groups)
	out.Result = lowerbound.Compute(lc, groups)
	if out.Result.Infeasible {
		// No placement holds the pods: LowerBound's answer for that.
		out.Nodes = len(nodes)
	} else {
		out.Nodes = max(out.Nodes, out.Result.Nodes)
	}
	return out, nil
}

// resourceIndex numbers the resources ClassBound counts, pod slots first,
// in the order the pods ask them.
type resourceIndex struct {
	dims  []v1.ResourceName
	index map[v1.ResourceName]int
}

func newResourceIndex() *resourceIndex {
	return &resourceIndex{dims: []v1.ResourceName{v1.ResourcePods}, index: map[v1.ResourceName]int{v1.ResourcePods: 0}}
}

// at is r's index, numbering it when it is new.
func (x *resourceIndex) at(r v1.ResourceName) int {
	i, ok := x.index[r]
	if !ok {
		i = len(x.dims)
		x.index[r] = i
		x.dims = append(x.dims, r)
	}
	return i
}

// podNeed is a pod ClassBound places.
type podNeed struct {
	demand []int64 // sparse: index, amount pairs
	sig    int     // the pod's placing signature
	node   string  // the node it runs on ("" pending)
}

// podNeeds lists the pods to place (running ones that are not NodeBound,
// and pending ones) and what each asks, by resource index in res. sigPods
// holds a pod of each placing signature, and bound the NodeBound pods, by
// node.
func (s *Simulator) podNeeds(nodes []fwk.NodeInfo, res *resourceIndex) (needs []podNeed, sigPods []*v1.Pod, bound map[string][]fwk.PodInfo) {
	sigs := map[string]int{}
	local, shared, counted := s.localDevices(), s.sharedCapacities(), sets.New[string]()
	add := func(pod *v1.Pod, node string, asks fwk.Resource) {
		var d []int64
		eachRequest(pod, asks, func(r v1.ResourceName, v int64) {
			d = append(d, int64(res.at(r)), v)
		})
		for r, n := range s.devicesOf(pod, local, counted, shared) {
			if n > 0 {
				d = append(d, int64(res.at(r)), n)
			}
		}
		key := placingKey(pod)
		sig, ok := sigs[key]
		if !ok {
			sig = len(sigPods)
			sigs[key] = sig
			sigPods = append(sigPods, pod)
		}
		needs = append(needs, podNeed{demand: d, sig: sig, node: node})
	}
	bound = map[string][]fwk.PodInfo{}
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			if pod := pi.GetPod(); NodeBound(pod) {
				bound[ni.Node().Name] = append(bound[ni.Node().Name], pi)
			} else {
				add(pod, ni.Node().Name, pi.CalculateResource().Resource)
			}
		}
	}
	for _, pod := range s.Pending() {
		if !NodeBound(pod) {
			add(pod, "", nil)
		}
	}
	return needs, sigPods, bound
}

// boundClass is a class of nodes of ClassBound: their capacity by
// resource index, how many there are, and one of them.
type boundClass struct {
	capacity []int64
	count    int
	node     *v1.Node
}

// boundClasses sorts the usable (not cordoned) nodes into classes by
// capacity (allocatable, devices, less what NodeBound pods take), labels
// but the hostname, and placing taints. classOf is each node's class, and
// held says which resources some usable node has.
func (s *Simulator) boundClasses(nodes []fwk.NodeInfo, bound map[string][]fwk.PodInfo, res *resourceIndex) (classes []boundClass, classOf map[string]int, held []bool) {
	devices := s.devicesByNode()
	ids := map[string]int{}
	classOf = map[string]int{}
	held = make([]bool, len(res.dims))
	var key strings.Builder
	for _, ni := range nodes {
		n := ni.Node()
		if n.Spec.Unschedulable {
			continue
		}
		c := make([]int64, len(res.dims))
		for i, r := range res.dims {
			if q, ok := n.Status.Allocatable[r]; ok {
				c[i] = value(r, q)
			}
			if q, ok := devices[n.Name][r]; ok {
				c[i] += value(r, q)
			}
		}
		for _, pi := range bound[n.Name] {
			c[0]--
			eachRequest(pi.GetPod(), pi.CalculateResource().Resource, func(r v1.ResourceName, v int64) {
				if i, ok := res.index[r]; ok {
					c[i] -= v
				}
			})
		}
		key.Reset()
		for i, q := range c {
			c[i] = max(q, 0)
			held[i] = held[i] || c[i] > 0
			key.WriteString(strconv.FormatInt(c[i], 10))
			key.WriteByte(',')
		}
		writeNodeKey(&key, n)
		id, ok := ids[key.String()]
		if !ok {
			id = len(classes)
			ids[key.String()] = id
			classes = append(classes, boundClass{capacity: c, node: n})
		}
		classes[id].count++
		classOf[n.Name] = id
	}
	return classes, classOf, held
}

// allowedClasses are the classes each signature may go to, judged on a
// node of each.
func allowedClasses(sigPods []*v1.Pod, classes []boundClass) [][]int {
	allowed := make([][]int, len(sigPods))
	for sig, pod := range sigPods {
		placing := stripNodeNames(pod)
		affinity := nodeaffinity.GetRequiredNodeAffinity(placing)
		for id, c := range classes {
			ok, err := affinity.Match(c.node)
			// A selector that does not parse keeps the pod off every
			// node in the scheduler; here off none (a lower bound may
			// only err low).
			if (ok || err != nil) && tolerates(pod.Spec.Tolerations, placingTaints(c.node)) {
				allowed[sig] = append(allowed[sig], id)
			}
		}
	}
	return allowed
}

// podGroups groups the pods by demand (of the resources some usable node
// has: held), signature and node, into lowerbound's groups over dims
// resources.
func podGroups(needs []podNeed, dims int, held []bool, classOf map[string]int, allowed [][]int) []lowerbound.Group {
	groupIDs := map[string]int{}
	var groups []lowerbound.Group
	var key strings.Builder
	for _, nd := range needs {
		d := make([]int64, dims)
		d[0] = 1
		for k := 0; k < len(nd.demand); k += 2 {
			if i := int(nd.demand[k]); held[i] {
				d[i] += nd.demand[k+1]
			}
		}
		// The class of the node it runs on, where its signature does not
		// allow it already (else pods alike would split by node class).
		here, stays := classOf[nd.node]
		if !stays || slices.Contains(allowed[nd.sig], here) {
			here = -1
		}
		key.Reset()
		for _, q := range d {
			key.WriteString(strconv.FormatInt(q, 10))
			key.WriteByte(',')
		}
		key.WriteString(strconv.Itoa(nd.sig))
		key.WriteByte(',')
		key.WriteString(strconv.Itoa(here))
		id, ok := groupIDs[key.String()]
		if !ok {
			id = len(groups)
			groupIDs[key.String()] = id
			a := allowed[nd.sig] // shared, never changed
			if here >= 0 {
				a = append(slices.Clip(a), here)
			}
			groups = append(groups, lowerbound.Group{Demand: d, Allowed: a})
		}
		groups[id].Count++
	}
	return groups
}

// eachRequest calls f with each resource pod requests that the scheduler
// counts on a node, but pod slots, and the amount, when positive: from
// asks, the requests kube-scheduler's NodeInfo computed and keeps for a
// pod on a node, or when nil from requests.Of, which computes them alike.
func eachRequest(pod *v1.Pod, asks fwk.Resource, f func(v1.ResourceName, int64)) {
	if asks == nil {
		for r, q := range requests.Of(pod) {
			if v := value(r, q); v > 0 && r != v1.ResourcePods && requests.Schedulable(r) {
				f(r, v)
			}
		}
		return
	}
	if v := asks.GetMilliCPU(); v > 0 {
		f(v1.ResourceCPU, v)
	}
	if v := asks.GetMemory(); v > 0 {
		f(v1.ResourceMemory, v)
	}
	if v := asks.GetEphemeralStorage(); v > 0 {
		f(v1.ResourceEphemeralStorage, v)
	}
	for r, v := range asks.GetScalarResources() {
		if v > 0 {
			f(r, v)
		}
	}
}

// writeNodeKey writes what of n tells a pod's placing apart, but its
// capacity: its labels but the hostname, and its placing taints.
func writeNodeKey(b *strings.Builder, n *v1.Node) {
	writeLabels(b, n)
	b.WriteByte(1)
	taints := make([]string, 0, len(n.Spec.Taints))
	for _, t := range placingTaints(n) {
		taints = append(taints, t.Key+"="+t.Value+":"+string(t.Effect))
	}
	slices.Sort(taints)
	for _, t := range taints {
		b.WriteString(t)
		b.WriteByte(0)
	}
}

// placingKey tells apart pods whose node selector, required node affinity
// (as stripNodeNames leaves them) or tolerations differ.
func placingKey(pod *v1.Pod) string {
	var b strings.Builder
	sel := make([]string, 0, len(pod.Spec.NodeSelector))
	for k, v := range pod.Spec.NodeSelector {
		if k != nodeNameLabel {
			sel = append(sel, k+"="+v)
		}
	}
	slices.Sort(sel)
	for _, s := range sel {
		b.WriteString(s)
		b.WriteByte(0)
	}
	b.WriteByte(1)
	if terms := requiredTerms(pod); terms != nil {
		for _, t := range terms {
			for _, r := range t.MatchExpressions {
				b.WriteString(r.Key)
				b.WriteByte(0)
				b.WriteString(string(r.Operator))
				for _, v := range r.Values {
					b.WriteByte(0)
					b.WriteString(v)
				}
				b.WriteByte(2)
			}
			b.WriteByte(3)
		}
	} else {
		b.WriteString("*")
	}
	b.WriteByte(1)
	for _, t := range pod.Spec.Tolerations {
		for _, f := range []string{t.Key, string(t.Operator), t.Value, string(t.Effect)} {
			b.WriteString(f)
			b.WriteByte(0)
		}
	}
	return b.String()
}

// requiredTerms are the terms of pod's required node affinity without
// what selects by the hostname label or by a node's fields; nil when that
// leaves a term with nothing to select by (it then selects every node the
// pod's selector does, as far as a lower bound reads it), when every term
// is empty, or when the pod has none.
func requiredTerms(pod *v1.Pod) []v1.NodeSelectorTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	in := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	out := make([]v1.NodeSelectorTerm, 0, len(in))
	for _, t := range in {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue // selects no node
		}
		var kept []v1.NodeSelectorRequirement
		for _, r := range t.MatchExpressions {
			if r.Key != nodeNameLabel {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			return nil
		}
		out = append(out, v1.NodeSelectorTerm{MatchExpressions: kept})
	}
	if len(out) == 0 {
		// Every term is empty: the pod goes nowhere, which no lower bound
		// needs to know (read as no affinity at all).
		return nil
	}
	return out
}

// stripNodeNames is pod with only what placingKey reads of its placing:
// its node selector without the hostname label, its required node
// affinity as requiredTerms leaves it.
func stripNodeNames(pod *v1.Pod) *v1.Pod {
	out := &v1.Pod{}
	for k, v := range pod.Spec.NodeSelector {
		if k != nodeNameLabel {
			if out.Spec.NodeSelector == nil {
				out.Spec.NodeSelector = map[string]string{}
			}
			out.Spec.NodeSelector[k] = v
		}
	}
	if terms := requiredTerms(pod); terms != nil {
		out.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	return out
}

// localDevices are the devices published by slices of one node: the only
// ones devicesByNode counts as a node's.
func (s *Simulator) localDevices() sets.Set[structured.DeviceID] {
	out := sets.New[structured.DeviceID]()
	for _, sl := range s.objects.ResourceSlices {
		if sl.Spec.NodeName == nil {
			continue
		}
		for _, d := range sl.Spec.Devices {
			out.Insert(structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name))
		}
	}
	return out
}
