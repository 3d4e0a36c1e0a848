package simulator

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// apart is how copies of a pod keep apart in the filters, where CountCopies
// has a closed form for it.
type apart struct {
	// anti: the copies' required anti-affinity to each other allows one
	// copy per value of its topology key.
	anti *antiTerm
	// spread: the copies spread over spread.key within spread.maxSkew.
	spread *hardSpread
}

// antiTerm is one required pod anti-affinity term, as InterPodAffinity
// reads it.
type antiTerm struct {
	key        string
	selector   labels.Selector
	namespaces []string
}

// hardSpread is one DoNotSchedule topology spread constraint, as
// PodTopologySpread reads it.
type hardSpread struct {
	key          string
	maxSkew      int64
	selector     labels.Selector
	honorNodeAff bool // nodeAffinityPolicy Honor: only nodes the pod's node affinity allows are domains
}

// apartOf says how copies of pod meet each other through inter-pod
// affinity and topology spread in sc's filters, when CountCopies has a
// closed form for it (ok): not at all (zero apart: an anti-affinity term
// or a spread selector that does not select the copies themselves is
// decided once, against the pods already there); one required
// anti-affinity term, of the pod's own namespace or listed ones, that
// selects the copies, and no hard spread; or one DoNotSchedule spread
// constraint that selects the copies, without minDomains, without
// nodeTaintsPolicy Honor, and no required inter-pod affinity or
// anti-affinity. Anything else couples the copies in ways only placing
// them one by one shows: required pod affinity (a copy lets the next one
// in), several anti-affinity terms or spread constraints at once (each
// fills its domains, and they share the copies), minDomains (the global
// minimum counts empty domains missing), a spread's nodes counted by
// taints the filters read differently.
func apartOf(sc *scheduler, pod *v1.Pod) (a apart, ok bool) {
	var antiTerms []v1.PodAffinityTerm
	if aff := pod.Spec.Affinity; aff != nil {
		if aff.PodAffinity != nil && len(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return a, false
		}
		if aff.PodAntiAffinity != nil {
			antiTerms = aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
	}
	var hard []v1.TopologySpreadConstraint
	for _, tc := range pod.Spec.TopologySpreadConstraints {
		if tc.WhenUnsatisfiable == v1.DoNotSchedule {
			hard = append(hard, tc)
		}
	}
	switch {
	case len(antiTerms) == 0 && len(hard) == 0:
		return a, true
	case len(antiTerms) > 1 || len(hard) > 1 || len(antiTerms) == 1 && len(hard) == 1:
		return a, false
	case len(antiTerms) == 1:
		if !slices.Contains(sc.filters, names.InterPodAffinity) {
			return a, true // the profile does not filter by it: nothing keeps the copies apart
		}
		term := antiTerms[0]
		if term.NamespaceSelector != nil || len(term.MatchLabelKeys) > 0 || len(term.MismatchLabelKeys) > 0 || term.TopologyKey == "" {
			return a, false
		}
		selector, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			return a, false
		}
		ns := term.Namespaces
		if len(ns) == 0 {
			ns = []string{pod.Namespace}
		}
		if term.LabelSelector != nil && selector.Matches(labels.Set(pod.Labels)) && slices.Contains(ns, pod.Namespace) {
			a.anti = &antiTerm{key: term.TopologyKey, selector: selector, namespaces: ns}
		}
		return a, true
	}
	tc := hard[0]
	if !slices.Contains(sc.filters, names.PodTopologySpread) {
		return a, true // likewise
	}
	if tc.MinDomains != nil && *tc.MinDomains != 1 || tc.NodeTaintsPolicy != nil && *tc.NodeTaintsPolicy == v1.NodeInclusionPolicyHonor || tc.MaxSkew < 1 {
		return a, false
	}
	honor := tc.NodeAffinityPolicy == nil || *tc.NodeAffinityPolicy == v1.NodeInclusionPolicyHonor
	if honor && !slices.Contains(sc.filters, names.NodeAffinity) {
		return a, false // copies may land on nodes the spread does not count
	}
	for _, pc := range sc.profile.PluginConfig {
		if args, ok := pc.Args.(*config.PodTopologySpreadArgs); ok {
			for _, d := range args.DefaultConstraints {
				if d.WhenUnsatisfiable == v1.DoNotSchedule {
					return a, false // the pod without its constraint would take them
				}
			}
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(tc.LabelSelector)
	if err != nil {
		return a, false
	}
	if len(tc.MatchLabelKeys) > 0 {
		set := labels.Set{}
		for _, k := range tc.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				set[k] = v
			}
		}
		if len(set) > 0 {
			reqs, _ := labels.SelectorFromValidatedSet(set).Requirements()
			selector = selector.Add(reqs...)
		}
	}
	if selector.Empty() || !selector.Matches(labels.Set(pod.Labels)) {
		return a, true // the copies count in no domain: decided once
	}
	a.spread = &hardSpread{key: tc.TopologyKey, maxSkew: int64(tc.MaxSkew), selector: selector, honorNodeAff: honor}
	return a, true
}

