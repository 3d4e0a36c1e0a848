package main

// The openb measurement: rounds of ours and of the upstream baseline on a
// pod list of the openb trace.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/pkg/consolidation"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/openb"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/rounds"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
)

func benchOpenb(ctx context.Context, dir, list string, n int) (measurement, error) {
	read := func(name string) (*os.File, error) { return os.Open(filepath.Join(dir, name)) }
	nf, err := read("openb_node_list_all_node.csv")
	if err != nil {
		return measurement{}, err
	}
	defer nf.Close()
	pf, err := read("openb_pod_list_" + list + ".csv")
	if err != nil {
		return measurement{}, err
	}
	defer pf.Close()
	nodes, err := openb.ReadNodes(nf.Name(), nf)
	if err != nil {
		return measurement{}, err
	}
	pods, err := openb.ReadPods(pf.Name(), pf)
	if err != nil {
		return measurement{}, err
	}
	snap, _, err := openb.Import(ctx, nodes, pods, openb.Options{At: openb.Peak})
	if err != nil {
		return measurement{}, err
	}
	pol, prof, err := loadPair()
	if err != nil {
		return measurement{}, err
	}
	// The trace's pods were placed by kube-scheduler's default profile; the
	// benchmark is of a cluster whose workloads then run on
	// rebalancer-scheduler with the bin-packing profile.
	for _, p := range snap.Pods {
		p.Spec.SchedulerName = prof.SchedulerName
	}
	// At most 10 nodes emptied a cycle, as a cautious team runs it.
	for _, pr := range pol.Profiles {
		for _, pc := range pr.PluginConfigs {
			if args, ok := pc.Args.(*consolidation.Args); ok {
				args.MaxNodesPerCycle = 10
			}
		}
	}
	sess := session.New(session.Options{Planner: planner.Options{MinScoreGain: 1}})
	opened, err := sess.OpenLoaded(ctx, &inputs.Inputs{Policy: pol, Schedulers: []*config.KubeSchedulerProfile{prof}, Snapshot: snap}, nil)
	if err != nil {
		return measurement{}, err
	}
	opts := rounds.Options{Strategy: rounds.Rebalancer, Rounds: n, Interval: 10 * time.Minute, Cooldown: 30 * time.Minute}
	ours, err := rounds.Run(ctx, sess, opened, opts)
	if err != nil {
		return measurement{}, err
	}
	opts.Strategy = rounds.Upstream
	up, err := rounds.Run(ctx, sess, opened, opts)
	if err != nil {
		return measurement{}, err
	}
	if len(ours.Rounds) == 0 || len(up.Rounds) == 0 {
		return measurement{}, errors.New("no rounds simulated")
	}
	o, u := ours.Totals(), up.Totals()
	return measurement{Openb: &OpenbResult{
		List: list, ClassLowerBound: ours.Rounds[0].ClassLowerBound,
		Pods: len(snap.Pods), NodesBefore: ours.Rounds[0].NodesInUse, NodesInUse: o.NodesInUse, LowerBound: o.LowerBound,
		NodesOverLowerBound: o.NodesInUse - o.LowerBound, EvictionsOurs: o.Evictions, EvictionsUpstream: u.Evictions,
		NodesInUseUpstream: u.NodesInUse, PingPong: o.PingPong, PingPongUpstream: u.PingPong, ConvergedAt: ours.ConvergedAt,
		UnschedulableOurs: o.Unschedulable, UnschedulableUp: u.Unschedulable,
	}}, nil
}
