// Package plan is the planner's output: which pods to move where and why,
// which evictions were refused and why, and what the cluster looks like
// before and after. A Plan is a plain value: the dry-run prints it, the
// executor carries it out, tests compare it.
package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// DrainTaint is the drain taint of the plan planID (wellknown.DrainTaint),
// which the executor puts on the nodes the plan empties.
func DrainTaint(planID string) v1.Taint { return wellknown.DrainTaint(planID) }

// Plan is one planning cycle's decision.
type Plan struct {
	// ID identifies the plan; the executor writes it into the rebalance hint.
	ID string `json:"id"`
	// Warnings are things about the policy and profile worth fixing.
	Warnings []string `json:"warnings,omitempty"`
	Moves    []Move   `json:"moves"`
	// HeldEmpty are nodes empty when the plan was made that the executor keeps
	// off limits for the plan's cycle, with the drain taint, so that no
	// replacement left to its scheduler's choice lands on one
	// (--hold-empty-nodes). Only a plan with such moves holds nodes.
	HeldEmpty []string `json:"heldEmpty,omitempty"`
	Skipped   []Skip   `json:"skipped"`
	Summary   Summary  `json:"summary"`
}

// Owner is the controller of a pod, which recreates it after the eviction.
type Owner struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// Move is one accepted eviction and where the replacement is predicted to run.
type Move struct {
	// Pod is "namespace/name".
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Owner     *Owner `json:"owner,omitempty"`
	// Profile and Strategy name the DeschedulerPolicy profile and plugin
	// that asked for the eviction.
	Profile  string `json:"profile"`
	Strategy string `json:"strategy"`
	Reason   string `json:"reason"`
	// Scheduler places the replacement (the pod's spec.schedulerName).
	Scheduler string `json:"scheduler"`
	// Steered says the scheduler follows the rebalance hint, so the
	// replacement goes to Target. An unsteered move is planned only when it
	// holds without: the scheduler surely picks Target, or the move's gain
	// is leaving Source, which the replacement cannot return to.
	Steered bool `json:"steered"`
	// Anywhere marks an unsteered move whose gain is leaving Source, a
	// node the replacement cannot return to (a violation): it holds
	// wherever the scheduler puts the replacement, and Target is only the
	// node it likely picks.
	// A drain's move is Anywhere too when its scheduler, not steered, may
	// choose among several nodes (ties, node sampling) and every one of them
	// is a node the plan keeps in use: Candidates counts them.
	Anywhere   bool   `json:"anywhere,omitempty"`
	Candidates int    `json:"candidates,omitempty"`
	Source     string `json:"source"`
	Target     string `json:"target"`
	// SourceScore is the source node's total score for the replacement, or
	// nil when the replacement no longer fits there (e.g. a new taint).
	SourceScore *int64 `json:"sourceScore"`
	TargetScore int64  `json:"targetScore"`
	// Drain marks a move that is part of emptying its source node: the
	// executor keeps new pods off that node while it carries them out.
	Drain bool `json:"drain,omitempty"`
	// Room is the pending pod ("namespace/name") the move makes room for
	// (MakeRoom): its replacement may not return to Source, it need gain
	// no score, and the moves of one room stay in the plan together, only
	// while the pending pod fits after them.
	Room string `json:"room,omitempty"`
	// Gang is the gang (pkg/gang) the move belongs to: its members move
	// whole, each to a node of its own, and stay in the plan together or
	// not at all; the executor checks every member before it evicts one.
	Gang string `json:"gang,omitempty"`
	// Balance marks a balance plugin's move: it must gain the minimum
	// score over its source, and a sticky pod stays. With Drain and
	// Steered, it is the intent a move is checked by again before its
	// eviction.
	Balance bool `json:"balance,omitempty"`
	// Cost is what evicting the pod costs (disruption.Cost: 1, more for a
	// pod-deletion-cost annotation or a priority).
	Cost float64 `json:"cost"`
	// Requests are the pod's requests; Usage, when the snapshot has the
	// cluster's usage, what the pod uses (its own measurement, or with
	// UsageEstimated the mean of its owner's measured pods, or its
	// requests).
	Requests       Resources  `json:"requests"`
	Usage          *Resources `json:"usage,omitempty"`
	UsageEstimated bool       `json:"usageEstimated,omitempty"`
}