// withoutAntiAffinity is pod without its required pod anti-affinity.
func withoutAntiAffinity(pod *v1.Pod) *v1.Pod {
	c := *pod
	aff := *pod.Spec.Affinity
	anti := *aff.PodAntiAffinity
	anti.RequiredDuringSchedulingIgnoredDuringExecution = nil
	aff.PodAntiAffinity = &anti
	c.Spec.Affinity = &aff
	return &c
}

// taken are the values of at's topology key that a pod at selects
// already runs in: InterPodAffinity keeps the pod off their nodes. It
// reads every pod of the cluster, node by node in parallel, and stops with
// ctx's cause when ctx ends.
func taken(ctx context.Context, at *antiTerm, all []fwk.NodeInfo) (map[string]bool, error) {
	has := make([]bool, len(all))
	parallel(ctx, len(all), func(i int) {
		if _, keyed := all[i].Node().Labels[at.key]; !keyed {
			return
		}
		for _, pi := range all[i].GetPods() {
			p := pi.GetPod()
			if slices.Contains(at.namespaces, p.Namespace) && at.selector.Matches(labels.Set(p.Labels)) {
				has[i] = true
				return
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx) // nodes left unread
	}
	out := map[string]bool{}
	for i, ni := range all {
		if has[i] {
			out[ni.Node().Labels[at.key]] = true
		}
	}
	return out, nil
}

// withoutHardSpread is pod without its DoNotSchedule spread constraints.
func withoutHardSpread(pod *v1.Pod) *v1.Pod {
	c := *pod
	c.Spec.TopologySpreadConstraints = nil
	for _, tc := range pod.Spec.TopologySpreadConstraints {
		if tc.WhenUnsatisfiable != v1.DoNotSchedule {
			c.Spec.TopologySpreadConstraints = append(c.Spec.TopologySpreadConstraints, tc)
		}
	}
	return &c
}

// spreadCopies is how many copies of pod, requesting req, bind one after
// the other under the spread constraint sp: all are the nodes, feasible
// those that pass every other filter (nil where not). PodTopologySpread
// lets a copy into domain d (a value of sp.key) while its matching pods
// plus one exceed the fewest of any domain by at most maxSkew, the domains
// being the values of the nodes it counts (those with the key, and under
// nodeAffinityPolicy Honor, that the pod's node affinity allows). Domain d
// starts at c_d matching pods and holds at most F_d = c_d + the copies its
// feasible nodes have room for. Whatever the order the copies go in, the
// placing ends with the fewest, M, at the least F_d (a domain below any
// F_d's end is one more copy can go to), every domain filled to
// min(F_d, M+maxSkew) or left at c_d when it starts above that: so the
// copies are the sum of those fills. It stops with ctx's cause when ctx
// ends.
func spreadCopies(ctx context.Context, sp *hardSpread, pod *v1.Pod, all, feasible []fwk.NodeInfo, req v1.ResourceList) (int64, error) {
	var required nodeaffinity.RequiredNodeAffinity
	if sp.honorNodeAff {
		required = nodeaffinity.GetRequiredNodeAffinity(pod)
	}
	// The matching pods of each node the spread counts (-1: not counted),
	// node by node in parallel: every pod of the cluster is read.
	matching := make([]int64, len(all))
	parallel(ctx, len(all), func(i int) {
		node := all[i].Node()
		matching[i] = -1
		if _, has := node.Labels[sp.key]; !has {
			return
		}
		if sp.honorNodeAff {
			if match, _ := required.Match(node); !match {
				return
			}
		}
		n := int64(0)
		for _, pi := range all[i].GetPods() {
			p := pi.GetPod()
			if p.DeletionTimestamp == nil && p.Namespace == pod.Namespace && sp.selector.Matches(labels.Set(p.Labels)) {
				n++
			}
		}
		matching[i] = n
	})
	if err := ctx.Err(); err != nil {
		return 0, context.Cause(ctx) // nodes left uncounted
	}
	counted := map[string]int64{} // c_d
	for i, n := range matching {
		if n >= 0 {
			counted[all[i].Node().Labels[sp.key]] += n
		}
	}
	room := map[string]int64{}
	for _, ni := range feasible {
		if ni == nil {
			continue
		}
		if value, has := ni.Node().Labels[sp.key]; has {
			if _, domain := counted[value]; domain {
				room[value] += fits(ni, req)
			}
		}
	}
	least := int64(-1) // M, the least F_d
	for value, c := range counted {
		if f := c + room[value]; least < 0 || f < least {
			least = f
		}
	}
	var n int64
	for value, c := range counted {
		if fill := min(c+room[value], least+sp.maxSkew); fill > c {
			n += fill - c
		}
	}
	return n, nil
}
