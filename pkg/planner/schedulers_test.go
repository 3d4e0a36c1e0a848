package planner

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/webhook"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// schedulers loads the shipped bin-packing profile and any extra files;
// default-scheduler is kube-scheduler's default unless a file configures it.
func schedulers(t *testing.T, extra ...string) []*config.KubeSchedulerProfile {
	t.Helper()
	profs, _, err := profile.Schedulers(append([]string{policies("binpacking-scheduler.yaml")}, extra...), "")
	if err != nil {
		t.Fatal(err)
	}
	return profs
}

// mostAllocated is a user's own packing profile for default-scheduler:
// NodeResourcesFit MostAllocated, every other weight at its default, no
// RebalanceHint.
func mostAllocated(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "user-scheduler.yaml")
	err := os.WriteFile(path, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// simulation simulates snap with the profiles; its informers run until the
// test ends.
func simulation(t *testing.T, profs []*config.KubeSchedulerProfile, snap *snapshot.Snapshot) (context.Context, *simulator.Simulator) {
	t.Helper()
	_, ctx := testutil.Context(t)
	sim, err := simulator.New(ctx, profs, snap)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, sim
}

func podsByUID(snap *snapshot.Snapshot) map[string]*v1.Pod {
	out := make(map[string]*v1.Pod, len(snap.Pods))
	for _, pod := range snap.Pods {
		out[string(pod.UID)] = pod
	}
	return out
}

func planWith(t *testing.T, profs []*config.KubeSchedulerProfile, pol *api.DeschedulerPolicy, snap *snapshot.Snapshot) *plan.Plan {
	t.Helper()
	return planWithOptions(t, profs, pol, snap, Options{MinScoreGain: 1})
}

func planWithOptions(t *testing.T, profs []*config.KubeSchedulerProfile, pol *api.DeschedulerPolicy, snap *snapshot.Snapshot, opts Options) *plan.Plan {
	t.Helper()
	ctx, sim := simulation(t, profs, snap)
	p, err := Plan(ctx, sim, pol, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// thinPlan plans the shipped bin-packing pair on a thin cluster of 12
// nodes, for the recheck tests that then change the cluster under the plan.
func thinPlan(t *testing.T) (*cluster, *api.DeschedulerPolicy, []*config.KubeSchedulerProfile, *plan.Plan) {
	t.Helper()
	c := thinCluster(12)
	pol, _ := loadPair(t, "binpacking")
	profs := schedulers(t)
	p := planWith(t, profs, pol, c.snap)
	if len(p.Moves) == 0 {
		t.Fatal("nothing planned")
	}
	return c, pol, profs, p
}

// countMoves counts the plan's moves that match.
func countMoves(p *plan.Plan, match func(plan.Move) bool) int {
	n := 0
	for _, m := range p.Moves {
		if match(m) {
			n++
		}
	}
	return n
}

// setScheduler puts every workload pod of the namespace on a scheduler.
func (c *cluster) setScheduler(ns, name string) {
	for _, p := range c.snap.Pods {
		if p.Namespace == ns {
			p.Spec.SchedulerName = name
		}
	}
}

// TestEachPodWithItsScheduler: a thin cluster whose workloads belong to
// three schedulers. rebalancer-scheduler's pods (hinted) are consolidated;
// default-scheduler's (kube-scheduler's default profile, which spreads) are
// not moved by the packing plugins; the pods of a scheduler nobody modelled
// are never moved and are counted by name.
func TestEachPodWithItsScheduler(t *testing.T) {
	c := thinCluster(12)
	for _, p := range c.snap.Pods {
		switch p.Spec.NodeName {
		case "node-08", "node-09":
			p.Spec.SchedulerName = "default-scheduler"
		case "node-10", "node-11":
			if p.Namespace == "team-a" {
				p.Spec.SchedulerName = "gpu-scheduler"
			}
		}
	}
	// A node under maintenance holds a pod of each of the other two.
	c.node("node-12", "8", "32Gi", noSchedule)
	gpu := c.pod("team-a", "trainer", "ReplicaSet", "node-12", "1", "1Gi")
	gpu.Spec.SchedulerName = "gpu-scheduler"
	web := c.pod("team-b", "shop", "ReplicaSet", "node-12", "1", "1Gi")
	web.Spec.SchedulerName = "default-scheduler"
	pol, _ := loadPair(t, "binpacking")
	p := planWith(t, schedulers(t), pol, c.snap)
	checkInvariants(t, c, pol, p)
	if !moved(p, web) {
		t.Errorf("default-scheduler's pod on the tainted node is not moved: %+v", p.Skipped)
	}
	if moved(p, gpu) || !skippedFor(p, gpu, plan.ReasonUnknownScheduler) {
		t.Errorf("gpu-scheduler's pod on the tainted node is not skipped as %s", plan.ReasonUnknownScheduler)
	}

	byUID := podsByUID(c.snap)
	for _, m := range p.Moves {
		pod := byUID[m.UID]
		if m.Scheduler != simulator.SchedulerName(pod) {
			t.Errorf("move of %s names scheduler %q, the pod's is %q", m.Pod, m.Scheduler, simulator.SchedulerName(pod))
		}
		if m.Strategy != "RemovePodsViolatingNodeTaints" && (m.Scheduler != "rebalancer-scheduler" || !m.Steered) {
			t.Errorf("move of %s by %s (scheduler %s, steered %v): only rebalancer-scheduler's pods can be packed here", m.Pod, m.Strategy, m.Scheduler, m.Steered)
		}
	}
	if n := p.Summary.UnknownSchedulers["gpu-scheduler"]; n == 0 {
		t.Errorf("no eviction skipped for gpu-scheduler's pods: summary %+v", p.Summary)
	}
	for _, s := range p.Skipped {
		pod := byUID[s.UID]
		if simulator.SchedulerName(pod) == "gpu-scheduler" && s.Reason != plan.ReasonUnknownScheduler && s.Reason != plan.ReasonProtected {
			t.Errorf("%s of gpu-scheduler skipped as %s, want %s", s.Pod, s.Reason, plan.ReasonUnknownScheduler)
		}
	}
	if len(p.Moves) == 0 {
		t.Error("nothing planned for rebalancer-scheduler's pods")
	}
}

// TestThinDefaultSchedulerClusterIsNotDrained: with every workload on
// kube-scheduler's default profile, no drain holds (it would spread the
// replacements onto the emptiest nodes), so nothing is evicted.
func TestThinDefaultSchedulerClusterIsNotDrained(t *testing.T) {
	c := thinCluster(12)
	c.setScheduler("team-a", "default-scheduler")
	c.setScheduler("team-b", "default-scheduler")
	pol, _ := loadPair(t, "binpacking")
	p := planWith(t, schedulers(t), pol, c.snap)
	if len(p.Moves) != 0 {
		t.Fatalf("planned %d moves for default-scheduler pods, want none: %+v", len(p.Moves), p.Moves)
	}
	if p.Summary.SkippedByReason[plan.ReasonConflict]+p.Summary.SkippedByReason[plan.ReasonUnsteered] == 0 {
		t.Errorf("no skip says why: %+v", p.Summary.SkippedByReason)
	}
}

// TestTaintMoveOfDefaultSchedulerPod: a pod of default-scheduler on a node
// with an untolerated NoSchedule taint is moved: wherever kube-scheduler
// puts it, it leaves the node, which it cannot return to.
func TestTaintMoveOfDefaultSchedulerPod(t *testing.T) {
	c := newCluster()
	c.node("node-00", "8", "32Gi", noSchedule)
	for _, n := range []string{"node-01", "node-02", "node-03"} {
		c.node(n, "8", "32Gi")
	}
	pod := c.pod("team-a", "api", "ReplicaSet", "node-00", "1", "1Gi")
	c.pod("team-b", "web", "ReplicaSet", "node-01", "1", "1Gi")
	c.setScheduler("team-a", "default-scheduler")
	c.setScheduler("team-b", "default-scheduler")
	pol, _ := loadPair(t, "binpacking")
	p := planWith(t, schedulers(t), pol, c.snap)
	if !moved(p, pod) {
		t.Fatalf("the pod on the tainted node is not moved: %+v", p.Skipped)
	}
	m := p.Moves[0]
	if m.Steered || m.Scheduler != "default-scheduler" || m.Source != "node-00" || m.Target == "node-00" {
		t.Errorf("move %+v: want an unsteered default-scheduler move off node-00", m)
	}
}

// TestPlanIsItsReplay: on random clusters, with the shipped profile and
// with a user's MostAllocated profile without RebalanceHint, replaying a
// plan the way the cluster carries it out (all replacements pending
// together, queue order, each pod's own scheduler, hints only where
// followed) puts every replacement where the plan says, and no move goes
// onto a node the plan moves pods off.
func TestPlanIsItsReplay(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		for _, user := range []bool{false, true} {
			c := fragmented(seed)
			extra := []string{}
			if user {
				c.setScheduler("team-a", "default-scheduler")
				c.setScheduler("team-b", "default-scheduler")
				extra = append(extra, mostAllocated(t))
			}
			pol, _ := loadPair(t, "binpacking")
			profs := schedulers(t, extra...)
			p := planWith(t, profs, pol, c.snap)
			checkInvariants(t, c, pol, p)

			sources := map[string]bool{}
			for _, m := range p.Moves {
				sources[m.Source] = true
			}
			ctx, sim := simulation(t, profs, c.snap)
			byUID := podsByUID(c.snap)
			evictions := make([]simulator.Eviction, len(p.Moves))
			for i, m := range p.Moves {
				pod := byUID[m.UID]
				evictions[i] = simulator.Eviction{Pod: pod, Hint: &hint.Hint{Source: m.Source, Target: m.Target, PlanID: p.ID},
					Replacement: simulator.NewReplacement(pod, pod.Name+"-new", pod.UID+"-new", pod.CreationTimestamp.Time)}
			}
			landed, err := sim.Replay(ctx, evictions, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range p.Moves {
				if sources[m.Target] {
					t.Errorf("seed %d user %v: %s moves onto %s, which the plan empties", seed, user, m.Pod, m.Target)
				}
				if landed[i].Node == m.Source || landed[i].Node == "" {
					t.Errorf("seed %d user %v: %s's replacement lands on %q (source %s)", seed, user, m.Pod, landed[i].Node, m.Source)
				}
				if (m.Steered || landed[i].Certain) && landed[i].Node != m.Target && m.Strategy != "RemovePodsViolatingNodeTaints" {
					t.Errorf("seed %d user %v: %s (%s, steered %v) planned onto %s, replayed onto %s", seed, user, m.Pod, m.Strategy, m.Steered, m.Target, landed[i].Node)
				}
			}
		}
	}
}

// recheckAll rechecks a plan's moves in order on a simulation of snap.
func recheckAll(t *testing.T, profs []*config.KubeSchedulerProfile, pol *api.DeschedulerPolicy, snap *snapshot.Snapshot, p *plan.Plan) []string {
	t.Helper()
	ctx, sim := simulation(t, profs, snap)
	r := NewRecheck(sim, p, 1)
	byUID := podsByUID(snap)
	var refused []string
	for _, m := range p.Moves {
		if ok, reason, detail := r.Validate(ctx, m, byUID[m.UID]); !ok {
			refused = append(refused, m.Pod+": "+reason+": "+detail)
		}
	}
	return refused
}

// TestRecheckAcceptsThePlanOnItsOwnView: rechecked in order on the view
// it was made on, every move of a plan holds, steered or not.
func TestRecheckAcceptsThePlanOnItsOwnView(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		c := fragmented(seed)
		c.setScheduler("team-b", "default-scheduler")
		pol, _ := loadPair(t, "binpacking")
		profs := schedulers(t, mostAllocated(t))
		p := planWith(t, profs, pol, c.snap)
		if refused := recheckAll(t, profs, pol, c.snap, p); len(refused) > 0 {
			t.Errorf("seed %d: %d of %d moves refused on the plan's own view: %v", seed, len(refused), len(p.Moves), refused)
		}
	}
}

// TestRecheckRefusesAFilledTarget: a node the plan moves pods onto fills up
// after the plan; the moves onto it are refused, the others still hold.
func TestRecheckRefusesAFilledTarget(t *testing.T) {
	c, pol, profs, p := thinPlan(t)
	target := p.Moves[0].Target
	onto := countMoves(p, func(m plan.Move) bool { return m.Target == target })
	// Someone else's pod takes the rest of the target.
	c.pod("team-a", "newcomer", "ReplicaSet", target, "5", "20Gi")
	refused := recheckAll(t, profs, pol, c.snap, p)
	if len(refused) < 1 || len(refused) > onto {
		t.Fatalf("refused %v; want the moves onto %s (%d of %d)", refused, target, onto, len(p.Moves))
	}
	for _, r := range refused {
		if !strings.Contains(r, plan.ReasonNoFit) {
			t.Errorf("refused %s, want %s", r, plan.ReasonNoFit)
		}
	}
}

// extended loads the shipped bin-packing profile and the extender snippet
// for default-scheduler, and simulates snap with the extender modelled.
func extended(t *testing.T, snap *snapshot.Snapshot, files ...string) (context.Context, *simulator.Simulator) {
	t.Helper()
	profs, exts, err := profile.Schedulers(files, "")
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := testutil.Context(t)
	sim, err := simulator.New(ctx, profs, snap, simulator.WithExtenders(profile.ExtenderWeights(exts)))
	if err != nil {
		t.Fatal(err)
	}
	return ctx, sim
}

// TestThinDefaultSchedulerClusterWithExtender: the thin cluster of
// default-scheduler workloads that is not drained without steering (above)
// is consolidated to its lower bound once rebalancer's extender steers
// default-scheduler. Targets are picked by rebalancer-scheduler's packing
// profile, and the plan holds in a replay with kube-scheduler's default
// scoring plus the extender's: every replacement lands on its target.
func TestThinDefaultSchedulerClusterWithExtender(t *testing.T) {
	c := thinCluster(12)
	c.setScheduler("team-a", "default-scheduler")
	c.setScheduler("team-b", "default-scheduler")
	pol, _ := loadPair(t, "binpacking")
	ctx, sim := extended(t, c.snap, policies("binpacking-scheduler.yaml"), policies("default-scheduler-extender.yaml"))
	p, err := Plan(ctx, sim, pol, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, c, pol, p)
	if p.Summary.NodesInUseBefore != 12 || p.Summary.NodesInUseAfter != 4 {
		t.Fatalf("nodes in use %d -> %d, want 12 -> 4 (the lower bound); skipped %v", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter, p.Summary.SkippedByReason)
	}
	for _, m := range p.Moves {
		if m.Scheduler != "default-scheduler" || !m.Steered {
			t.Errorf("move of %s: scheduler %s steered %v, want steered default-scheduler moves", m.Pod, m.Scheduler, m.Steered)
		}
	}
	warned := false
	for _, w := range p.Warnings {
		warned = warned || strings.Contains(w, `steered by rebalancer's extender to targets scored by "rebalancer-scheduler"`)
	}
	if !warned {
		t.Errorf("no warning that default-scheduler spreads its new pods: %q", p.Warnings)
	}

	// The same replay kube-scheduler would make, with its random ties.
	fork := sim.Fork()
	evictions := make([]simulator.Eviction, len(p.Moves))
	byUID := podsByUID(c.snap)
	for i, m := range p.Moves {
		pod := byUID[m.UID]
		evictions[i] = simulator.Eviction{Pod: pod, Hint: &hint.Hint{Source: m.Source, Target: m.Target, PlanID: p.ID},
			Replacement: simulator.NewReplacement(pod, pod.Name+"-r", types.UID(m.UID+"-r"), time.Time{})}
	}
	landed, err := sim.Replay(ctx, evictions, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range p.Moves {
		if landed[i].Node != m.Target {
			t.Errorf("%s landed on %s, planned %s", m.Pod, landed[i].Node, m.Target)
		}
	}
	if err := sim.Revert(fork); err != nil {
		t.Fatal(err)
	}
}

// TestExtenderWithoutHintFollower: with only the cluster's kube-scheduler
// configuration, nothing picks targets that pack, and the policy's packing
// conflicts with default-scheduler's spreading: the error says what to add.
func TestExtenderWithoutHintFollower(t *testing.T) {
	c := thinCluster(6)
	c.setScheduler("team-a", "default-scheduler")
	c.setScheduler("team-b", "default-scheduler")
	pol, _ := loadPair(t, "binpacking")
	ctx, sim := extended(t, c.snap, policies("default-scheduler-extender.yaml"))
	_, err := Plan(ctx, sim, pol, Options{MinScoreGain: 1})
	if err == nil || !strings.Contains(err.Error(), "give rebalancer-scheduler's profile with --scheduler-config as well") {
		t.Fatalf("err = %v, want the conflict and what to add", err)
	}
}

// TestOptedInNamespaceIsPlannedAsRebalancerScheduler: with the webhook's
// opt-in, pods of a labelled namespace that name default-scheduler are
// planned as rebalancer-scheduler's (their replacements will be), and the
// thin cluster is consolidated; without the label they are not moved and
// no node can be emptied.
func TestOptedInNamespaceIsPlannedAsRebalancerScheduler(t *testing.T) {
	sel, err := labels.Parse(wellknown.SchedulerLabel + "=" + webhook.Enabled)
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := loadPair(t, "binpacking")
	planFor := func(label bool) *plan.Plan {
		c := thinCluster(12)
		c.setScheduler("team-a", "default-scheduler")
		for _, ns := range c.snap.Namespaces {
			if ns.Name == "team-a" && label {
				ns.Labels = map[string]string{wellknown.SchedulerLabel: webhook.Enabled}
			}
		}
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		sim, err := simulator.New(ctx, schedulers(t), c.snap, simulator.WithOptIn(webhook.DefaultOptIn(sel, "test").SchedulerFor))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Plan(ctx, sim, pol, Options{MinScoreGain: 1})
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, c, pol, p)
		return p
	}

	p := planFor(true)
	teamA := 0
	for _, m := range p.Moves {
		if m.Scheduler != "rebalancer-scheduler" || !m.Steered {
			t.Errorf("move of %s: scheduler %s steered %v, want rebalancer-scheduler's", m.Pod, m.Scheduler, m.Steered)
		}
		if m.Namespace == "team-a" {
			teamA++
		}
	}
	if teamA == 0 || p.Summary.NodesInUseAfter != 4 {
		t.Fatalf("opted in: %d moves of team-a; nodes in use %d -> %d, want the lower bound 4", teamA, p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
	}
	if p = planFor(false); p.Summary.NodesInUseAfter != p.Summary.NodesInUseBefore {
		t.Fatalf("not opted in: nodes in use %d -> %d; team-a's pods cannot be drained", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
	}
}
