package planner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// gangMove is a gang being moved whole: a plugin asked to evict one member
// (asked), and every member is judged in turn, in one transaction. Evicted
// alone, a member could leave its group below the members it needs, and
// its job fail or restart whole; so the group moves whole, each member to
// a node of its own scheduler's choosing (steered), or not at all.
type gangMove struct {
	name  string // gang.Name
	asked types.UID
	// The first member's refusal.
	refusedPod          *v1.Pod
	refused, refusedWhy string
}

// gangKey is the group a pod belongs to: a gang's name holds within its
// namespace. "" for a pod of no gang.
func gangKey(pod *v1.Pod) string {
	g := gang.Name(pod)
	if g == "" {
		return ""
	}
	return pod.Namespace + "/" + g
}

// gangMembers lists the pods of the simulation in pod's gang (pod
// included), by name: the simulation's pods as the plan found them, so a
// member already moved in this plan is among them.
func (p *planner) gangMembers(pod *v1.Pod) []*v1.Pod {
	if p.gangs == nil {
		p.gangs = map[string][]*v1.Pod{}
		for _, q := range p.sim.Bound() {
			if k := gangKey(q); k != "" && !simulator.NodeBound(q) {
				p.gangs[k] = append(p.gangs[k], q)
			}
		}
		for _, members := range p.gangs {
			slices.SortFunc(members, func(a, b *v1.Pod) int { return strings.Compare(a.Name, b.Name) })
		}
	}
	return p.gangs[gangKey(pod)]
}

// gangStayer is the first member of a gang, in gangMembers' order, that
// must stay (mustStayAlone) and why; member nil when none must.
type gangStayer struct {
	spent       uint64 // planner.spent when found
	member      *v1.Pod
	why, detail string
}

// gangMustStay is mustStay of pod, a gang's member: it must stay when any
// member must, with its own reason when it is the first member that must
// stay, else as gang naming that member. Whether a member must stay
// changes only with the budgets the plan spends (the cooldown, opt-outs,
// claims and stickiness hold for the whole plan), so the first such member
// is found once per gang and budget state, not once per member asked
// about: asking of every member of a gang of n costs n, not n².
func (p *planner) gangMustStay(pod *v1.Pod) (why, detail string) {
	k := gangKey(pod)
	s, ok := p.stayers[k]
	if !ok || s.spent != p.spent {
		s = gangStayer{spent: p.spent}
		for _, m := range p.gangMembers(pod) {
			if why, detail := p.mustStayAlone(m); why != "" {
				s.member, s.why, s.detail = m, why, detail
				break
			}
		}
		if p.stayers == nil {
			p.stayers = map[string]gangStayer{}
		}
		p.stayers[k] = s
	}
	switch {
	case s.member == nil:
		return "", ""
	case s.member.UID == pod.UID:
		return s.why, s.detail
	}
	return plan.ReasonGang, gangRefusal(pod, s.member, s.why, s.detail)
}

// moveGang judges the eviction a plugin asked for of pod, a gang's member,
// as the move of its whole gang: pod first, with the plugin's intent, then
// each other member, which must leave its node for one its scheduler is
// steered to (or surely picks) and pod's options allow, each passing the evictor's filters
// (filter) and every check a move passes. All members enter the plan, or
// none, and pod is skipped as gang with the first refusal.
func (p *planner) moveGang(ctx context.Context, profile, strategy string, pod *v1.Pod, opts evictions.EvictOptions, simOpts simulator.PredictOptions, filter func(*v1.Pod) bool) error {
	refusal := profile + "/" + strategy + "/" + gangKey(pod)
	if r, ok := p.refusedGangs[refusal]; ok && r.version == p.version && r.member.UID != pod.UID {
		p.skip(profile, strategy, pod, plan.ReasonGang, gangRefusal(pod, r.member, r.why, r.detail))
		return errSkipped
	}
	g := &gangMove{name: gang.Name(pod), asked: pod.UID}
	members := p.gangMembers(pod)
	p.logger.V(2).Info("Moving a gang whole", "pod", klog.KObj(pod), "gang", gang.Of(pod), "members", len(members))
	tx := p.begin()
	p.group = g
	err := p.judge(ctx, profile, strategy, pod, opts, simOpts, "")
	// The others go nowhere pod may not (a node being drained, one its
	// plugin rules out), and leave their nodes.
	others := simOpts
	others.LeaveSource = true
	for _, m := range members {
		if err != nil {
			break
		}
		// A gang of thousands takes as many predictions: stop between
		// them when the plan is interrupted.
		if err = interrupted(ctx); err != nil {
			break
		}
		if m.UID == pod.UID {
			continue
		}
		if !filter(m) {
			g.refuse(m, plan.ReasonProtected, "the evictor's filters protect it")
			err = errSkipped
			break
		}
		// The plugin's own options are about pod; the plan's exclusions
		// apply to every move (judge adds them).
		err = p.judge(ctx, profile, strategy, m, evictions.EvictOptions{StrategyName: opts.StrategyName, Reason: fmt.Sprintf("its gang moves whole (%s asked for %s)", strategy, key(pod))},
			others, "")
	}
	p.group = nil
	if err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			return rerr
		}
		switch {
		case g.refusedPod == nil:
			return err // a failure
		case g.refusedPod.UID == pod.UID:
			p.skip(profile, strategy, pod, g.refusedWhy, g.refused) // its own reason
		default:
			p.skip(profile, strategy, pod, plan.ReasonGang, gangRefusal(pod, g.refusedPod, g.refusedWhy, g.refused))
		}
		if refused(err) {
			if g.refusedPod != nil && g.refusedPod.UID != pod.UID {
				p.refuseGang(refusal, g)
			}
			return errSkipped
		}
		return err
	}
	tx.Commit()
	p.logger.V(2).Info("Gang moved whole", "pod", klog.KObj(pod), "gang", gang.Of(pod), "members", len(members))
	return nil
}

// gangRefused is a gang whose move a strategy asked for and the plan
// refused, for a member other than the one asked about, at plan version
// version (after the refusal was rolled back).
type gangRefused struct {
	version     uint64
	member      *v1.Pod
	why, detail string
}

// refuseGang remembers the refusal of g under key (profile, strategy and
// gang): until a move enters or leaves the plan, the strategy asking about
// another member is refused for the same member at once. Judging the whole
// gang again would place the same members on the same simulation, and a
// strategy asks about every member of a gang it wants moved: a gang of n
// members refused would otherwise cost n² predictions.
func (p *planner) refuseGang(key string, g *gangMove) {
	if p.refusedGangs == nil {
		p.refusedGangs = map[string]gangRefused{}
	}
	p.refusedGangs[key] = gangRefused{version: p.version, member: g.refusedPod, why: g.refusedWhy, detail: g.refused}
}

// gangRefusal says why pod, a gang's member, is not moved: member, another
// of its gang, may not move (why, detail).
func gangRefusal(pod, member *v1.Pod, why, detail string) string {
	return fmt.Sprintf("the pod belongs to a gang (%s), which moves whole or not at all: %s: %s (%s)", gang.Of(pod), key(member), why, detail)
}

// gangName is the gang being moved whole, "" when none is.
func (p *planner) gangName() string {
	if p.group == nil {
		return ""
	}
	return p.group.name
}

// refuse notes the first member's refusal.
func (g *gangMove) refuse(pod *v1.Pod, why, detail string) {
	if g.refusedPod == nil {
		g.refusedPod, g.refusedWhy, g.refused = pod, why, detail
	}
}
