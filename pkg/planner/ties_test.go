package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// lowTies is two busy nodes (team-b) and 30 tied low ones, a pod of
// team-a's web on each.
func lowTies() *cluster {
	c := newCluster()
	for i := range 2 {
		n := c.node(fmt.Sprintf("full-%d", i), "8", "32Gi")
		c.pod("team-b", "db", "StatefulSet", n.Name, "5", "20Gi")
	}
	for i := range 30 {
		n := c.node(fmt.Sprintf("low-%02d", i), "8", "32Gi")
		c.pod("team-a", "web", "ReplicaSet", n.Name, "500m", "1Gi")
	}
	return c
}

// TestTiesEndWithTheLimits: once the per-namespace limit is spent, tied
// sources whose pods it keeps from moving take no turn, so
// HighNodeUtilization runs twice (the run whose move spends the limit, and
// the one that finds no tied node may ask), not once for each of the 30
// tied nodes (each run a walk over the whole cluster: at 10,000 nodes a
// plan of hours). The plan still holds the one move of theirs the limit
// allows.
func TestTiesEndWithTheLimits(t *testing.T) {
	_, prof := loadPair(t, "binpacking")
	pol := loadPolicy(t, fmt.Sprintf(packingByHNU, 0))
	pol.MaxNoOfPodsToEvictPerNamespace = ptrTo(uint(1))
	c := lowTies()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(3)))
	ctx := klog.NewContext(context.Background(), logger)
	p, err := planOn(ctx, pol, prof, c.snap, Options{ID: "ties"})
	if err != nil {
		t.Fatal(err)
	}
	web := 0
	for _, m := range p.Moves {
		if m.Namespace == "team-a" {
			web++
		}
	}
	if web != 1 {
		t.Fatalf("%d moves in team-a, want the 1 the namespace limit allows", web)
	}
	log := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	m := regexp.MustCompile(`Ran the plugin once per rank of its tied sources plugin="HighNodeUtilization" runs=(\d+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no log of HighNodeUtilization's runs:\n%s", log)
	}
	if runs, _ := strconv.Atoi(m[1]); runs > 2 {
		t.Errorf("HighNodeUtilization ran %d times with the namespace limit spent, want twice at most", runs)
	}
}

// runsOf reads from a buffered ktesting log how many times plugin ran for
// its ties.
func runsOf(t *testing.T, logger klog.Logger, plugin string) int {
	t.Helper()
	log := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	m := regexp.MustCompile(`Ran the plugin once per rank of its tied sources plugin="` + plugin + `" runs=(\d+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no log of %s's runs:\n%s", plugin, log)
	}
	runs, _ := strconv.Atoi(m[1])
	return runs
}

// TestTiesThatAllStay: 30 tied low nodes whose pods a PDB keeps where
// they are. The first run moves nothing, so one survey judges the other
// 29 turns at once: HighNodeUtilization runs twice, not 30 times (each a
// walk over the whole cluster), and every pod's refusal is in the plan
// as its own turn would have put it.
func TestTiesThatAllStay(t *testing.T) {
	_, prof := loadPair(t, "binpacking")
	pol := loadPolicy(t, fmt.Sprintf(packingByHNU, 0))
	c := lowTies()
	c.pdb("team-a", "web", 0)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(3)))
	p, err := planOn(klog.NewContext(context.Background(), logger), pol, prof, c.snap, Options{ID: "ties"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 0 {
		t.Fatalf("%d moves, want none: every pod's PDB allows no disruption", len(p.Moves))
	}
	refused := map[string]bool{}
	for _, s := range p.Skipped {
		if s.Strategy == "HighNodeUtilization" && s.Reason == "pdb" {
			refused[s.Pod] = true
		}
	}
	if len(refused) != 30 {
		t.Errorf("HighNodeUtilization's PDB refusals cover %d pods, want all 30", len(refused))
	}
	if runs := runsOf(t, logger, "HighNodeUtilization"); runs > 2 {
		t.Errorf("HighNodeUtilization ran %d times for 30 tied nodes that all stay, want a run and a survey", runs)
	}
}

// spreadingByLNU moves pods off nodes above 40% to nodes below 20%.
const spreadingByLNU = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: lnu
  pluginConfig:
  - name: DefaultEvictor
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20, memory: 20}
      targetThresholds: {cpu: 40, memory: 40}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
