package planner

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
)

// whileRoom wraps a plugin so that it runs only while the plan can take
// another move. Once the plan holds the policy's maxNoOfPodsToEvictTotal
// moves, judge refuses every eviction any plugin asks for, so the plugins
// after that are not run (RemoveDuplicates alone walks every node for each
// workload it finds duplicated: seconds on 20,000 nodes); warnFull says
// once which were not. A plugin that is both a deschedule and a balance
// plugin runs as it is.
func (p *planner) whileRoom(profile, name string, pl frameworktypes.Plugin) frameworktypes.Plugin {
	d, deschedule := pl.(frameworktypes.DeschedulePlugin)
	b, balance := pl.(frameworktypes.BalancePlugin)
	room := func() bool {
		if !p.full() {
			return true
		}
		p.notRun = append(p.notRun, fmt.Sprintf("%s (profile %s)", name, profile))
		return false
	}
	switch {
	case deschedule && !balance:
		return roomyDeschedule{d, room}
	case balance && !deschedule:
		return roomyBalance{b, room}
	}
	return pl
}

type roomyDeschedule struct {
	frameworktypes.DeschedulePlugin
	room func() bool
}

func (r roomyDeschedule) Deschedule(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	if !r.room() {
		return nil
	}
	return r.DeschedulePlugin.Deschedule(ctx, nodes)
}

type roomyBalance struct {
	frameworktypes.BalancePlugin
	room func() bool
}

func (r roomyBalance) Balance(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	if !r.room() {
		return nil
	}
	return r.BalancePlugin.Balance(ctx, nodes)
}

// warnFull says which plugins did not run because the plan was full.
func (p *planner) warnFull() {
	if len(p.notRun) == 0 {
		return
	}
	p.out.Warnings = append(p.out.Warnings, fmt.Sprintf("maxNoOfPodsToEvictTotal (%d) is reached, so %s did not run: the plan could take none of their moves",
		*p.policy.MaxNoOfPodsToEvictTotal, strings.Join(p.notRun, ", ")))
}
