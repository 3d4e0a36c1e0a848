package main

// The consolidation measurement: Consolidation alone, on a cluster of its
// own (20 thin pods a node), planned as benchPlan plans.

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// consolidationPolicy is Consolidation alone, uncapped, without limits.
const consolidationPolicy = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: consolidation
  pluginConfig:
  - name: DefaultEvictor
    args:
      nodeFit: true
  - name: Consolidation
    args:
      maxNodesPerCycle: 5000
  plugins:
    balance:
      enabled: [Consolidation]
`

// benchConsolidate plans the full consolidation of a fragmented cluster of
// nodes nodes and 20 thin pods per node, as benchPlan plans.
func benchConsolidate(ctx context.Context, nodes int) (measurement, error) {
	snap, err := synthetic.Generate(synthetic.Options{Nodes: nodes, Pods: 20 * nodes, Seed: seed})
	if err != nil {
		return measurement{}, err
	}
	dir, err := os.MkdirTemp("", "bench-consolidate-")
	if err != nil {
		return measurement{}, err
	}
	defer os.RemoveAll(dir)
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(consolidationPolicy), 0o600); err != nil {
		return measurement{}, err
	}
	start := time.Now()
	p, err := planAsUsers(ctx, policy, snap)
	if err != nil {
		return measurement{}, err
	}
	return measurement{Seconds: time.Since(start).Seconds(), Count: len(p.Moves), Consolidation: &ConsolidationResult{
		Moves: len(p.Moves), NodesBefore: p.Summary.NodesInUseBefore, NodesAfter: p.Summary.NodesInUseAfter, LowerBound: p.Summary.NodesLowerBound,
	}}, nil
}
