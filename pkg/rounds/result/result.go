package result

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// Result is what a simulation measured, round by round.
type Result struct {
	// Strategy is "rebalancer" for rebalancer's own planner, or "upstream"
	// for the descheduler's own plugins and evictor (the baseline).
	Strategy string  `json:"strategy"`
	Rounds   []Round `json:"rounds"`
	// NodesBefore and NodesAfter are the per-node utilizations before the
	// first round and after the last.
	NodesBefore []NodeUtil `json:"nodesBefore"`
	NodesAfter  []NodeUtil `json:"nodesAfter"`
	// ConvergedAt is the first round from which no round evicted anything,
	// 0 if the last round evicted.
	ConvergedAt int `json:"convergedAt"`
	// PlanAccuracy is the share of all rounds' planned moves whose
	// replacement landed where the plan said (see Round.Held), in percent; nil when
	// nothing was planned (and for the upstream baseline, which plans no
	// targets).
	PlanAccuracy *float64 `json:"planAccuracy,omitempty"`
	// Interrupted says the simulation was stopped before its last round:
	// Rounds holds the rounds it finished.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Round is the cluster after one round: plan, evict, re-place.
// Round 0 is the cluster as the snapshot has it.
type Round struct {
	Round     int `json:"round"`
	Evictions int `json:"evictions"`
	// Cost is what the round's evictions cost together (disruption.Cost:
	// 1 a pod, more for a pod-deletion-cost or a priority), the measure
	// Consolidation and HighNodeUtilization weigh drains by.
	Cost float64 `json:"cost"`
	// PingPong counts evicted pods whose replacement landed back on the node
	// the pod was evicted from, plus pods evicted again within the cooldown
	// after an earlier eviction of their lineage.
	PingPong int `json:"pingPong"`
	// Held counts the evictions whose replacement landed where the plan
	// said: on its target, or for a move planned to hold anywhere
	// (plan.Move.Anywhere) off its source, and for a drain of a scheduler
	// that does not follow hints on a node that was in use and that the
	// plan does not empty. PlanAccuracy is Held over
	// Evictions in percent (nil when nothing was planned).
	Held         int      `json:"held"`
	PlanAccuracy *float64 `json:"planAccuracy,omitempty"`
	// Replays counts the times the round's plan was also carried out with
	// the schedulers' random choices drawn anew (ties, node sampling), and
	// ReplaysHeld those in which every node it drains ended empty and no
	// node that was empty was used (rounds.Options.Replays).
	Replays     int `json:"replays,omitempty"`
	ReplaysHeld int `json:"replaysHeld,omitempty"`
	// NodesInUse counts nodes running at least one pod that is not bound to
	// its node (DaemonSet and mirror pods do not keep a node in use).
	NodesInUse int `json:"nodesInUse"`
	// LowerBound is the fewest nodes whose allocatable can hold the total
	// requests, per resource, largest nodes first; the max over resources.
	LowerBound int `json:"lowerBound"`
	// ClassLowerBound is the fewest nodes counting where each pod may go
	// (plan.Summary.NodesClassLowerBound), never less than LowerBound.
	ClassLowerBound int `json:"classLowerBound"`
	// Unschedulable counts pods without a node after the round.
	Unschedulable int `json:"unschedulable"`
	// Arrived counts the pods let in before the round's plan
	// (rounds.Options.Arrivals); Placed the pods waiting for a node as
	// the round planned (arrived and found no node, or pending before)
	// that have one after it. Replacements of evicted pods count in
	// neither.
	Arrived int `json:"arrived,omitempty"`
	Placed  int `json:"placed"`
	// Skipped counts the round's plan's skips by reason
	// (plan.Summary.SkippedByReason): why it did not move more. The
	// baseline's plans give none.
	Skipped map[string]int `json:"skippedByReason,omitempty"`
	// Consolidation is what the round's plan did with the nodes
	// Consolidation could empty (plan.Summary.Consolidation): emptied,
	// kept, or refused and why.
	Consolidation *plan.NodeOutcomes `json:"consolidation,omitempty"`
	// Utilization of requested CPU and memory, percent of allocatable, over
	// the nodes in use.
	CPUUtilMean   float64 `json:"cpuUtilMean"`
	CPUUtilStddev float64 `json:"cpuUtilStddev"`
	MemUtilMean   float64 `json:"memUtilMean"`
	MemUtilStddev float64 `json:"memUtilStddev"`
}

// NodeUtil is one node's requested CPU and memory, percent of allocatable,
// and, when the snapshot has the cluster's usage, its used CPU and memory.
type NodeUtil struct {
	Node       string   `json:"node"`
	CPU        float64  `json:"cpu"`
	Memory     float64  `json:"memory"`
	UsedCPU    *float64 `json:"usedCpu,omitempty"`
	UsedMemory *float64 `json:"usedMemory,omitempty"`
}

// Comparison is a simulation of rebalancer beside the upstream baseline on
// the same snapshot, policy and scheduler profile.
type Comparison struct {
	Rebalancer *Result `json:"rebalancer"`
	Baseline   *Result `json:"baseline,omitempty"`
}

// TopSkips names the n most frequent skip reasons of a round, most first
// ("limit 300, no-fit 4"); "-" for none.
func (r Round) TopSkips(n int) string {
	reasons := make([]string, 0, len(r.Skipped))
	for reason := range r.Skipped {
		reasons = append(reasons, reason)
	}
	slices.SortFunc(reasons, func(a, b string) int {
		if c := cmp.Compare(r.Skipped[b], r.Skipped[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if len(reasons) == 0 {
		return "-"
	}
	parts := make([]string, 0, n)
	for _, reason := range reasons[:min(n, len(reasons))] {
		parts = append(parts, fmt.Sprintf("%s %d", reason, r.Skipped[reason]))
	}
	return strings.Join(parts, ", ")
}

// Accuracy is held out of planned in percent, rounded to two decimals; nil
// when nothing was planned.
func Accuracy(held, planned int) *float64 {
	if planned == 0 {
		return nil
	}
	v := math.Round(float64(held)*10000/float64(planned)) / 100
	return &v
}
