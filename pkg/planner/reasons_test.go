package planner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// reasonScenario is a cluster whose plan moves one pod (the subject, the
// plan's first move) by a known kind of move, for the rows of
// TestEveryReasonThroughEveryCaller to change.
type reasonScenario struct {
	name   string
	build  func() *cluster
	policy string // the shipped DeschedulerPolicy, by loadPair's name
	profs  func(t *testing.T) []*config.KubeSchedulerProfile
	// kind says whether the subject's move is the kind the rows assume.
	kind func(m plan.Move) bool
}

var (
	// thinDrain: Consolidation empties nodes of a thin cluster; the subject
	// is a steered drain of a balance plugin (rebalancer-scheduler).
	thinDrain = &reasonScenario{
		name:   "thin/steered-drain",
		build:  func() *cluster { return thinCluster(12) },
		policy: "binpacking",
		profs:  func(t *testing.T) []*config.KubeSchedulerProfile { return schedulers(t) },
		kind: func(m plan.Move) bool {
			return m.Strategy == "Consolidation" && m.Drain && m.Balance && m.Steered
		},
	}
	// taintExact: a pod of default-scheduler (MostAllocated, no hints) on a
	// tainted node; its scheduler surely picks "target", the fullest node it
	// fits, over "rival": an unsteered exact move of a deschedule plugin.
	// rival holds a bare pod, so no drain of the plan taints it.
	taintExact = &reasonScenario{
		name: "taint/unsteered-exact",
		build: func() *cluster {
			c := newCluster()
			c.node("tainted", "8", "32Gi", noSchedule)
			c.node("target", "8", "32Gi")
			c.node("rival", "8", "32Gi")
			c.pod("team-a", "api", "ReplicaSet", "tainted", "1", "1Gi")
			c.pod("team-b", "web", "ReplicaSet", "target", "1", "1Gi")
			c.pod("team-b", "debug", "", "rival", "500m", "512Mi")
			c.setScheduler("team-a", "default-scheduler")
			c.setScheduler("team-b", "default-scheduler")
			return c
		},
		policy: "binpacking",
		profs:  func(t *testing.T) []*config.KubeSchedulerProfile { return schedulers(t, mostAllocated(t)) },
		kind: func(m plan.Move) bool {
			return m.Strategy == "RemovePodsViolatingNodeTaints" && !m.Steered && !m.Anywhere && !m.Drain && m.Target == "target"
		},
	}
	// crowdedBalance: LowNodeUtilization moves pods off a crowded node onto
	// an idle one; the subject is a steered balance move that is no drain,
	// the only kind the score gain is asked of.
	crowdedBalance = &reasonScenario{
		name: "crowded/steered-balance",
		build: func() *cluster {
			c := newCluster()
			c.node("crowded", "8", "32Gi")
			c.node("idle", "8", "32Gi")
			for i := range 6 {
				c.pod("team-b", fmt.Sprintf("web%d", i), "ReplicaSet", "crowded", "1", "1Gi")
			}
			return c
		},
		policy: "balancing",
		profs: func(t *testing.T) []*config.KubeSchedulerProfile {
			_, prof := loadPair(t, "balancing")
			return []*config.KubeSchedulerProfile{prof}
		},
		kind: func(m plan.Move) bool {
			return m.Strategy == "LowNodeUtilization" && m.Balance && !m.Drain && m.Steered
		},
	}
)

// fromReplay says a skip is the plan's replay's (hold, strays,
// packingChurn) rather than judge's: their details begin so.
func fromReplay(s plan.Skip) bool {
	for _, prefix := range []string{"with the plan's replacements pending together", "the drain of ", "in replay ", "the plan leaves ", "the plan would end with "} {
		if strings.HasPrefix(s.Detail, prefix) {
			return true
		}
	}
	return false
}

