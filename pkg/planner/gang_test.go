package planner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// TestGangsMoveWhole: a gang's member that a plugin finds misplaced moves
// only with its whole gang: every member leaves its node, each move names
// the gang, and the plan's after-state has no member left behind. When
// one member may not move, none does, the misplaced one is skipped as gang
// naming it, and the node the member runs on is not emptied. Without a gang
// the same cluster is drained and the pod moved alone.
func TestGangsMoveWhole(t *testing.T) {
	build := func(labelled bool) (c *cluster, worker, misplaced *v1.Pod) {
		c = thinCluster(3)
		c.node("tainted", "8", "32Gi", noSchedule)
		c.pod("team-a", "big", "ReplicaSet", "node-01", "500m", "1Gi") // node-01 is the fullest: the others empty onto it
		worker = c.pod("default", "train", "Job", "node-02", "500m", "512Mi")
		misplaced = c.pod("default", "train", "Job", "tainted", "500m", "512Mi")
		if labelled {
			// Two ways of naming one group: by name within the namespace.
			worker.Labels[gang.PodGroupLabel] = "train"
			misplaced.Annotations = map[string]string{gang.GroupNameAnnotation: "train"}
		}
		return c, worker, misplaced
	}
	movesOf := func(p *plan.Plan, pod *v1.Pod) *plan.Move {
		for i := range p.Moves {
			if p.Moves[i].UID == string(pod.UID) {
				return &p.Moves[i]
			}
		}
		return nil
	}

	t.Run("no gang", func(t *testing.T) {
		c, worker, misplaced := build(false)
		p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
		if m := movesOf(p, misplaced); m == nil || m.Gang != "" {
			t.Fatalf("the pod on the tainted node: move %+v, want one of no gang", m)
		}
		if m := movesOf(p, worker); m == nil || !m.Drain {
			t.Fatalf("the worker on node-02: move %+v, want node-02 drained (the test shows nothing)", m)
		}
	})

	t.Run("whole", func(t *testing.T) {
		c, worker, misplaced := build(true)
		p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
		mm, mw := movesOf(p, misplaced), movesOf(p, worker)
		if mm == nil || mw == nil {
			t.Fatalf("moves %+v, skipped %+v: want both members moved", p.Moves, p.Skipped)
		}
		for _, m := range []*plan.Move{mm, mw} {
			if m.Gang != "train" || m.Target == m.Source || m.Target == "tainted" || !m.Steered {
				t.Errorf("move %+v: want gang train, steered off its node, not onto the tainted node", *m)
			}
		}
		if mw.Drain || mw.Balance {
			t.Errorf("the worker's move %+v: it leaves with its gang, neither a drain nor a balance move of its own", *mw)
		}
	})

	t.Run("a member stays", func(t *testing.T) {
		c, worker, misplaced := build(true)
		worker.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
		for _, m := range p.Moves {
			if m.UID == string(misplaced.UID) || m.UID == string(worker.UID) || m.Source == "node-02" {
				t.Errorf("a gang's member moved, or the node one runs on drained: %+v", m)
			}
		}
		found := false
		for _, s := range p.Skipped {
			found = found || s.UID == string(misplaced.UID) && s.Reason == plan.ReasonGang &&
				strings.Contains(s.Detail, "default/"+worker.Name) && strings.Contains(s.Detail, plan.ReasonOptOut)
		}
		if !found {
			t.Errorf("the misplaced member is not skipped as %s naming the opted-out worker: %+v", plan.ReasonGang, p.Skipped)
		}
	})

	t.Run("a member fits nowhere", func(t *testing.T) {
		c, worker, misplaced := build(true)
		// 5.5 CPUs fit on node-02 only: node-00 holds 6.1, node-01 2.6.
		worker.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("5500m")
		c.pod("team-c", "filler", "ReplicaSet", "node-00", "4", "1Gi")
		p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
		if movesOf(p, misplaced) != nil || movesOf(p, worker) != nil {
			t.Errorf("a member moved though another fits nowhere else: %+v", p.Moves)
		}
		found := false
		for _, s := range p.Skipped {
			found = found || s.UID == string(misplaced.UID) && s.Reason == plan.ReasonGang && strings.Contains(s.Detail, plan.ReasonNoFit)
		}
		if !found {
			t.Errorf("the misplaced member is not skipped as %s for its member's no-fit: %+v", plan.ReasonGang, p.Skipped)
		}
	})
}

