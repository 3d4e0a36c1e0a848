package planner

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// packingWithinLimits is HighNodeUtilization alone under a namespace limit.
func packingWithinLimits(t *testing.T, perNamespace uint) *api.DeschedulerPolicy {
	pol := loadPolicy(t, fmt.Sprintf(packingByHNU, 0))
	pol.MaxNoOfPodsToEvictPerNamespace = &perNamespace
	return pol
}

// thinNodes is a cluster where HighNodeUtilization empties thin nodes onto
// dest (busy, room for all of them): each thin node holds the pods of
// namespaces[i], in that order, of 1Gi each and CPU growing with i, so the
// plugin walks the nodes in order.
func thinNodes(namespaces [][]string) *cluster {
	c := newCluster()
	c.node("dest", "64", "256Gi")
	c.pod("team-c", "db", "ReplicaSet", "dest", "40", "100Gi")
	for i, nss := range namespaces {
		node := fmt.Sprintf("thin-%02d", i)
		c.node(node, "8", "32Gi")
		c.pod("kube-system", "log-agent", "DaemonSet", node, "100m", "128Mi")
		for j, ns := range nss {
			c.pod(ns, fmt.Sprintf("app%d", j), "ReplicaSet", node, fmt.Sprintf("%dm", 200+10*i), "1Gi")
		}
	}
	return c
}

// withdrawn are the moves the plan made and then took back because their
// source stayed in use: each spent the policy's limits for nothing.
func withdrawn(p *plan.Plan) []plan.Skip {
	var out []plan.Skip
	for _, s := range p.Skipped {
		if s.Reason == plan.ReasonNoNodeFreed && strings.HasPrefix(s.Detail, "the plan leaves") {
			out = append(out, s)
		}
	}
	return out
}

// TestPackingSpendsNoLimitOnNodesItCannotEmpty: a packing plugin's move
// holds only if its node is emptied, so the plan does not begin emptying a
// node the policy's namespace limit cannot empty whole: the evictions it
// would have spent there and then taken back are left to nodes it can
// empty.
func TestPackingSpendsNoLimitOnNodesItCannotEmpty(t *testing.T) {
	_, prof := loadPair(t, "binpacking")
	pol := packingWithinLimits(t, 2)
	// thin-00 spends team-a's 2; thin-01 and thin-02 each need one more of
	// team-a; thin-03 needs 2 of team-b, which only the first two would
	// have spent.
	p := planCost(t, pol, prof, thinNodes([][]string{
		{"team-a", "team-a"}, {"team-a", "team-b"}, {"team-b", "team-a"}, {"team-b", "team-b"},
	}))
	if got := drained(p); len(got) != 2 || got["thin-00"] == 0 || got["thin-03"] == 0 {
		t.Errorf("drained %v, want thin-00 and thin-03; moves %+v", got, p.Moves)
	}
	if w := withdrawn(p); len(w) > 0 {
		t.Errorf("moves taken back after spending the limits: %+v", w)
	}
	for _, node := range []string{"thin-01", "thin-02"} {
		said := false
		for _, s := range p.Skipped {
			said = said || s.Reason == plan.ReasonLimit && strings.Contains(s.Detail, "emptying "+node+" takes 1 evictions in team-a and maxNoOfPodsToEvictPerNamespace 2 leaves 0")
		}
		if !said {
			t.Errorf("no skip says the namespace limit keeps %s in use: %+v", node, p.Skipped)
		}
	}
}

// TestPackingWithinLimitsOnRandomClusters: whatever the namespaces of the
// thin nodes' pods, the plan takes back no packing move for a node it left
// in use, and a thin node it leaves in use is one the namespace limit
// could not have emptied on top of the plan's moves.
func TestPackingWithinLimitsOnRandomClusters(t *testing.T) {
	_, prof := loadPair(t, "binpacking")
	teams := []string{"team-a", "team-b", "default"}
	for seed := range int64(12) {
		r := rand.New(rand.NewSource(seed))
		limit := 2 + r.Intn(4)
		nodes := make([][]string, 6+r.Intn(6))
		for i := range nodes {
			for range 1 + r.Intn(3) {
				nodes[i] = append(nodes[i], teams[r.Intn(len(teams))])
			}
		}
		p := planCost(t, packingWithinLimits(t, uint(limit)), prof, thinNodes(nodes))
		if w := withdrawn(p); len(w) > 0 {
			t.Errorf("seed %d: moves taken back after spending the limits: %+v", seed, w)
		}
		spent := map[string]int{}
		for _, m := range p.Moves {
			spent[m.Namespace]++
		}
		emptied := drained(p)
		for i, nss := range nodes {
			node := fmt.Sprintf("thin-%02d", i)
			if emptied[node] > 0 {
				continue
			}
			need := map[string]int{}
			for _, ns := range nss {
				need[ns]++
			}
			fits := true
			for ns, n := range need {
				fits = fits && spent[ns]+n <= limit
			}
			if fits {
				t.Errorf("seed %d (limit %d, nodes %v): %s stays in use though the limit left room to empty it; spent %v", seed, limit, nodes, node, spent)
			}
		}
	}
}

