package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/removeduplicates"

	"github.com/rebalancer-dev/rebalancer/pkg/conflict"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// replay checks the plan the way the cluster will carry it out. The planner
// decides one move at a time, each replacement placed before the next pod
// goes; the executor evicts them back to back, so the replacements are
// pending together and the schedulers place them in queue order (priority,
// then arrival), with the pods already pending among them. It replays the
// plan like that on the cluster as it was and keeps only the moves that
// still hold by the rule that planned them (decide, told where each
// replacement landed): a steered move's replacement lands on its target;
// an unsteered one planned to leave its source does; an unsteered one
// planned for its target lands there surely, or surely on another node
// that was in use and is not emptied by the plan, which becomes its
// target; an unsteered drain's lands only where nodes stay in use. A
// drain with a move that fails is dropped whole. It repeats until the
// replay is the plan, and returns the nodes' usage after it: the plan's
// "after".
func (p *planner) replay(ctx context.Context, before []simulator.NodeUsage) ([]simulator.NodeUsage, error) {
	inUse := map[string]bool{}
	for _, u := range before {
		inUse[u.Node] = u.InUse
	}
	// Where no replacement left to its scheduler may land: a node the
	// plan empties, one that was empty, or one a pod of its owner was
	// moved off within the cooldown.
	stray := func(i int) func(string) bool {
		stray := func(n string) bool { return p.sources[n] > 0 || !inUse[n] }
		if a := p.applied[i]; a.owner != "" {
			return p.notBack(a.owner, deploymentOf(a.obj), stray)
		}
		return stray
	}
	for {
		fork := p.sim.Fork()
		evictions := p.evictions()
		landed, err := p.sim.Replay(ctx, evictions, nil)
		if err == nil {
			err = interrupted(ctx) // a replay cut short is not a replay in which nothing fits
		}
		var after []simulator.NodeUsage
		if err == nil {
			after, err = p.sim.Usage()
		}
		unplaced := sets.New[string]() // pending pods made room for, still pending after the replay
		if slices.ContainsFunc(p.out.Moves, func(m plan.Move) bool { return m.Room != "" }) {
			for _, pod := range p.sim.Pending() {
				unplaced.Insert(key(pod))
			}
		}
		if rerr := p.sim.Revert(fork); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			return nil, fmt.Errorf("replaying the plan: %w", err)
		}

		// A room whose pending pod the replay does not place goes whole
		// (no-room); the replay then runs again without it.
		if len(unplaced) > 0 {
			noRoom := map[int]refusal{}
			for i, m := range p.out.Moves {
				if m.Room != "" && unplaced.Has(m.Room) {
					noRoom[i] = refusal{plan.ReasonNoRoom, fmt.Sprintf("with the plan's replacements pending together, %s still fits nowhere", m.Room)}
				}
			}
			if len(noRoom) > 0 {
				p.drop(noRoom)
				continue
			}
		}

		failed := map[int]refusal{} // move index -> why
		drains, rooms := sets.New[string](), sets.New[string]()
		retargeted := false
		for i := range p.applied {
			m := &p.out.Moves[i]
			if evictions[i].Replacement == nil {
				continue // nobody recreates it: there is no placement to check
			}
			l := landed[i]
			v := decide(landing(m, l), intent{balance: m.Balance, drain: m.Drain, planned: m, replayed: true}, stray(i), p.opts.MinScoreGain)
			switch {
			case v.reason != "":
				failed[i] = refusal{v.reason, "with the plan's replacements pending together and its drained nodes tainted, " + v.detail}
			case m.Drain && !m.Steered:
				// An unsteered drain holds wherever its replacements land, so
				// long as every node they may land on stays in use.
				m.Target, m.TargetScore = l.Node, l.Score
				if v.anywhere {
					m.Anywhere, m.Candidates = true, v.candidates
				}
				continue
			case v.retarget:
				m.Target, m.TargetScore = l.Node, l.Score
				retargeted = true
				continue
			default:
				continue
			}
			if m.Drain {
				drains.Insert(m.Source)
			}
			if m.Room != "" {
				rooms.Insert(m.Room)
			}
		}
		if len(failed) == 0 && !retargeted {
			churn := p.packingChurn(inUse, after)
			if len(churn) > 0 {
				p.drop(because(plan.ReasonNoNodeFreed, churn))
				continue
			}
			strays, err := p.strays(ctx, stray)
			if err != nil {
				return nil, err
			}
			if len(strays) == 0 {
				return after, nil
			}
			p.drop(because(plan.ReasonUnsteered, strays))
			continue
		}
		// A drain, a room and a gang hold whole or not at all: their other
		// moves do not land as planned either.
		for i, m := range p.out.Moves {
			if _, ok := failed[i]; !ok && m.Drain && drains.Has(m.Source) {
				failed[i] = refusal{changed(&m), fmt.Sprintf("the drain of %s fails: another of its pods does not land as planned", m.Source)}
			}
			if _, ok := failed[i]; !ok && m.Room != "" && rooms.Has(m.Room) {
				failed[i] = refusal{changed(&m), fmt.Sprintf("the room made for %s fails: another of its moves does not hold", m.Room)}
			}
		}
		p.withGangs(failed, changed)
		p.drop(failed)
	}
}