// TestEveryReasonThroughEveryCaller: the reasons a move is refused for,
// each through the real entry points of every caller of the shared checks
// (stays, heldBack, untouchable) and of decide: planning (judge, through
// Plan), the plan's replay (hold, inside Plan: every replacement pending
// together with the pods already pending) and the recheck before an
// eviction (Recheck.Validate). Each row is one condition on the cluster. For
// plan and replay it is set before planning, and the subject is skipped
// for exactly that reason, by judge or by the replay; for recheck the plan
// is made on the clean cluster and the condition set on the view the move
// is rechecked on. With plan and replay both "", the subject is moved;
// with recheck "", its move is accepted. Every row first checks its
// control: without the condition the subject is moved and its move
// accepted, so no refusal is the scenario's own.
func TestEveryReasonThroughEveryCaller(t *testing.T) {
	type env struct {
		c    *cluster
		pod  *v1.Pod   // the subject, in c
		move plan.Move // its move in the plan of the clean cluster
		opts *Options
	}
	for _, row := range []struct {
		name     string
		scenario *reasonScenario
		cond     func(e env)
		// plan: judge's skip; replay: the replay's; at most one is set.
		plan, replay, recheck string
	}{
		// The replay re-places only the moves judge accepted, on the same
		// snapshot: a condition of the pod itself never reaches it, so
		// those rows expect nothing of it ("as judged").
		{
			name: plan.ReasonOptOut, scenario: thinDrain,
			cond: func(e env) { e.pod.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"} },
			plan: plan.ReasonOptOut, replay: "" /* as judged */, recheck: plan.ReasonOptOut,
		},
		{
			// Balance moves only (Move.Balance): Consolidation's is one.
			name: plan.ReasonSticky, scenario: thinDrain,
			cond: func(e env) { makeSticky(e.pod) },
			plan: plan.ReasonSticky, replay: "" /* as judged */, recheck: plan.ReasonSticky,
		},
		{
			// A gang moves whole: one of its members elsewhere may not.
			name: plan.ReasonGang, scenario: thinDrain,
			cond: func(e env) {
				e.pod.Labels[gang.PodGroupLabel] = "train"
				for _, n := range e.c.snap.Nodes {
					if n.Name != e.pod.Spec.NodeName {
						other := e.c.pod(e.pod.Namespace, "train", "Job", n.Name, "100m", "128Mi")
						other.Labels[gang.PodGroupLabel] = "train"
						other.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
						break
					}
				}
			},
			plan: plan.ReasonGang, replay: "" /* as judged */, recheck: plan.ReasonGang,
		},
		{
			name: plan.ReasonClaim, scenario: thinDrain,
			cond: func(e env) {
				e.pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared-gpu")}}
			},
			plan: plan.ReasonClaim, replay: "" /* as judged */, recheck: plan.ReasonClaim,
		},
		{
			name: plan.ReasonEvicting, scenario: thinDrain,
			cond: func(e env) {
				e.pod.Annotations = map[string]string{evictions.EvictionInProgressAnnotationKey: ""}
			},
			plan: plan.ReasonEvicting, replay: "" /* as judged */, recheck: plan.ReasonEvicting,
		},
		{
			// A scheduler nobody models.
			name: plan.ReasonUnknownScheduler, scenario: thinDrain,
			cond: func(e env) { e.pod.Spec.SchedulerName = "gpu-scheduler" },
			plan: plan.ReasonUnknownScheduler, replay: "" /* as judged */, recheck: plan.ReasonUnknownScheduler,
		},
		{
			// Every node but the pod's own, its target among them, is
			// filled by a newcomer.
			name: plan.ReasonNoFit, scenario: thinDrain,
			cond: func(e env) {
				for _, n := range e.c.snap.Nodes {
					if n.Name != e.pod.Spec.NodeName {
						e.c.pod("default", "newcomer-"+n.Name, "ReplicaSet", n.Name, "5900m", "1Gi")
					}
				}
			},
			// Replay: as judged; and the replay's own no-fit verdicts are
			// recorded as target-changed (hold's drop): the next row.
			plan: plan.ReasonNoFit, replay: "", recheck: plan.ReasonNoFit,
		},
		{
			// A pod already pending, of a higher priority, that can only
			// run on the subject's target and takes all its room: the
			// replay places it first (queue order) and the subject's
			// replacement no longer fits there. Its scheduler is
			// default-scheduler: rebalancer-scheduler's own pending pods
			// leave the room promised to hinted replacements alone
			// (RebalanceHint's Filter).
			name: plan.ReasonTargetChanged + "/pending-pod-takes-the-target", scenario: thinDrain,
			cond: func(e env) {
				p := e.c.pod("default", "pending", "ReplicaSet", "", "5900m", "1Gi")
				p.Status.Phase = v1.PodPending
				p.Spec.Priority = ptrTo(int32(1000))
				p.Spec.SchedulerName = "default-scheduler"
				p.Spec.NodeSelector = map[string]string{v1.LabelHostname: e.move.Target}
			},
			// Judge and Recheck place a replacement among bound pods only:
			// a pending pod takes no room until it is bound (then it is the
			// no-fit row).
			plan: "", replay: plan.ReasonTargetChanged, recheck: "",
		},
		{
			// The rival node fills up, so default-scheduler now surely
			// prefers it to the planned target.
			name: plan.ReasonTargetChanged + "/scheduler-now-prefers-another-node", scenario: taintExact,
			cond: func(e env) { e.c.pod("team-b", "batch", "ReplicaSet", "rival", "2", "2Gi") },
			// Judge plans the move onto the rival instead (decide gives
			// target-changed only for a planned move), and the replay
			// lands it there.
			plan: "", replay: "", recheck: plan.ReasonTargetChanged,
		},
		{
			// A --min-score-gain above what the move gains.
			name: plan.ReasonLowGain, scenario: crowdedBalance,
			cond: func(e env) { e.opts.MinScoreGain = 100000 },
			// Replay: as judged; a landing carries no source score, so the
			// replay does not judge the gain again.
			plan: plan.ReasonLowGain, replay: "", recheck: plan.ReasonLowGain,
		},
		{
			// The pod can only run on its own node.
			name: plan.ReasonSameNode, scenario: crowdedBalance,
			cond: func(e env) { e.pod.Spec.NodeSelector = map[string]string{v1.LabelHostname: e.pod.Spec.NodeName} },
			// Recheck: a steered move is held to its target first, which
			// no longer passes the filters: no-fit (an unsteered move's
			// same-node Recheck reports as target-changed).
			plan: plan.ReasonSameNode, replay: "" /* as judged */, recheck: plan.ReasonNoFit,
		},
		{
			// A PodDisruptionBudget that allows no disruption.
			name: plan.ReasonPDB, scenario: thinDrain,
			cond: func(e env) { e.c.pdb(e.pod.Namespace, e.pod.Labels["app"], 0) },
			// Recheck: the budgets are the eviction API's, met by the
			// executor at each eviction (429), not Recheck's.
			plan: plan.ReasonPDB, replay: "" /* as judged */, recheck: "",
		},
		{
			// A pod of its owner moved onto its node within the cooldown.
			name: plan.ReasonCooldown, scenario: thinDrain,
			cond: func(e env) {
				h := history.New(nil, time.Hour)
				h.Record(history.Eviction{Owner: metav1.GetControllerOf(e.pod).UID, To: e.pod.Spec.NodeName})
				e.opts.History = h
			},
			// Recheck takes no history: the executor checks the cooldown
			// itself before each eviction.
			plan: plan.ReasonCooldown, replay: "" /* as judged */, recheck: "",
		},
	} {
		t.Run(row.name, func(t *testing.T) {
			if row.plan != "" && row.replay != "" {
				t.Fatal("a row expects judge's skip or the replay's, not both")
			}
			sc := row.scenario
			pol, _ := loadPair(t, sc.policy)
			profs := sc.profs(t)
			base := Options{MinScoreGain: 1}

			// Control: the clean cluster moves the subject, and its move is
			// accepted on a view of that cluster.
			clean := sc.build()
			p := planWithOptions(t, profs, pol, clean.snap, base)
			if len(p.Moves) == 0 {
				t.Fatalf("control (%s): nothing planned; skipped %v", sc.name, p.Summary.SkippedByReason)
			}
			m := p.Moves[0]
			if !sc.kind(m) {
				t.Fatalf("control (%s): the subject's move is %+v, not the kind the scenario is for", sc.name, m)
			}
			recheck := func(c *cluster, opts Options) (bool, string, string) {
				ctx, sim := simulation(t, profs, c.snap)
				pod := podsByUID(c.snap)[m.UID]
				if pod == nil || pod.Spec.NodeName != m.Source {
					t.Fatalf("%s is not on %s in the view", m.Pod, m.Source)
				}
				return NewRecheck(sim, p, opts.MinScoreGain).Validate(ctx, m, pod)
			}
			if ok, reason, detail := recheck(sc.build(), base); !ok {
				t.Fatalf("control (%s): the move of %s is refused on the plan's own view: %s: %s", sc.name, m.Pod, reason, detail)
			}
			setUp := func() (*cluster, Options) {
				c, opts := sc.build(), base
				pod := podsByUID(c.snap)[m.UID]
				row.cond(env{c: c, pod: pod, move: m, opts: &opts})
				return c, opts
			}

			// Plan, judge and replay: the condition set before planning.
			t.Run("plan", func(t *testing.T) {
				c, opts := setUp()
				got := planWithOptions(t, profs, pol, c.snap, opts)
				var skips []plan.Skip
				for _, s := range got.Skipped {
					if s.UID == m.UID {
						skips = append(skips, s)
					}
				}
				isMoved := countMoves(got, func(g plan.Move) bool { return g.UID == m.UID }) > 0
				want, replayed := row.plan, false
				if row.replay != "" {
					want, replayed = row.replay, true
				}
				if want == "" {
					if !isMoved {
						t.Fatalf("%s is not moved; skipped %+v", m.Pod, skips)
					}
					return
				}
				if isMoved || len(skips) == 0 {
					t.Fatalf("%s: moved %v, skipped %+v; want it skipped as %s", m.Pod, isMoved, skips, want)
				}
				for _, s := range skips {
					t.Logf("%s skipped as %s: %s", m.Pod, s.Reason, s.Detail)
					if s.Reason != want || fromReplay(s) != replayed {
						t.Errorf("%s skipped as %s (by the replay: %v): %s; want %s (by the replay: %v)", m.Pod, s.Reason, fromReplay(s), s.Detail, want, replayed)
					}
					if s.Detail == "" {
						t.Errorf("%s skipped as %s without saying why", m.Pod, s.Reason)
					}
				}
				if got.Summary.SkippedByReason[want] == 0 {
					t.Errorf("summary %v counts no %s", got.Summary.SkippedByReason, want)
				}
			})

			// Recheck: the plan of the clean cluster, the condition set on
			// the view its move is rechecked on.
			t.Run("recheck", func(t *testing.T) {
				c, opts := setUp()
				ok, reason, detail := recheck(c, opts)
				t.Logf("the move of %s: accepted %v, reason %q: %s", m.Pod, ok, reason, detail)
				switch {
				case row.recheck == "" && !ok:
					t.Errorf("the move of %s is refused: %s: %s; want it accepted", m.Pod, reason, detail)
				case row.recheck != "" && (ok || reason != row.recheck):
					t.Errorf("the move of %s: accepted %v, reason %q (%s); want it refused as %s", m.Pod, ok, reason, detail, row.recheck)
				case !ok && detail == "":
					t.Errorf("the move of %s is refused as %s without saying why", m.Pod, reason)
				}
			})
		})
	}
}