`

// mixedTies is a cluster of ties whose members differ in what they allow:
// six busy nodes alike (7.5 CPUs of 8 requested), and three ranks of eight
// low nodes alike (one, two and three pods of 500m; the one pod of the
// first rank costly to evict). Each node's pods are, at random, of a
// workload whose PDB allows no disruption, and, when unsteered is set,
// placed by default-scheduler, which follows no hints: some turns move
// pods, some move none, and the room runs out part way.
func mixedTies(seed uint64, unsteered bool) *cluster {
	r := rand.New(rand.NewPCG(seed, 1))
	c := newCluster()
	pods := func(node string, n int, cpu string) []*v1.Pod {
		app, scheduler := "free", "rebalancer-scheduler"
		if r.IntN(5) < 3 {
			app = "blocked"
		}
		if unsteered && r.IntN(2) == 0 {
			scheduler = "default-scheduler"
		}
		var out []*v1.Pod
		for range n {
			p := c.pod("team-a", app, "ReplicaSet", node, cpu, "1Gi")
			p.Spec.SchedulerName = scheduler
			out = append(out, p)
		}
		return out
	}
	for i := range 6 {
		pods(c.node(fmt.Sprintf("busy-%d", i), "8", "32Gi").Name, 15, "500m")
	}
	for rank := range 3 {
		for i := range 8 {
			for _, p := range pods(c.node(fmt.Sprintf("low-%d-%d", rank, i), "8", "32Gi").Name, rank+1, "500m") {
				if rank == 0 {
					p.Annotations = map[string]string{v1.PodDeletionCost: fmt.Sprint(1 << 29)}
				}
			}
		}
	}
	c.pdb("team-a", "blocked", 0)
	return c
}

// TestSurveysChangeNoPlan: a survey only takes at once the turns that
// would each have moved nothing, so plans with and without surveys are
// the same, byte for byte, for both plugins that break ties, on clusters
// where turns move pods, are refused by PDBs, find no room, are skipped as
// unsteered or held to a drain budget; and surveys save runs.
func TestSurveysChangeNoPlan(t *testing.T) {
	_, packing := loadPair(t, "binpacking")
	_, spreading := loadPair(t, "balancing")
	_, unsteered, err := profile.Load(mostAllocated(t), "")
	if err != nil {
		t.Fatal(err)
	}
	hnu := loadPolicy(t, fmt.Sprintf(packingByHNU, 0))
	for _, c := range []struct {
		name, plugin string
		pol          *api.DeschedulerPolicy
		profs        []*config.KubeSchedulerProfile
	}{
		{"HighNodeUtilization", "HighNodeUtilization", hnu, []*config.KubeSchedulerProfile{packing}},
		{"HighNodeUtilization, drain budget", "HighNodeUtilization", loadPolicy(t, fmt.Sprintf(packingByHNU, 50)), []*config.KubeSchedulerProfile{packing}},
		{"HighNodeUtilization, unsteered", "HighNodeUtilization", hnu, []*config.KubeSchedulerProfile{packing, unsteered}},
		{"LowNodeUtilization", "LowNodeUtilization", loadPolicy(t, spreadingByLNU), []*config.KubeSchedulerProfile{spreading}},
	} {
		t.Run(c.name, func(t *testing.T) {
			saved, moves := 0, 0
			for seed := range uint64(8) {
				planned := func(survey bool) ([]byte, int) {
					surveys = survey
					defer func() { surveys = true }()
					logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(3)))
					ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
					defer cancel()
					sim, err := simulator.New(ctx, c.profs, mixedTies(seed, len(c.profs) > 1).snap)
					if err != nil {
						t.Fatal(err)
					}
					p, err := Plan(ctx, sim, c.pol, Options{ID: "same", MinScoreGain: 1, AllowConflicting: true})
					if err != nil {
						t.Fatal(err)
					}
					moves += len(p.Moves)
					out, err := json.Marshal(p)
					if err != nil {
						t.Fatal(err)
					}
					return out, runsOf(t, logger, c.plugin)
				}
				with, runsWith := planned(true)
				without, runsWithout := planned(false)
				if !bytes.Equal(with, without) {
					t.Fatalf("seed %d: the plan with surveys differs from the one without:\n%s\n%s", seed, with, without)
				}
				if runsWith > runsWithout {
					t.Errorf("seed %d: %d runs with surveys, %d without", seed, runsWith, runsWithout)
				}
				saved += runsWithout - runsWith
			}
			if moves == 0 || saved == 0 {
				t.Errorf("%d moves, %d runs saved by surveys: the comparison shows nothing", moves, saved)
			}
		})
	}
}