// replays is how many times strays replays a plan with drains left to
// their scheduler's choice.
const replays = 16

// strays replays the plan as kube-scheduler may carry it out, its random
// choices drawn (ties at random, each profile's node sampling from a random
// start of its search), replays times with fixed seeds, so the plan is the
// same every time. It runs only for a plan with drains left to their
// schedulers' choice (moves with Candidates). Unsteered drains hold only
// if in every replay each of their replacements lands on a node that was
// in use and that the plan does not empty; every other move must hold as
// planned. It returns the moves of the drains that fail: those whose own
// replacements strayed, or, when another move failed, every unsteered
// drain, as only they are left to chance.
func (p *planner) strays(ctx context.Context, stray func(move int) func(node string) bool) (map[int]string, error) {
	if !slices.ContainsFunc(p.out.Moves, func(m plan.Move) bool { return m.Candidates > 0 }) {
		return nil, nil
	}
	evictions := p.evictions()
	failed := map[int]string{}
	for seed := range replays {
		random := rand.New(rand.NewPCG(uint64(seed), 0))
		fork := p.sim.Fork()
		p.sim.StartSearches(random)
		landed, err := p.sim.Replay(ctx, evictions, random)
		if err == nil {
			err = interrupted(ctx)
		}
		if rerr := p.sim.Revert(fork); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			return nil, fmt.Errorf("replaying the plan with the schedulers' random choices: %w", err)
		}
		others := ""
		for i, m := range p.out.Moves {
			if evictions[i].Replacement == nil {
				continue
			}
			l := landed[i]
			bad := ""
			switch {
			case l.Node == "":
				bad = "no node is left for it"
			case l.Node == m.Source:
				bad = "it goes back on " + m.Source
			case m.Drain && !m.Steered:
				if stray(i)(l.Node) {
					bad = fmt.Sprintf("it goes on %s, a node the plan empties, that was empty, or that its owner left within the cooldown", l.Node)
				}
			case !m.Anywhere && l.Node != m.Target:
				bad = fmt.Sprintf("it goes on %s, not %s", l.Node, m.Target)
			}
			switch {
			case bad == "":
			case m.Drain && !m.Steered:
				failed[i] = fmt.Sprintf("in replay %d of %d with kube-scheduler's own random choices (ties, node sampling), %s", seed+1, replays, bad)
			case others == "":
				others = fmt.Sprintf("in replay %d of %d with kube-scheduler's own random choices (ties, node sampling), the replacement of %s fails (%s)", seed+1, replays, m.Pod, bad)
			}
		}
		if others != "" {
			for i, m := range p.out.Moves {
				if _, ok := failed[i]; !ok && m.Drain && !m.Steered {
					failed[i] = others
				}
			}
		}
		if len(failed) > 0 {
			break
		}
	}
	// A drain holds whole or not at all.
	for i, m := range p.out.Moves {
		if _, ok := failed[i]; ok || !m.Drain {
			continue
		}
		for j, why := range failed {
			if p.out.Moves[j].Drain && p.out.Moves[j].Source == m.Source {
				failed[i] = fmt.Sprintf("the drain of %s fails: %s", m.Source, why)
				break
			}
		}
	}
	return failed, nil
}

// evictions are the plan's moves as the cluster carries them out.
func (p *planner) evictions() []simulator.Eviction {
	evictions := make([]simulator.Eviction, len(p.applied))
	for i, a := range p.applied {
		m := p.out.Moves[i]
		evictions[i] = simulator.Eviction{Pod: a.obj, Hint: &hint.Hint{Source: m.Source, Target: m.Target, PlanID: p.out.ID}, Drain: m.Drain}
		if metav1.GetControllerOf(a.obj) != nil {
			evictions[i].Replacement = simulator.NewReplacement(a.obj, a.obj.Name, a.replacement, time.Time{})
		}
	}
	return evictions
}

