// Package scheduler holds rebalancer's kube-scheduler plugins (one package
// each) and Registry, the one list of them that rebalancer-scheduler runs
// and the simulator models.
package scheduler

import (
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/loadaware"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
)

// Registry is rebalancer's plugins by name, each built by the factory
// given for it (the simulator's run on its clock and its usage), or by the
// plugin's own when nil.
func Registry(hint, load frameworkruntime.PluginFactory) frameworkruntime.Registry {
	if hint == nil {
		hint = rebalancehint.New
	}
	if load == nil {
		load = loadaware.New
	}
	return frameworkruntime.Registry{rebalancehint.Name: hint, loadaware.Name: load}
}

// All is the plugins rebalancer-scheduler is built with: kube-scheduler's
// in-tree ones and Registry's, built by the given factories (nil: their own).
func All(hint, load frameworkruntime.PluginFactory) (frameworkruntime.Registry, error) {
	r := plugins.NewInTreeRegistry()
	if err := r.Merge(Registry(hint, load)); err != nil {
		return nil, err
	}
	return r, nil
}
