//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestDrainBudgetKeepsCostlyNodes: HighNodeUtilization under a drain
// budget (its profile's maxDrainCostPercent, set on Consolidation's
// pluginConfig) on three nodes: a busy one with room for four 1-CPU pods,
// and two equally thin ones with two such pods each, one of them pods with
// a pod-deletion-cost (each eviction counts 5). Emptying them costs 2 and
// 10, against 16/3 a node on average; at 60 % one `run --once` empties the
// cheap node onto the busy one and leaves every costly pod where it was,
// saying why (a cost skip), and lists the emptied node with its cost.
func TestDrainBudgetKeepsCostlyNodes(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	busy, cheap, dear := e.nodeNames("busy", 1)[0], e.nodeNames("cheap", 1)[0], e.nodeNames("dear", 1)[0]
	e.addNodes("8", busy, cheap, dear)
	e.fragmentedReplicaSet("base", resources("1", "1Gi"), []string{busy, busy, busy, busy})
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), []string{cheap, cheap})
	e.fragmentedReplicaSetWith(schedulerName, "db", resources("1", "1Gi"), map[string]string{v1.PodDeletionCost: fmt.Sprint(1 << 29)}, []string{dear, dear})
	before := e.podUIDs()
	beforeUIDs := map[string]bool{}
	for _, uid := range before {
		beforeUIDs[string(uid)] = true
	}

	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(fmt.Sprintf(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
nodeSelector: %s=%s
profiles:
- name: packing
  pluginConfig:
  - name: DefaultEvictor
  - name: HighNodeUtilization
    args:
      thresholds: {cpu: 40, memory: 40}
  - name: Consolidation
    args:
      maxDrainCostPercent: 60
  plugins:
    balance:
      enabled: [HighNodeUtilization]
`, testLabel, e.name)), 0o600); err != nil {
		t.Fatal(err)
	}
	res := runOnce(t, "--policy", policy, "--history-configmap=")

	var mine []plan.Move
	for _, m := range res.Plan.Moves {
		if m.Namespace == e.ns {
			mine = append(mine, m)
			if m.Source != cheap || m.Target != busy || m.Strategy != "HighNodeUtilization" {
				t.Errorf("move %s %s -> %s by %s, want %s's pods onto %s by HighNodeUtilization", m.Pod, m.Source, m.Target, m.Strategy, cheap, busy)
			}
		}
	}
	if len(mine) != 2 {
		t.Errorf("%d moves here, want the 2 web pods", len(mine))
	}
	var costSkips []string
	for _, s := range res.Plan.Skipped {
		if strings.HasPrefix(s.Pod, e.ns+"/") && s.Reason == plan.ReasonCost {
			costSkips = append(costSkips, s.Pod+": "+s.Detail)
			if !strings.HasPrefix(s.Pod, e.ns+"/db-") || !strings.Contains(s.Detail, "node "+dear+" costs 10.00") || !strings.Contains(s.Detail, "5.33") {
				t.Errorf("cost skip %s: %s; want a db pod, %s's cost 10.00 and the average 5.33", s.Pod, s.Detail, dear)
			}
		}
	}
	if len(costSkips) != 1 {
		t.Errorf("cost skips %v, want one, for %s", costSkips, dear)
	}
	var drains []plan.Drain
	for _, d := range res.Plan.Summary.Drains {
		if d.Node == cheap || d.Node == dear || d.Node == busy {
			drains = append(drains, d)
		}
	}
	if len(drains) != 1 || drains[0] != (plan.Drain{Node: cheap, Pods: 2, Cost: 2}) {
		t.Errorf("drains %+v, want %s alone, 2 pods at cost 2", drains, cheap)
	}

	after := append(append(e.boundPods("web", 2), e.boundPods("db", 2)...), e.boundPods("base", 4)...)
	onTarget, backOnSource := landed(mine, beforeUIDs, after)
	if onTarget != len(mine) || backOnSource > 0 {
		t.Errorf("%d of %d replacements on their planned target, %d back on a source", onTarget, len(mine), backOnSource)
	}
	for _, p := range after {
		if p.Labels["app"] == "db" && (!beforeUIDs[string(p.UID)] || p.Spec.NodeName != dear) {
			t.Errorf("db pod %s (%s) on %s: the costly pods must stay as they were on %s", p.Name, p.UID, p.Spec.NodeName, dear)
		}
	}
	used, summary := perNode(after)
	if used[cheap] > 0 {
		t.Errorf("%s still in use: %s", cheap, summary)
	}
	t.Logf("%d moves, %d on target; nodes: %s", len(mine), onTarget, summary)
}
