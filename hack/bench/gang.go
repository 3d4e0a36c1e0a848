package main

// A gang among a thin cluster: a strategy asks about each member it finds
// misplaced, and a gang moves whole or not at all, so the work must grow
// with the gang, not with its square.

import (
	"context"
	"time"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// gangOthers are the pods of the cluster outside the gang, per node.
const gangOthers = 2

// benchGang plans, with the shipped bin-packing pair, a synthetic cluster of
// nodes holding one gang of members pods and gangOthers other pods a node,
// as `rebalancer plan --snapshot` does once the file is decoded. Count is
// the plan's moves, Value the evictions skipped as gang.
func benchGang(ctx context.Context, nodes, members int) (measurement, error) {
	snap, err := synthetic.Generate(synthetic.Options{Nodes: nodes, Pods: gangOthers*nodes + members, Seed: seed, Gang: members})
	if err != nil {
		return measurement{}, err
	}
	start := time.Now()
	p, err := planAsUsers(ctx, policyFile, snap)
	if err != nil {
		return measurement{}, err
	}
	return measurement{Seconds: time.Since(start).Seconds(), Count: len(p.Moves), Value: float64(p.Summary.SkippedByReason[plan.ReasonGang])}, nil
}
