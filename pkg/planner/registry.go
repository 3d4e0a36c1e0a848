package planner

import (
	"sync"

	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
)

var setupOnce sync.Once

// Registry returns the descheduler plugins a policy may name: the
// descheduler's own. It fills the library's global registry once, since the
// library decodes plugin arguments through that global.
func Registry() pluginregistry.Registry {
	setupOnce.Do(descheduler.SetupPlugins) // replaces the global registry: ours must be added after
	return pluginregistry.PluginRegistry
}
