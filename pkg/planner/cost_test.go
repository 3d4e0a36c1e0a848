package planner

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/consolidation"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// consolidationArgs returns the policy's Consolidation args, to change.
func consolidationArgs(t *testing.T, pol *api.DeschedulerPolicy) *consolidation.Args {
	t.Helper()
	for _, prof := range pol.Profiles {
		for _, pc := range prof.PluginConfigs {
			if a, ok := pc.Args.(*consolidation.Args); ok {
				return a
			}
		}
	}
	t.Fatal("the policy configures no Consolidation")
	return nil
}

// planCost plans on c with the policy and the profile.
func planCost(t *testing.T, pol *api.DeschedulerPolicy, prof *config.KubeSchedulerProfile, c *cluster) *plan.Plan {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	p, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// drained are the nodes a plan empties, by its summary, with their cost.
func drained(p *plan.Plan) map[string]float64 {
	out := map[string]float64{}
	for _, d := range p.Summary.Drains {
		out[d.Node] = d.Cost
	}
	return out
}

// TestDrainCost: what emptying a node costs (its pods' evictions, more for
// a pod-deletion-cost or a priority) decides between equally utilized
// nodes, and with maxDrainCostPercent a node that costs more than that
// share of the average node in use is not emptied at all. The plan reports
// each drain's cost.
func TestDrainCost(t *testing.T) {
	t.Run("cheapest of equally utilized nodes first", func(t *testing.T) {
		pol, prof := loadPair(t, "binpacking")
		consolidationArgs(t, pol).MaxNodesPerCycle = 1
		c := thinCluster(4)
		for _, p := range c.snap.Pods {
			if p.Spec.NodeName == "node-00" && p.Namespace != "kube-system" {
				p.Annotations = map[string]string{v1.PodDeletionCost: fmt.Sprint(1 << 30)}
			}
		}
		p := planCost(t, pol, prof, c)
		got := drained(p)
		if len(got) != 1 {
			t.Fatalf("drained %v, want one node (maxNodesPerCycle 1)", got)
		}
		if cost, ok := got["node-01"]; !ok || cost != 2 {
			t.Errorf("drained %v; want node-01 at cost 2, the first of the cheap nodes, not node-00 (cost 18)", got)
		}
		for _, m := range p.Moves {
			if m.Cost != 1 {
				t.Errorf("%s: cost %v, want 1", m.Pod, m.Cost)
			}
		}
	})
	t.Run("maxDrainCostPercent", func(t *testing.T) {
		// node-00 is the least utilized, with one pod of high priority
		// (cost 3); the other five hold two plain pods each (cost 2): the
		// average node in use costs 13/6.
		build := func() *cluster {
			c := thinCluster(6)
			prio := int32(1 << 26)
			for _, p := range c.snap.Pods {
				if p.Spec.NodeName == "node-00" && p.Namespace == "team-a" {
					p.Spec.Priority = &prio
				}
			}
			kept := c.snap.Pods[:0]
			for _, p := range c.snap.Pods {
				if p.Spec.NodeName != "node-00" || p.Namespace != "team-b" {
					kept = append(kept, p)
				}
			}
			c.snap.Pods = kept
			return c
		}
		pol, prof := loadPair(t, "binpacking")
		free := planCost(t, pol, prof, build())
		if cost, ok := drained(free)["node-00"]; !ok || cost != 3 {
			t.Fatalf("without a cost limit drained %v, want node-00 (cost 3) among them: the test proves nothing", drained(free))
		}
		consolidationArgs(t, pol).MaxDrainCostPercent = 100
		limited := planCost(t, pol, prof, build())
		got := drained(limited)
		if _, ok := got["node-00"]; ok {
			t.Errorf("with maxDrainCostPercent 100 drained %v: node-00 costs 3, above the average 2.17", got)
		}
		if len(got) == 0 {
			t.Errorf("with maxDrainCostPercent 100 nothing drained; the nodes of cost 2 are below the average")
		}
		// The plan says why node-00 stays, naming its costliest pod.
		said := 0
		for _, s := range limited.Skipped {
			if s.Reason == plan.ReasonCost {
				said++
				if !strings.HasPrefix(s.Pod, "team-a/") || !strings.Contains(s.Detail, "node-00 costs 3.00") || !strings.Contains(s.Detail, "2.17") {
					t.Errorf("cost skip %s: %s; want node-00's high-priority pod, its cost and the average", s.Pod, s.Detail)
				}
			}
		}
		if said != 1 {
			t.Errorf("%d skips for cost, want 1 (node-00)", said)
		}
		for n, cost := range got {
			if cost > 13.0/6 {
				t.Errorf("drained %s at cost %v, above the limit", n, cost)
			}
		}
		t.Logf("without a limit %v; with 100%% %v", drained(free), got)
	})
}
