package simulator

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// copyBlind are kube-scheduler's filters that pass or refuse a node for a
// pod whatever copies of it other nodes or the same node already run, for
// a pod that countsByNode admits: they read the node, the pod, and pods
// other than the copies (or, NodeResourcesFit, the node's free resources,
// which count does the sum of).
var copyBlind = sets.New(names.NodeUnschedulable, names.NodeName, names.TaintToleration, names.NodeAffinity,
	names.NodePorts, names.NodeResourcesFit, names.VolumeRestrictions, names.NodeVolumeLimits, names.VolumeBinding,
	names.VolumeZone, names.PodTopologySpread, names.InterPodAffinity, names.DynamicResources, names.NodeDeclaredFeatures)

// CountCopies is how many copies of the pending pod its scheduler would
// bind one after the other until one finds no node, up to max, counted
// without a scheduling cycle per copy: the filters run once on every node,
// and each feasible node takes as many copies as its free resources and
// pod slots hold. Where the copies meet each other in the filters only
// through a constraint with a closed form (see apartOf), that is counted
// too: required pod anti-affinity of the copies to each other on a
// topology key, at most one copy per domain; a DoNotSchedule topology
// spread of the copies over a key, filled domain by domain up to the skew
// the constraint allows (spreadCopies). ok is false, and nothing is
// counted, for any other pod whose copies meet: inter-pod affinity,
// anti-affinity or spread beyond those forms (or both at once), the
// profile's hard default spread, host ports, volumes a filter counts, or
// device claims; and for a profile with a filter outside kube-scheduler's
// own or resources NodeResourcesFit ignores.
func (s *Simulator) CountCopies(ctx context.Context, pod *v1.Pod, max int32) (n int32, ok bool, err error) {
	sc, err := s.schedulerOf(pod)
	if err != nil || !countsByNode(sc, pod, s.draBacked) {
		return 0, false, err
	}
	a, ok := apartOf(sc, pod)
	if !ok {
		return 0, false, nil
	}
	filtered := pod
	switch {
	case a.spread != nil:
		// The other filters, without the spread the count does itself.
		filtered = withoutHardSpread(pod)
	case a.anti != nil:
		// Likewise the anti-affinity: the domains it keeps the copies
		// out of are read once (taken), not by InterPodAffinity's
		// PreFilter, which reads every pod against the term, at more cost.
		filtered = withoutAntiAffinity(pod)
	}
	_, f, _, done, err := s.filterCycle(ctx, sc, filtered, nil, nil)
	if done || err != nil {
		return 0, err == nil, err // no node passes
	}
	req := requests.Of(pod)
	var all []fwk.NodeInfo
	if a.spread != nil || a.anti != nil {
		if all, err = s.snapshot.NodeInfos().List(); err != nil {
			return 0, false, err
		}
	}
	if a.spread != nil {
		n, err := spreadCopies(ctx, a.spread, pod, all, f.feasibleNodes(), req)
		if err != nil {
			return 0, false, err
		}
		return int32(min(int64(max), n)), true, nil
	}
	var blocked map[string]bool // domains a matching pod already runs in
	var domains sets.Set[string]
	if a.anti != nil {
		if blocked, err = taken(ctx, a.anti, all); err != nil {
			return 0, false, err
		}
		domains = sets.New[string]()
	}
	for _, ni := range f.feasibleNodes() {
		if ni == nil {
			continue
		}
		room := fits(ni, req)
		if a.anti != nil {
			if value, has := ni.Node().Labels[a.anti.key]; has {
				// One copy per domain: the first keeps the others off it.
				if room > 0 && !blocked[value] {
					domains.Insert(value)
				}
				room = 0
			}
		}
		if n += int32(min(int64(max-n), room)); n >= max {
			return max, true, nil
		}
	}
	return int32(min(int64(max), int64(n)+int64(domains.Len()))), true, nil
}

// fits is how many pods of requests req the node's free resources and pod
// slots hold, as NodeResourcesFit counts them.
func fits(ni fwk.NodeInfo, req v1.ResourceList) int64 {
	pods, slots := requests.OnNode(ni, v1.ResourcePods)
	n := slots - pods
	for r, q := range req {
		if want := requests.Units(r, q); want > 0 && r != v1.ResourcePods {
			used, has := requests.OnNode(ni, r)
			n = min(n, (has-used)/want)
		}
	}
	return max(n, 0)
}

// countsByNode says whether copies of pod meet each other in sc's filters
// only through the node's resources and pod slots, or through inter-pod
// affinity and topology spread, which apartOf looks at (see CountCopies).
func countsByNode(sc *scheduler, pod *v1.Pod, draBacked func(v1.ResourceName) bool) bool {
	for _, f := range sc.filters {
		if !copyBlind.Has(f) {
			return false
		}
	}
	for _, pc := range sc.profile.PluginConfig {
		switch args := pc.Args.(type) {
		case *config.NodeResourcesFitArgs:
			if len(args.IgnoredResources) > 0 || len(args.IgnoredResourceGroups) > 0 {
				return false
			}
		case *config.PodTopologySpreadArgs:
			for _, tc := range args.DefaultConstraints {
				if tc.WhenUnsatisfiable == v1.DoNotSchedule && len(pod.Spec.TopologySpreadConstraints) == 0 {
					return false
				}
			}
		}
	}
	spec := &pod.Spec
	if len(spec.ResourceClaims) > 0 {
		return false
	}
	for r := range requests.Of(pod) {
		if draBacked != nil && draBacked(r) {
			return false // DRA devices may hold it, which the node's allocatable does not
		}
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil && v.Secret == nil && v.EmptyDir == nil && v.DownwardAPI == nil && v.Projected == nil {
			return false
		}
	}
	for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					return false
				}
			}
		}
	}
	return true
}