// Resources are an amount of CPU, in millicores, and memory, in bytes.
type Resources struct {
	MilliCPU int64 `json:"milliCPU"`
	Memory   int64 `json:"memory"`
}

// String is the amount as kubectl prints quantities, e.g. "1500m/2Gi".
func (r Resources) String() string {
	cpu := resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI)
	mem := r.Memory
	if mem >= 1<<20 {
		mem = (mem + 1<<19) >> 20 << 20 // to the nearest Mi: measured usage is seldom round
	}
	return cpu.String() + "/" + resource.NewQuantity(mem, resource.BinarySI).String()
}

// Skip is a move not made, and why: an eviction a plugin asked for that the
// plan refused, or a planned move the executor did not carry out (Move).
type Skip struct {
	Pod      string `json:"pod"`
	UID      string `json:"uid"`
	Profile  string `json:"profile"`
	Strategy string `json:"strategy"`
	// Scheduler is the pod's scheduler, when the skip depends on it.
	Scheduler string `json:"scheduler,omitempty"`
	// Reason is one of Reasons.
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// Move is the planned move the executor skipped; nil for the plan's
	// own refusals.
	Move *Move `json:"move,omitempty"`
}

// Skipped is the skip of the planned move m, for reason.
func (m Move) Skipped(reason, detail string) Skip {
	return Skip{Pod: m.Pod, UID: m.UID, Profile: m.Profile, Strategy: m.Strategy, Scheduler: m.Scheduler, Reason: reason, Detail: detail, Move: &m}
}

// Summary describes the cluster before and after the plan.
type Summary struct {
	Nodes           int            `json:"nodes"`
	Pods            int            `json:"pods"`
	Moves           int            `json:"moves"`
	SkippedByReason map[string]int `json:"skippedByReason"`
	// UnknownSchedulers counts the evictions skipped because their pod's
	// scheduler is not modelled, by scheduler name.
	UnknownSchedulers map[string]int `json:"unknownSchedulers,omitempty"`
	NodesInUseBefore  int            `json:"nodesInUseBefore"`
	NodesInUseAfter   int            `json:"nodesInUseAfter"`
	// NodesLowerBound is the fewest nodes the pods' requests fit on, by
	// resources alone: no plan goes below it.
	NodesLowerBound int `json:"nodesLowerBound"`
	// NodesClassLowerBound is the fewest nodes that could hold the pods
	// counting where each may go (node classes: capacity, labels, taints),
	// never less than NodesLowerBound: on a fleet of mixed node classes,
	// the figure to judge a packing by.
	NodesClassLowerBound int `json:"nodesClassLowerBound"`
	// EvictionsInFlight counts the pods being evicted in the background
	// by their owners (ReasonEvicting), which the policy's limits count.
	EvictionsInFlight int `json:"evictionsInFlight,omitempty"`
	// Pinned are the nodes a packing plugin found it cannot empty, each for
	// a pod that may not move: the floor the plan packs around.
	Pinned []PinnedNode `json:"pinned,omitempty"`
	// Consolidation is what the Consolidation plugin did with the nodes
	// in use it could empty; nil when the policy does not run it.
	Consolidation *NodeOutcomes `json:"consolidation,omitempty"`
	// Drains are the nodes the plan empties (in use before, not after),
	// by name, each with what emptying it costs: Consolidation's and
	// HighNodeUtilization's, and any node a plan's moves leave empty.
	Drains  []Drain     `json:"drains,omitempty"`
	PerNode []NodeUsage `json:"perNode"`
}

// NodeOutcomes counts the nodes a packing plugin considered (the nodes in
// use of its nodeSelector) by what became of them: emptied by the plan,
// kept by its packing to take the others' pods, or neither, and why (a
// skip reason: cooldown, opt-out, pdb, protected, sticky and gang for a
// pod that may not move; cost; target for a node the plan moves pods
// onto; limit for maxNodesPerCycle or the policy's limits; no-fit for a
// pod that fits on no node it may go to; or the reason the plan's replay
// dropped the node's drain). It is the first thing to read when packing
// stops.
type NodeOutcomes struct {
	Considered int            `json:"considered"`
	Emptied    int            `json:"emptied"`
	Kept       int            `json:"kept"`
	Refused    map[string]int `json:"refused,omitempty"`
}

