package policy

import (
	"sync"

	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/rebalancer-dev/rebalancer/pkg/consolidation"
	"github.com/rebalancer-dev/rebalancer/pkg/makeroom"
)

var setupOnce sync.Once

// Registry returns the descheduler plugins a policy may name: the
// descheduler's own and Consolidation. It fills the library's global
// registry once, since the library decodes plugin arguments through that
// global. Policy loading, the planner and the upstream baseline all use it.
func Registry() pluginregistry.Registry {
	setupOnce.Do(func() {
		descheduler.SetupPlugins() // replaces the global registry: ours must be added after
		pluginregistry.Register(consolidation.Name, consolidation.New, &consolidation.Consolidation{}, &consolidation.Args{},
			consolidation.ValidateArgs, consolidation.SetDefaults_Args, pluginregistry.PluginRegistry)
		pluginregistry.Register(makeroom.Name, makeroom.New, &makeroom.MakeRoom{}, &makeroom.Args{},
			makeroom.ValidateArgs, makeroom.SetDefaults_Args, pluginregistry.PluginRegistry)
	})
	return pluginregistry.PluginRegistry
}
