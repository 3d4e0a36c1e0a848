package rebalancehint

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// BenchmarkSchedulingCycle times one scheduling cycle of a pod without a
// hint (PreFilter, Filter over every node, PreScore, Score) at 5,000 nodes
// of 20 pods each, under NodeResourcesFit with RebalanceHint scoring only
// ("score only", as before it held room), with its Filter and no hint in
// flight, and with its Filter while 100 replacements are promised room on
// 50 nodes, which have room to spare for the pod (PreFilter then skips
// Filter) or not (Filter runs for every node and refuses those 50). The
// Filter's cost is the difference to "score only".
func BenchmarkSchedulingCycle(b *testing.B) {
	snapshot := bigCluster()
	for _, c := range []struct {
		name     string
		points   []string
		promises int
		cpu      string // each promised replacement's
	}{
		{"score only", []string{"PreScore", "Score", "Reserve"}, 0, ""},
		{"filter, no hint in flight", []string{"PreFilter", "Filter", "PreScore", "Score", "Reserve"}, 0, ""},
		{"filter, 100 replacements in flight, room to spare", []string{"PreFilter", "Filter", "PreScore", "Score", "Reserve"}, 100, "1"},
		{"filter, 100 replacements in flight, targets full", []string{"PreFilter", "Filter", "PreScore", "Score", "Reserve"}, 100, "22"},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, "")
			ctx, pl := e.ctx, e.pl
			pl.nodes = snapshot
			logger := logr.Discard() // a line per hint would drown the figures
			for i := range c.promises {
				old := pod(fmt.Sprintf("p-%d-0", i), fmt.Sprintf("node-%04d", i), c.cpu, &api)
				h := hint.Hint{Source: old.Spec.NodeName, Target: fmt.Sprintf("node-%04d", 4999-i%50), PlanID: "plan-1", Time: t0}
				if !pl.book.Updated(logger, old, hinted(old.DeepCopy(), h)) {
					b.Fatal("hint not recorded")
				}
			}
			fit := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
				return noderesources.NewFit(ctx, &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
					Type: config.MostAllocated, Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
				}}, h, feature.Features{})
			}
			self := func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return pl, nil }
			f, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
				tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
				tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
				tf.RegisterPluginAsExtensionsWithWeight(noderesources.Name, fitWeight, fit, "PreFilter", "Filter", "PreScore", "Score"),
				tf.RegisterPluginAsExtensionsWithWeight(Name, hintWeight, self, c.points...),
			}, "rebalancer-scheduler", frameworkruntime.WithSnapshotSharedLister(snapshot))
			if err != nil {
				b.Fatal(err)
			}
			all, _ := snapshot.NodeInfos().List()
			p := pod("new", "", "2", &web)
			b.ResetTimer()
			for b.Loop() {
				state := framework.NewCycleState()
				if _, s, _ := f.RunPreFilterPlugins(ctx, state, p); !s.IsSuccess() {
					b.Fatal(s)
				}
				feasible := make([]fwk.NodeInfo, 0, len(all))
				for _, ni := range all {
					if f.RunFilterPlugins(ctx, state, p, ni).IsSuccess() {
						feasible = append(feasible, ni)
					}
				}
				if s := f.RunPreScorePlugins(ctx, state, p, feasible); !s.IsSuccess() {
					b.Fatal(s)
				}
				if _, s := f.RunScorePlugins(ctx, state, p, feasible); !s.IsSuccess() {
					b.Fatal(s)
				}
			}
		})
	}
}

// BenchmarkHoldPass times what holding room adds to a scheduling cycle at
// 5,000 nodes, alone: the plugin's PreFilter, and its Filter over every
// node, while 100 replacements are promised room on 50 full targets (the
// case where Filter runs at all). Compare with BenchmarkSchedulingCycle's
// "score only".
func BenchmarkHoldPass(b *testing.B) {
	snapshot := bigCluster()
	e := newEnv(b, "")
	e.pl.nodes = snapshot
	logger := logr.Discard() // a line per hint would drown the figures
	for i := range 100 {
		old := pod(fmt.Sprintf("p-%d-0", i), fmt.Sprintf("node-%04d", i), "22", &api)
		h := hint.Hint{Source: old.Spec.NodeName, Target: fmt.Sprintf("node-%04d", 4999-i%50), PlanID: "plan-1", Time: t0}
		if !e.pl.book.Updated(logger, old, hinted(old.DeepCopy(), h)) {
			b.Fatal("hint not recorded")
		}
	}
	all, _ := snapshot.NodeInfos().List()
	p := pod("new", "", "2", &web)
	refused := 0
	for b.Loop() {
		state := framework.NewCycleState()
		if _, s := e.pl.PreFilter(e.ctx, state, p, all); !s.IsSuccess() {
			b.Fatal(s)
		}
		refused = 0
		for _, ni := range all {
			if !e.pl.Filter(e.ctx, state, p, ni).IsSuccess() {
				refused++
			}
		}
	}
	if refused != 50 {
		b.Fatalf("%d nodes refused, want the 50 full targets", refused)
	}
}

// bigCluster is 5,000 nodes of 64 CPUs with 20 1-CPU pods each.
func bigCluster() *cache.Snapshot {
	const nodes, podsPerNode = 5000, 20
	var ns []*v1.Node
	var ps []*v1.Pod
	for i := range nodes {
		n := node(fmt.Sprintf("node-%04d", i), "64")
		ns = append(ns, n)
		for j := range podsPerNode {
			ps = append(ps, pod(fmt.Sprintf("p-%d-%d", i, j), n.Name, "1", &web))
		}
	}
	return cache.NewSnapshot(ps, ns)
}