// packingChurn holds a packing plugin's moves to what packing is for: each
// frees its source, and together they add no node. It returns the moves
// that break it: those whose source the plan leaves in use, and, when the
// plan ends with more nodes in use than it began, those onto a node that
// was empty, of a packing plugin or, when the policy packs, of
// RemoveDuplicates: spreading a workload's replicas is no violation to
// take an empty node into use for (the next plan would empty it again).
// The next replay checks what is left.
func (p *planner) packingChurn(before map[string]bool, after []simulator.NodeUsage) map[int]string {
	packs := conflict.PolicyPacks(p.policy)
	inUse := map[string]bool{}
	nBefore, nAfter := 0, 0
	for _, u := range after {
		inUse[u.Node] = u.InUse
		if u.InUse {
			nAfter++
		}
		if before[u.Node] {
			nBefore++
		}
	}
	churn := map[int]string{}
	for i, m := range p.out.Moves {
		switch {
		case !conflict.Packs(m.Strategy):
		case inUse[m.Source]:
			churn[i] = fmt.Sprintf("the plan leaves %s in use: a packing move that frees no node only moves the pod", m.Source)
		case nAfter > nBefore && !before[m.Target]:
			churn[i] = fmt.Sprintf("the plan would end with %d nodes in use, more than the %d it began with, and %s was empty", nAfter, nBefore, m.Target)
		}
		if packs && m.Strategy == removeduplicates.PluginName && nAfter > nBefore && !before[m.Target] {
			churn[i] = fmt.Sprintf("the policy packs and the plan would end with %d nodes in use, more than the %d it began with: a duplicate does not take empty %s into use", nAfter, nBefore, m.Target)
		}
	}
	return churn
}

// refusal is why a move leaves the plan: a plan reason and its detail.
type refusal struct{ reason, detail string }

// because gives each failed move's detail one reason.
func because(reason string, failed map[int]string) map[int]refusal {
	out := make(map[int]refusal, len(failed))
	for i, detail := range failed {
		out[i] = refusal{reason, detail}
	}
	return out
}

// withGangs adds to failed the other moves of each gang one of whose moves
// fails: a gang's moves go together. Each says which move failed first,
// with reason(m), or without reason the first failed move's reason.
func (p *planner) withGangs(failed map[int]refusal, reason func(m *plan.Move) string) {
	first := map[string]refusal{}
	for i, m := range p.out.Moves {
		k := m.Namespace + "/" + m.Gang
		if f, ok := failed[i]; ok && m.Gang != "" {
			if _, seen := first[k]; !seen {
				first[k] = refusal{f.reason, fmt.Sprintf("the move of %s, of its gang (%s), fails: %s", m.Pod, m.Gang, f.detail)}
			}
		}
	}
	for i, m := range p.out.Moves {
		if _, ok := failed[i]; !ok && m.Gang != "" {
			if f, ok := first[m.Namespace+"/"+m.Gang]; ok {
				if reason != nil {
					f.reason = reason(&m)
				}
				failed[i] = f
			}
		}
	}
}

// drop takes failed moves out of the plan, and the rest of their gangs,
// and records why as skips. The plugins have run, so only what the replay
// reads (sources) is updated; the budgets and limits the moves spent are
// not given back: the plan is final.
func (p *planner) drop(failed map[int]refusal) {
	p.withGangs(failed, nil)
	keep := 0
	for i, m := range p.out.Moves {
		f, ok := failed[i]
		if !ok {
			p.out.Moves[keep], p.applied[keep] = m, p.applied[i]
			keep++
			continue
		}
		p.out.Skipped = append(p.out.Skipped, plan.Skip{Pod: m.Pod, UID: m.UID, Profile: m.Profile, Strategy: m.Strategy,
			Scheduler: m.Scheduler, Reason: f.reason, Detail: f.detail})
		p.logger.V(2).Info("Move dropped from the plan", "pod", m.Pod, "strategy", m.Strategy, "why", f.detail)
		if p.dropped == nil {
			p.dropped = map[string]string{}
		}
		if _, ok := p.dropped[m.Source]; !ok {
			p.dropped[m.Source] = f.reason
		}
		p.sources[m.Source]-- // read again by the next replay's checks
	}
	p.out.Moves, p.applied = p.out.Moves[:keep], p.applied[:keep]
}
