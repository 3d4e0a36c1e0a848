package main

// The plan measurements: one plan of ours or one upstream cycle on the
// synthetic cluster, and `rebalancer plan --snapshot` on it written as a file.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/pkg/cli"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/upstream"
)

// writeSnapshotFile writes the synthetic cluster of the plan benchmark to
// out, as `rebalancer snapshot synthetic -o out` does (JSON for *.json).
func writeSnapshotFile(nodes int, out string) error {
	snap, err := cluster(nodes)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := snap.EncodeAs(out, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// benchPlanFile runs `rebalancer plan --snapshot file` with the shipped
// bin-packing pair, in this process, as users run it: reading the files,
// decoding and admitting the snapshot, planning, printing JSON.
func benchPlanFile(ctx context.Context, file string) (measurement, error) {
	var out bytes.Buffer
	root := cli.NewRootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"plan", "--snapshot", file, "--policy", policyFile, "--scheduler-config", schedulerFile, "-o", "json"})
	start := time.Now()
	if err := root.ExecuteContext(ctx); err != nil {
		return measurement{}, err
	}
	seconds := time.Since(start).Seconds()
	var p plan.Plan
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		return measurement{}, fmt.Errorf("reading the plan: %w", err)
	}
	return measurement{Seconds: seconds, Count: len(p.Moves)}, nil
}

func benchPlan(ctx context.Context, nodes int, impl string) (measurement, error) {
	snap, pol, _, err := setup(nodes)
	if err != nil {
		return measurement{}, err
	}
	start := time.Now()
	switch impl {
	case "ours":
		p, err := planAsUsers(ctx, policyFile, snap)
		if err != nil {
			return measurement{}, err
		}
		return measurement{Seconds: time.Since(start).Seconds(), Count: len(p.Moves)}, nil
	case "upstream":
		r, err := upstream.Run(ctx, upstream.Policy(pol), snap)
		if err != nil {
			return measurement{}, err
		}
		return measurement{Seconds: time.Since(start).Seconds(), Count: len(r.Evicted)}, nil
	}
	return measurement{}, fmt.Errorf("--impl %q: want ours or upstream", impl)
}

// planAsUsers plans as `rebalancer plan --snapshot` does once the file is
// decoded: the inputs checked, the placement resolved, the simulation
// built, with its default options and an empty move history; with the
// shipped bin-packing profile.
func planAsUsers(ctx context.Context, policy string, snap *snapshot.Snapshot) (*plan.Plan, error) {
	sess := session.New(session.Options{
		Files:       inputs.Files{Policy: policy, SchedulerConfigs: []string{schedulerFile}, Cluster: snap},
		Planner:     planner.Options{MinScoreGain: 1},
		UsageWindow: time.Minute, UsageInterval: 15 * time.Second,
	})
	p, _, err := sess.Plan(ctx, nil, history.New(clock.RealClock{}, 30*time.Minute))
	return p, err
}