// What a packing plugin did with a node besides refusing it
// (NodeOutcomes).
const (
	NodeEmptied = "emptied"
	NodeKept    = "kept"
)

// String says it in one line: "12 considered: 3 emptied, 5 kept, cooldown 4".
func (o *NodeOutcomes) String() string {
	if o == nil {
		return "-"
	}
	parts := []string{fmt.Sprintf("%d emptied", o.Emptied), fmt.Sprintf("%d kept", o.Kept)}
	for _, r := range slices.Sorted(maps.Keys(o.Refused)) {
		parts = append(parts, fmt.Sprintf("%s %d", r, o.Refused[r]))
	}
	return fmt.Sprintf("%d considered: %s", o.Considered, strings.Join(parts, ", "))
}

// PinnedNode is a node kept in use by a pod that may not move, and why
// (a skip reason and its detail).
type PinnedNode struct {
	Node   string `json:"node"`
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Drain is a node the plan empties: the pods it moves off and what their
// evictions cost together (the sum of the moves' Cost).
type Drain struct {
	Node string  `json:"node"`
	Pods int     `json:"pods"`
	Cost float64 `json:"cost"`
}

// NodeUsage is one node's requested CPU and memory as a percentage of its
// allocatable, before and after the plan, and, when its usage was
// measured, its used CPU and memory likewise.
type NodeUsage struct {
	Node         string  `json:"node"`
	CPUBefore    float64 `json:"cpuBefore"`
	CPUAfter     float64 `json:"cpuAfter"`
	MemoryBefore float64 `json:"memoryBefore"`
	MemoryAfter  float64 `json:"memoryAfter"`
	Used         *Used   `json:"used,omitempty"`
	// Queried are the node's values of the policy's Prometheus queries,
	// as read; they are not predicted after the plan.
	Queried []Queried `json:"queried,omitempty"`
}

// Queried is a node's value of a Prometheus query: a share of the node,
// in [0, 1].
type Queried struct {
	Query string  `json:"query"`
	Value float64 `json:"value"`
}

// Used is a node's measured usage, percent of allocatable, before and
// after the plan.
type Used struct {
	CPUBefore    float64 `json:"cpuBefore"`
	CPUAfter     float64 `json:"cpuAfter"`
	MemoryBefore float64 `json:"memoryBefore"`
	MemoryAfter  float64 `json:"memoryAfter"`
}

// Drains lists the nodes emptied, by name, each with the moves off it
// and what their evictions cost together.
func Drains(moves []Move, emptied func(node string) bool) []Drain {
	var out []Drain
	at := map[string]int{}
	for _, m := range moves {
		if !emptied(m.Source) {
			continue
		}
		i, ok := at[m.Source]
		if !ok {
			i = len(out)
			at[m.Source] = i
			out = append(out, Drain{Node: m.Source})
		}
		out[i].Pods++
		out[i].Cost += m.Cost
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Finish fills the derived parts of the summary and puts everything in a
// deterministic order: moves stay in decision order (later decisions depend
// on earlier ones), skips and nodes are sorted.
func (p *Plan) Finish() {
	if p.Moves == nil {
		p.Moves = []Move{}
	}
	if p.Skipped == nil {
		p.Skipped = []Skip{}
	}
	sort.SliceStable(p.Skipped, func(i, j int) bool {
		a, b := p.Skipped[i], p.Skipped[j]
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return a.Pod < b.Pod
	})
	sort.Slice(p.Summary.PerNode, func(i, j int) bool { return p.Summary.PerNode[i].Node < p.Summary.PerNode[j].Node })
	p.Summary.Moves = len(p.Moves)
	p.Summary.SkippedByReason = map[string]int{}
	p.Summary.UnknownSchedulers = nil
	for _, s := range p.Skipped {
		p.Summary.SkippedByReason[s.Reason]++
		if s.Reason == ReasonUnknownScheduler {
			if p.Summary.UnknownSchedulers == nil {
				p.Summary.UnknownSchedulers = map[string]int{}
			}
			p.Summary.UnknownSchedulers[s.Scheduler]++
		}
	}
}
