package policy

import (
	"slices"
	"strings"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/removepodsviolatingnodetaints"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// ExcludeDrainTaint makes rebalancer's own drain taint
// (wellknown.DrainTaintKey) no violation for RemovePodsViolatingNodeTaints
// in every profile of p, in place: the taint keeps new pods off a node a
// plan empties, and the pods still on it are the plan's to move, not the
// plugin's to evict (a drain left by a run that died mid-plan made the next
// run evict every pod on those nodes). With the plugin's excludedTaints
// the drain key is added to them, once; with includedTaints (the two
// cannot be combined), a drain entry is dropped from them. Nothing else of
// the args changes, and a policy without the plugin is left as it is.
func ExcludeDrainTaint(p *api.DeschedulerPolicy) {
	if p == nil {
		return
	}
	isDrain := func(s string) bool {
		return s == wellknown.DrainTaintKey || strings.HasPrefix(s, wellknown.DrainTaintKey+"=")
	}
	for i := range p.Profiles {
		for j := range p.Profiles[i].PluginConfigs {
			args, ok := p.Profiles[i].PluginConfigs[j].Args.(*removepodsviolatingnodetaints.RemovePodsViolatingNodeTaintsArgs)
			if !ok || args == nil {
				continue
			}
			if len(args.IncludedTaints) > 0 {
				// Only the taints listed count: the drain taint counts only
				// if listed. An emptied list still includes nothing.
				args.IncludedTaints = slices.DeleteFunc(args.IncludedTaints, isDrain)
				continue
			}
			if !slices.Contains(args.ExcludedTaints, wellknown.DrainTaintKey) {
				args.ExcludedTaints = append(args.ExcludedTaints, wellknown.DrainTaintKey)
			}
		}
	}
}