// TestPackingLeavesANodeWithAPodThatStays: a packing plugin moves no pod
// off a node another pod of which must stay: the others are refused
// because the node would not be freed, naming the one that stays, which,
// if asked, is refused for its own reason.
func TestPackingLeavesANodeWithAPodThatStays(t *testing.T) {
	_, prof := loadPair(t, "binpacking")
	c := thinNodes([][]string{{"team-a", "team-b"}})
	c.pdb("team-a", "app0", 0)
	p := planCost(t, packingWithinLimits(t, 10), prof, c)
	if len(p.Moves) != 0 {
		t.Fatalf("%d moves, want none: thin-00 cannot be emptied; %+v", len(p.Moves), p.Moves)
	}
	reasons := map[string]string{}
	for _, s := range p.Skipped {
		reasons[s.Pod] = s.Reason + ": " + s.Detail
	}
	if why, asked := reasons["team-a/app0-3"]; asked && !strings.HasPrefix(why, "pdb: ") {
		t.Errorf("team-a/app0-3 skipped as %q, want pdb", why)
	}
	if why, want := reasons["team-b/app1-4"], "no-node-freed: team-a/app0-3 stays on thin-00 (pdb: "; !strings.HasPrefix(why, want) {
		t.Errorf("team-b/app1-4 skipped as %q, want %q...", why, want)
	}
}

// TestPackingLeavesANodeEvictedInTheBackground: a pod its owner evicts in
// the background leaves in its own time, after this plan, so its node
// stays in use: neither packing plugin begins to empty it (nothing is
// taken back after spending the limits), and both empty the next node.
func TestPackingLeavesANodeEvictedInTheBackground(t *testing.T) {
	_, prof := loadPair(t, "binpacking")
	for name, pol := range map[string]*api.DeschedulerPolicy{
		"HighNodeUtilization": packingWithinLimits(t, 10),
		"Consolidation":       loadPolicy(t, consolidationAlone),
	} {
		t.Run(name, func(t *testing.T) {
			c := thinNodes([][]string{{"team-a", "team-b"}, {"team-b", "team-b"}})
			for _, pod := range c.snap.Pods {
				if pod.Spec.NodeName == "thin-00" && pod.Namespace == "team-a" {
					pod.Annotations = map[string]string{evictions.EvictionInProgressAnnotationKey: ""}
				}
			}
			p := planCost(t, pol, prof, c)
			if got := drained(p); len(got) != 1 || got["thin-01"] == 0 {
				t.Errorf("drained %v, want thin-01 alone; moves %+v", got, p.Moves)
			}
			for _, m := range p.Moves {
				if m.Source == "thin-00" {
					t.Errorf("move %s off thin-00, which its pod evicted in the background keeps in use", m.Pod)
				}
			}
			if w := withdrawn(p); len(w) > 0 {
				t.Errorf("moves taken back after spending the limits: %+v", w)
			}
		})
	}
}

// consolidationAlone is Consolidation alone, on CPU and memory.
const consolidationAlone = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: consolidation
  pluginConfig:
  - name: DefaultEvictor
  - name: Consolidation
    args:
      resources: [cpu, memory]
      maxNodesPerCycle: 50
  plugins:
    balance:
      enabled: [Consolidation]
`

// TestConsolidationAsksNoDrainTheLimitsCannotTake: Consolidation drains a
// node all or nothing, so it does not begin one whose pods the namespace
// or total limits cannot all take: the node is refused up front, naming
// the limit and the need, and the plugin goes on to the next, which may
// need fewer evictions.
func TestConsolidationAsksNoDrainTheLimitsCannotTake(t *testing.T) {
	_, prof := loadPair(t, "binpacking")
	refused := func(p *plan.Plan, detail string) bool {
		for _, s := range p.Skipped {
			if s.Strategy == "Consolidation" && s.Reason == plan.ReasonLimit && s.Detail == detail {
				return true
			}
		}
		return false
	}

	t.Run("namespace", func(t *testing.T) {
		pol := loadPolicy(t, consolidationAlone)
		pol.MaxNoOfPodsToEvictPerNamespace = ptrTo(uint(2))
		p := planCost(t, pol, prof, thinNodes([][]string{
			{"team-a", "team-a"}, {"team-a", "team-b"}, {"team-b", "team-a"}, {"team-b", "team-b"},
		}))
		if got := drained(p); len(got) != 2 || got["thin-00"] == 0 || got["thin-03"] == 0 {
			t.Errorf("drained %v, want thin-00 and thin-03; moves %+v", got, p.Moves)
		}
		for _, node := range []string{"thin-01", "thin-02"} {
			if want := "emptying " + node + " takes 1 evictions in team-a and maxNoOfPodsToEvictPerNamespace 2 leaves 0"; !refused(p, want) {
				t.Errorf("no Consolidation skip says %q: %+v", want, p.Skipped)
			}
		}
	})

	t.Run("total", func(t *testing.T) {
		// Tried lightest first: light (2 pods) fits the total of 3, mid's
		// 3 pods do not fit the 1 left, heavy's single pod does.
		c := newCluster()
		c.node("dest", "64", "256Gi")
		c.pod("team-c", "db", "ReplicaSet", "dest", "40", "100Gi")
		for _, n := range []struct {
			node string
			pods []string
		}{{"light", []string{"200m", "200m"}}, {"mid", []string{"200m", "200m", "200m"}}, {"heavy", []string{"2"}}} {
			c.node(n.node, "8", "32Gi")
			for i, cpu := range n.pods {
				c.pod("team-a", fmt.Sprintf("%s%d", n.node, i), "ReplicaSet", n.node, cpu, "1Gi")
			}
		}
		pol := loadPolicy(t, consolidationAlone)
		pol.MaxNoOfPodsToEvictTotal = ptrTo(uint(3))
		p := planCost(t, pol, prof, c)
		if got := drained(p); len(got) != 2 || got["light"] == 0 || got["heavy"] == 0 {
			t.Errorf("drained %v, want light and heavy; moves %+v", got, p.Moves)
		}
		if want := "emptying mid takes 3 evictions and maxNoOfPodsToEvictTotal 3 leaves 1"; !refused(p, want) {
			t.Errorf("no Consolidation skip says %q: %+v", want, p.Skipped)
		}
	})
}
