package planner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
)

// whileRoom wraps a plugin so that it runs only while the plan can take
// another move of a pod the plugin may evict (evictable, its profile's
// evictor filter). Once the plan holds the policy's
// maxNoOfPodsToEvictTotal moves, or maxNoOfPodsToEvictPerNamespace in
// every namespace holding such a pod, judge refuses every eviction the
// plugin could ask for, so it is not run (RemoveDuplicates alone walks
// every node for each workload it finds duplicated: seconds on 20,000
// nodes); warnFull says once which were not, and why. A plugin that is
// both a deschedule and a balance plugin runs as it is.
func (p *planner) whileRoom(profile, name string, pl frameworktypes.Plugin, evictable func(*v1.Pod) bool) frameworktypes.Plugin {
	d, deschedule := pl.(frameworktypes.DeschedulePlugin)
	b, balance := pl.(frameworktypes.BalancePlugin)
	room := func() bool {
		limit := p.noRoom(evictable)
		if limit == "" {
			return true
		}
		p.notRun = append(p.notRun, notRun{plugin: fmt.Sprintf("%s (profile %s)", name, profile), limit: limit})
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

// notRun is a plugin whileRoom did not run, and the limit in words that
// left no room.
type notRun struct{ plugin, limit string }

// noRoom names the limit that keeps the plan from taking any move of a pod
// evictable allows, "" while it can take one.
func (p *planner) noRoom(evictable func(*v1.Pod) bool) string {
	if p.full() {
		return fmt.Sprintf("maxNoOfPodsToEvictTotal (%d) is reached", *p.policy.MaxNoOfPodsToEvictTotal)
	}
	limit := p.policy.MaxNoOfPodsToEvictPerNamespace
	if limit == nil {
		return ""
	}
	for ns, pods := range p.podsByNamespace {
		if !p.namespaceFull(ns) && slices.ContainsFunc(pods, evictable) {
			return ""
		}
	}
	return fmt.Sprintf("maxNoOfPodsToEvictPerNamespace (%d) is reached in every namespace with a pod the profile may evict", *limit)
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

// warnFull says which plugins did not run because the plan was full, and
// which limit filled it.
func (p *planner) warnFull() {
	var limits []string
	plugins := map[string][]string{}
	for _, n := range p.notRun {
		if _, ok := plugins[n.limit]; !ok {
			limits = append(limits, n.limit)
		}
		plugins[n.limit] = append(plugins[n.limit], n.plugin)
	}
	for _, limit := range limits {
		p.out.Warnings = append(p.out.Warnings, fmt.Sprintf("%s, so %s did not run: the plan could take none of their moves",
			limit, strings.Join(plugins[limit], ", ")))
	}
}
