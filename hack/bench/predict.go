package main

// The scheduler-side measurements: predictions per second, and what the
// RebalanceHint plugin adds to each.

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// movable are the pods a prediction is asked about: bound, not NodeBound.
func movable(sim *simulator.Simulator) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range sim.Bound() {
		if !simulator.NodeBound(p) {
			out = append(out, p)
		}
	}
	return out
}

func benchPredict(ctx context.Context, nodes, count int) (measurement, error) {
	snap, _, prof, err := setup(nodes)
	if err != nil {
		return measurement{}, err
	}
	sim, err := simulator.New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
	if err != nil {
		return measurement{}, err
	}
	pods := movable(sim)
	start := time.Now()
	for i := 0; i < count; i++ {
		if _, err := sim.Predict(ctx, pods[(i*7919)%len(pods)], simulator.PredictOptions{}); err != nil {
			return measurement{}, err
		}
	}
	s := time.Since(start).Seconds()
	return measurement{Seconds: s, Count: count, Value: float64(count) / s}, nil
}

// benchHint compares the shipped profile with the same profile without
// RebalanceHint, on the same pods, in two cases: pods without a hint (every
// pod the scheduler sees but the few replacements of moved pods; PreScore
// finds no hint and the framework skips the plugin's Score) and hinted pods
// (a hint recorded for every pod's owner, so Score runs on every node). The
// three are measured in turn, three times each, and the best of each is kept:
// a shared 2-core machine is noisy.
func benchHint(ctx context.Context, nodes, count int) (measurement, error) {
	snap, _, with, err := setup(nodes)
	if err != nil {
		return measurement{}, err
	}
	without := with.DeepCopy()
	drop := func(set *config.PluginSet) {
		kept := set.Enabled[:0]
		for _, p := range set.Enabled {
			if p.Name != rebalancehint.Name {
				kept = append(kept, p)
			}
		}
		set.Enabled = kept
	}
	for _, set := range []*config.PluginSet{&without.Plugins.MultiPoint, &without.Plugins.PreScore, &without.Plugins.Score, &without.Plugins.Reserve} {
		drop(set)
	}
	time1 := func(prof *config.KubeSchedulerProfile, hinted bool) (time.Duration, error) {
		sim, err := simulator.New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
		if err != nil {
			return 0, err
		}
		pods := movable(sim)
		if hinted {
			for i := 0; i < count; i++ {
				p := pods[(i*7919)%len(pods)].DeepCopy()
				p.Annotations = hint.Hint{Source: p.Spec.NodeName, Target: snap.Nodes[i%len(snap.Nodes)].Name, PlanID: "bench", Time: time.Now()}.Annotations()
				sim.Leaving(p)
			}
		}
		start := time.Now()
		for i := 0; i < count; i++ {
			if _, err := sim.Predict(ctx, pods[(i*7919)%len(pods)], simulator.PredictOptions{}); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	type variant struct {
		prof   *config.KubeSchedulerProfile
		hinted bool
	}
	variants := []variant{{without, false}, {with, false}, {with, true}}
	best := make([]time.Duration, len(variants))
	for rep := 0; rep < 3; rep++ {
		for i, v := range variants {
			d, err := time1(v.prof, v.hinted)
			if err != nil {
				return measurement{}, err
			}
			if best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
	}
	pct := func(d time.Duration) float64 { return (d.Seconds() - best[0].Seconds()) / best[0].Seconds() * 100 }
	return measurement{Seconds: best[0].Seconds(), Count: count, Value: pct(best[1]), Value2: pct(best[2])}, nil
}