// TestRefusedGangIsNotJudgedAgain: a strategy asks about every member of a
// gang it wants moved. Once the gang is refused for a member other than the
// one asked about, asking about another member while no move enters or
// leaves the plan refuses it at once, naming the same member, instead of
// judging the whole gang again (n members asked about would cost n² member
// moves).
func TestRefusedGangIsNotJudgedAgain(t *testing.T) {
	c := thinCluster(3)
	var members []*v1.Pod
	for i := range 4 {
		tainted := c.node(fmt.Sprintf("tainted-%d", i), "8", "32Gi", noSchedule)
		for range 3 {
			m := c.pod("default", "train", "Job", tainted.Name, "500m", "512Mi")
			m.Labels[gang.PodGroupLabel] = "train"
			members = append(members, m)
		}
	}
	// One member fits on no node but its own: the gang cannot move.
	stuck := members[len(members)-1]
	stuck.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("7500m")

	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(2)))
	pol, prof := loadPair(t, "binpacking")
	p, err := planOn(klog.NewContext(context.Background(), logger), pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	skipped := map[string]plan.Skip{}
	for _, s := range p.Skipped {
		if s.Strategy == "RemovePodsViolatingNodeTaints" {
			skipped[s.UID] = s
		}
	}
	for _, m := range members[:len(members)-1] {
		s, ok := skipped[string(m.UID)]
		if !ok || s.Reason != plan.ReasonGang || !strings.Contains(s.Detail, "default/"+stuck.Name) || !strings.Contains(s.Detail, plan.ReasonNoFit) {
			t.Errorf("member %s: skip %+v, want %s naming %s's %s", m.Name, s, plan.ReasonGang, stuck.Name, plan.ReasonNoFit)
		}
	}
	for _, m := range p.Moves {
		if m.Gang != "" {
			t.Errorf("a member moved though the gang cannot: %+v", m)
		}
	}
	// Per strategy that asks (the taint plugin, then Consolidation's
	// drains): once, and once more when the stuck member itself is asked
	// about (its own refusal is its own reason); not once per member.
	judged := strings.Count(logger.GetSink().(ktesting.Underlier).GetBuffer().String(), "Moving a gang whole")
	if judged == 0 || judged > 4 {
		t.Errorf("the gang was judged whole %d times for %d members asked about, want at most twice per strategy", judged, len(members))
	}
}

// TestDropTakesTheGangWhole: when the plan's replay drops one member's
// move, the moves of its gang go with it (same gang name in the same
// namespace), each saying why; other moves stay.
func TestDropTakesTheGangWhole(t *testing.T) {
	move := func(ns, name, g string) plan.Move {
		return plan.Move{Pod: ns + "/" + name, Namespace: ns, Name: name, UID: name, Gang: g, Source: "node-a", Target: "node-b"}
	}
	p := &planner{logger: klog.Background(), sources: map[string]int{"node-a": 5}, out: &plan.Plan{Moves: []plan.Move{
		move("ml", "train-0", "train"), move("ml", "web", ""), move("ml", "train-1", "train"), move("other", "train-0", "train"), move("ml", "eval-0", "eval"),
	}}}
	p.applied = make([]applied, len(p.out.Moves))
	p.drop(map[int]refusal{2: {plan.ReasonTargetChanged, "it lands elsewhere"}})
	var kept []string
	for _, m := range p.out.Moves {
		kept = append(kept, m.Pod)
	}
	if want := []string{"ml/web", "other/train-0", "ml/eval-0"}; !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	for _, s := range p.out.Skipped {
		if s.Pod == "ml/train-0" && !strings.Contains(s.Detail, "ml/train-1") {
			t.Errorf("train-0 dropped with %q: want the failed member named", s.Detail)
		}
	}
	if len(p.out.Skipped) != 2 {
		t.Errorf("skipped %+v, want the two members", p.out.Skipped)
	}
	for _, s := range p.out.Skipped {
		if s.Reason != plan.ReasonTargetChanged {
			t.Errorf("%s dropped as %s, want the failed member's %s", s.Pod, s.Reason, plan.ReasonTargetChanged)
		}
	}
}

// TestReplayTakesTheGangWhole: in the plan's replay a gang's other moves go
// with the one that does not land as planned, each with the reason of a
// move that does not (changed): unsteered for a move left anywhere.
func TestReplayTakesTheGangWhole(t *testing.T) {
	p := &planner{out: &plan.Plan{Moves: []plan.Move{
		{Pod: "ml/train-0", Namespace: "ml", Gang: "train"},
		{Pod: "ml/train-1", Namespace: "ml", Gang: "train", Anywhere: true},
		{Pod: "ml/train-2", Namespace: "ml", Gang: "train"},
	}}}
	failed := map[int]refusal{2: {plan.ReasonTargetChanged, "it lands elsewhere"}}
	p.withGangs(failed, changed)
	if failed[0].reason != plan.ReasonTargetChanged || failed[1].reason != plan.ReasonUnsteered {
		t.Errorf("companions dropped as %q and %q, want %s and %s (left anywhere)", failed[0].reason, failed[1].reason, plan.ReasonTargetChanged, plan.ReasonUnsteered)
	}
	if !strings.Contains(failed[1].detail, "ml/train-2") {
		t.Errorf("detail %q: want the failed member named", failed[1].detail)
	}
}

