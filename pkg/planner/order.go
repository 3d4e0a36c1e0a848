package planner

import (
	"cmp"
	"context"
	"errors"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/nodeutilization"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/rebalancer-dev/rebalancer/pkg/simhandle"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// request is an eviction a plugin asked for.
type request struct {
	pod  *v1.Pod
	opts evictions.EvictOptions
}

// inOrder wraps a plugin so that the evictions it asks for are judged
// after it ran, in a canonical order, rather than as it asks. Several of the
// descheduler's plugins (RemoveDuplicates, RemovePodsViolatingTopologySpreadConstraint)
// walk Go maps when they evict, so they ask in a different order on every
// run; every judged move changes the simulation and spends limits and
// budgets, so the order decides the plan. Judged in one order, the same
// cluster gives the same plan.
//
// The plugin is told every eviction succeeded: it asks for all it would
// evict, and limits and PDBs are applied when the requests are judged.
// The sequential plugins are judged as they ask: they walk nodes and
// pods in sorted order and must see each outcome as it happens (a node's
// usage falls as its pods move); the utilization plugins' walk over nodes
// of equal usage is put in order by ties. A plugin that is both a deschedule and a balance
// plugin is not wrapped either.
func inOrder(pl frameworktypes.Plugin, j *judge) frameworktypes.Plugin {
	d, deschedule := pl.(frameworktypes.DeschedulePlugin)
	b, balance := pl.(frameworktypes.BalancePlugin)
	if sequential(pl) {
		if j.ties != nil && balance && !deschedule {
			return &tieBroken{BalancePlugin: b, ties: j.ties, budget: j.budget, logger: j.p.logger}
		}
		return pl
	}
	switch {
	case deschedule && !balance:
		return &orderedDeschedule{DeschedulePlugin: d, judge: j}
	case balance && !deschedule:
		return &orderedBalance{BalancePlugin: b, judge: j}
	}
	return pl
}

// sequential says whether pl is judged as it asks: it accounts for each
// eviction as it goes. rebalancer's own plugins say so themselves
// (simhandle.Sequential); the descheduler's are named in
// sequentialUpstream.
func sequential(pl frameworktypes.Plugin) bool {
	if s, ok := pl.(simhandle.Sequential); ok {
		return s.Sequential()
	}
	return sequentialUpstream.Has(pl.Name())
}

// sequentialUpstream are the descheduler's plugins judged as they ask.
var sequentialUpstream = sets.New(nodeutilization.HighNodeUtilizationPluginName, nodeutilization.LowNodeUtilizationPluginName)

type orderedDeschedule struct {
	frameworktypes.DeschedulePlugin
	judge *judge
}

func (o *orderedDeschedule) Deschedule(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	return o.judge.inOrder(ctx, func() *frameworktypes.Status { return o.DeschedulePlugin.Deschedule(ctx, nodes) })
}

type orderedBalance struct {
	frameworktypes.BalancePlugin
	judge *judge
}

func (o *orderedBalance) Balance(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	return o.judge.inOrder(ctx, func() *frameworktypes.Status { return o.BalancePlugin.Balance(ctx, nodes) })
}

// inOrder runs the plugin, then judges what it asked for: lowest priority
// first (the descheduler's own preference), then by namespace and name.
func (j *judge) inOrder(ctx context.Context, run func() *frameworktypes.Status) *frameworktypes.Status {
	var held []request
	j.held = &held
	st := run()
	j.held = nil
	if st != nil && st.Err != nil {
		return st
	}
	slices.SortStableFunc(held, func(a, b request) int {
		return cmp.Or(
			cmp.Compare(corev1helpers.PodPriority(a.pod), corev1helpers.PodPriority(b.pod)),
			cmp.Compare(a.pod.Namespace, b.pod.Namespace),
			cmp.Compare(a.pod.Name, b.pod.Name),
		)
	})
	for _, r := range held {
		err := j.move(ctx, r.pod, r.opts, simulator.PredictOptions{}, "")
		var total *evictions.EvictionTotalLimitError
		switch {
		case err == nil, refused(err):
		case errors.As(err, &total):
			return st // the plan is full
		default:
			return &frameworktypes.Status{Err: err}
		}
	}
	return st
}

// refused says whether judge turned an eviction down (it recorded why)
// rather than failed; a full plan is told apart by the caller.
func refused(err error) bool {
	var node *evictions.EvictionNodeLimitError
	var ns *evictions.EvictionNamespaceLimitError
	return errors.Is(err, errSkipped) || errors.As(err, &node) || errors.As(err, &ns)
}
