package upstream

import (
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
)

// Policy returns a copy of policy without the plugins the upstream
// descheduler does not have (rebalancer's own, such as Consolidation): what
// the same policy file does when the descheduler runs it, less the plugins it
// would refuse to load.
func Policy(policy *api.DeschedulerPolicy) *api.DeschedulerPolicy {
	known := pluginregistry.NewRegistry()
	descheduler.RegisterDefaultPlugins(known)
	keep := func(names []string) []string {
		var out []string
		for _, n := range names {
			if _, ok := known[n]; ok {
				out = append(out, n)
			}
		}
		return out
	}
	out := policy.DeepCopy()
	for i := range out.Profiles {
		p := &out.Profiles[i]
		var configs []api.PluginConfig
		for _, c := range p.PluginConfigs {
			if _, ok := known[c.Name]; ok {
				configs = append(configs, c)
			}
		}
		p.PluginConfigs = configs
		for _, set := range []*api.PluginSet{&p.Plugins.Balance, &p.Plugins.Deschedule, &p.Plugins.Filter, &p.Plugins.PreEvictionFilter} {
			set.Enabled = keep(set.Enabled)
		}
	}
	return out
}