// TestConsolidationDrainsGangsWhole: a node running a gang's member is
// drained when the whole gang may move: its members elsewhere leave their
// nodes with it, onto no node the plan drains, so the plan reaches as few
// nodes as on the same cluster without the gang; when one member must stay,
// no member moves and the nodes of the others stay in use, skipped as gang
// naming that member.
func TestConsolidationDrainsGangsWhole(t *testing.T) {
	build := func(labelled bool) (*cluster, []*v1.Pod) {
		c := thinCluster(5)
		// The fullest nodes are kept; the others, where the gang runs, drained.
		c.pod("team-c", "big", "ReplicaSet", "node-03", "1500m", "1Gi")
		c.pod("team-c", "big", "ReplicaSet", "node-04", "1500m", "1Gi")
		var members []*v1.Pod
		for _, n := range []string{"node-00", "node-00", "node-01", "node-01"} {
			m := c.pod("default", "train", "Job", n, "250m", "512Mi")
			if labelled {
				m.Labels[gang.PodGroupLabel] = "train"
			}
			members = append(members, m)
		}
		return c, members
	}
	control, _ := build(false)
	pc := runPlan(t, control, "binpacking", Options{MinScoreGain: 1})
	if pc.Summary.NodesInUseAfter != 2 {
		t.Fatalf("without a gang: %d nodes in use after, want 2 (the test shows nothing)", pc.Summary.NodesInUseAfter)
	}

	c, members := build(true)
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	pol, _ := loadPair(t, "binpacking")
	checkInvariants(t, c, pol, p)
	if p.Summary.NodesInUseAfter != pc.Summary.NodesInUseAfter {
		t.Errorf("with a gang: %d nodes in use after, want %d as without", p.Summary.NodesInUseAfter, pc.Summary.NodesInUseAfter)
	}
	drained := map[string]bool{}
	for _, m := range p.Moves {
		if m.Drain {
			drained[m.Source] = true
		}
	}
	moved := 0
	for _, m := range p.Moves {
		if drained[m.Target] {
			t.Errorf("%s moved onto %s, which the plan drains", m.Pod, m.Target)
		}
		for _, member := range members {
			if m.UID == string(member.UID) {
				moved++
				if m.Gang != "train" {
					t.Errorf("member %s moved as gang %q, want train", m.Pod, m.Gang)
				}
			}
		}
	}
	if moved != 0 && moved != len(members) {
		t.Errorf("%d of the gang's %d members moved: a gang moves whole or not at all", moved, len(members))
	}
	if moved == 0 {
		t.Errorf("no member moved: the gang still pins its nodes (moves %+v)", p.Moves)
	}

	for _, tc := range []struct {
		name, why string
		stay      func(*v1.Pod)
	}{
		{"opted out", plan.ReasonOptOut, func(p *v1.Pod) { p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"} }},
		{"sticky", plan.ReasonSticky, func(p *v1.Pod) { makeSticky(p) }}, // Consolidation's moves are balance moves
	} {
		t.Run("a member "+tc.name, func(t *testing.T) {
			c, members := build(true)
			tc.stay(members[3])
			p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
			for _, m := range p.Moves {
				for _, member := range members {
					if m.UID == string(member.UID) || m.Source == member.Spec.NodeName {
						t.Errorf("%s moved off %s, which runs a member of a gang that may not move", m.Pod, m.Source)
					}
				}
			}
			found := false
			for _, s := range p.Skipped {
				found = found || s.UID == string(members[0].UID) && s.Reason == plan.ReasonGang &&
					strings.Contains(s.Detail, "default/"+members[3].Name) && strings.Contains(s.Detail, tc.why)
			}
			if !found {
				t.Errorf("member %s not skipped as %s naming %s member %s: %+v", members[0].Name, plan.ReasonGang, tc.why, members[3].Name, p.Skipped)
			}
		})
	}
}

// BenchmarkGangPlan measures one plan of the shipped bin-packing pair on a
// generated cluster of 500 nodes holding one gang of a given size (the
// snapshot is generated before the timer starts): plan time must grow
// about linearly with the gang, not with its square.
//
//	go test ./pkg/planner/ -run '^$' -bench GangPlan -benchtime 1x
func BenchmarkGangPlan(b *testing.B) {
	for _, members := range []int{1000, 3000, 10000} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			snap, err := synthetic.Generate(synthetic.Options{Nodes: 500, Pods: 30*500 + members, Seed: 1, Gang: members})
			if err != nil {
				b.Fatal(err)
			}
			pol, prof := loadPair(b, "binpacking")
			_, ctx := ktesting.NewTestContext(b)
			b.ResetTimer()
			var moves, gangSkips int
			for i := 0; i < b.N; i++ {
				p, err := planOn(ctx, pol, prof, snap, Options{MinScoreGain: 1})
				if err != nil {
					b.Fatal(err)
				}
				moves, gangSkips = len(p.Moves), 0
				for _, s := range p.Skipped {
					if s.Reason == plan.ReasonGang {
						gangSkips++
					}
				}
			}
			b.ReportMetric(float64(moves), "moves")
			b.ReportMetric(float64(gangSkips), "gang-skips")
		})
	}
}
