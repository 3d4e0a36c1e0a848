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

// packingByHNU is HighNodeUtilization alone, with Consolidation's
// arguments configured (not enabled) to set the profile's drain budget.
const packingByHNU = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: hnu
  pluginConfig:
  - name: DefaultEvictor
  - name: HighNodeUtilization
    args:
      thresholds: {cpu: 40, memory: 40}
  - name: Consolidation
    args:
      maxDrainCostPercent: %d
  plugins:
    balance:
      enabled: [HighNodeUtilization]
`

// tiedSources is a cluster where HighNodeUtilization empties onto dest
// (busy; room for destRoom CPUs) two equally utilized nodes, each with two
// pods of a CPU: node-a's pods have a pod-deletion-cost of 2^29 (each
// counts 5), node-b's none. Emptying node-a costs 10 evictions, node-b 2.
func tiedSources(destRoom int) *cluster {
	c := newCluster()
	for _, n := range []string{"node-a", "node-b", "dest"} {
		cpu := "8"
		if n == "dest" {
			cpu = "16100m" // 16 CPUs beside its DaemonSet pod's 100m
		}
		c.node(n, cpu, "32Gi")
		c.pod("kube-system", "log-agent", "DaemonSet", n, "100m", "128Mi")
	}
	for range 16 - destRoom {
		c.pod("team-c", "db", "ReplicaSet", "dest", "1", "1Gi")
	}
	for range 2 {
		c.pod("team-a", "api", "ReplicaSet", "node-a", "1", "1Gi").Annotations = map[string]string{v1.PodDeletionCost: fmt.Sprint(1 << 29)}
		c.pod("team-b", "web", "ReplicaSet", "node-b", "1", "1Gi")
	}
	return c
}

// TestHighNodeUtilizationDrainCost: HighNodeUtilization empties the nodes
// it evicts from, so of equally utilized sources the cheapest to empty
// goes first (not the first by name), the profile's maxDrainCostPercent
// holds it as it holds Consolidation, and the nodes it empties are the
// plan's drains, with their cost.
func TestHighNodeUtilizationDrainCost(t *testing.T) {
	_, prof := loadPair(t, "binpacking")
	only := func(t *testing.T, p *plan.Plan, node string, cost float64) {
		t.Helper()
		if got := drained(p); len(got) != 1 || got[node] != cost {
			t.Fatalf("drained %v, want %s alone at cost %v; moves %+v", got, node, cost, p.Moves)
		}
		for _, m := range p.Moves {
			if m.Strategy != "HighNodeUtilization" || m.Source != node || m.Target != "dest" {
				t.Errorf("move %s %s -> %s by %s, want %s's pods onto dest by HighNodeUtilization", m.Pod, m.Source, m.Target, m.Strategy, node)
			}
		}
	}
	t.Run("cheapest of tied sources first", func(t *testing.T) {
		// Room for one source only.
		only(t, planCost(t, loadPolicy(t, fmt.Sprintf(packingByHNU, 0)), prof, tiedSources(2)), "node-b", 2)
	})
	t.Run("cheapest first, whatever the names", func(t *testing.T) {
		c := tiedSources(2)
		for _, pod := range c.snap.Pods {
			switch pod.Namespace {
			case "team-a":
				pod.Annotations = nil
			case "team-b":
				pod.Annotations = map[string]string{v1.PodDeletionCost: fmt.Sprint(1 << 29)}
			}
		}
		only(t, planCost(t, loadPolicy(t, fmt.Sprintf(packingByHNU, 0)), prof, c), "node-a", 2)
	})
	t.Run("maxDrainCostPercent", func(t *testing.T) {
		// Room for both. Nodes in use cost 12 (dest), 10 and 2: 8 on
		// average; at 60 % the limit is 4.8, so node-a stays.
		free := planCost(t, loadPolicy(t, fmt.Sprintf(packingByHNU, 0)), prof, tiedSources(4))
		if got := drained(free); len(got) != 2 {
			t.Fatalf("without a limit drained %v, want node-a and node-b: the test proves nothing", got)
		}
		limited := planCost(t, loadPolicy(t, fmt.Sprintf(packingByHNU, 60)), prof, tiedSources(4))
		only(t, limited, "node-b", 2)
		var said []plan.Skip
		for _, s := range limited.Skipped {
			if s.Reason == plan.ReasonCost {
				said = append(said, s)
			}
		}
		if len(said) != 1 || !strings.HasPrefix(said[0].Pod, "team-a/") || said[0].Strategy != "HighNodeUtilization" ||
			!strings.Contains(said[0].Detail, "node-a costs 10.00") || !strings.Contains(said[0].Detail, "8.00") {
			t.Errorf("cost skips %+v, want one for node-a naming its cost and the average 8.00", said)
		}
	})
}
