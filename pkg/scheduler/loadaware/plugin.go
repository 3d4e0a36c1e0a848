// Package loadaware is the LoadAware Filter and Score plugin of
// rebalancer-scheduler: it places pods by the nodes' real usage, as
// metrics.k8s.io reports it, plus the usage the pod is expected to add, so
// that a pod moved off a node that runs hot is not put back on one, and no
// placement makes a node hot. Requests say what a pod may use; usage says
// what it does.
//
// A node's score is its free share of each resource after the pod's
// expected usage, weighted (resourceWeights). A node whose usage would go
// above usageThresholds is infeasible. Where usage comes from is a Source:
// metrics.k8s.io in rebalancer-scheduler, the snapshot's usage as moved in
// rebalancer's simulation, so both score alike.
package loadaware

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "LoadAware"

// Load is real usage, as metrics.k8s.io reports it: CPU in millicores and
// memory in bytes.
type Load struct {
	MilliCPU, Memory int64
}

// Add returns the sum of two loads.
func (l Load) Add(o Load) Load { return Load{l.MilliCPU + o.MilliCPU, l.Memory + o.Memory} }

// Sub returns l less o.
func (l Load) Sub(o Load) Load { return Load{l.MilliCPU - o.MilliCPU, l.Memory - o.Memory} }

func (l Load) of(r v1.ResourceName) int64 {
	if r == v1.ResourceCPU {
		return l.MilliCPU
	}
	return l.Memory
}

// Source is where the plugin reads usage from.
type Source interface {
	// NodeLoad is the node's usage now, the pods scheduled onto it since
	// it was sampled included; ok is false when it is not known.
	NodeLoad(node fwk.NodeInfo) (load Load, ok bool)
	// Estimate is the usage a pod about to be placed is expected to add.
	Estimate(pod *v1.Pod) Load
}

// Plugin implements Filter and Score.
type Plugin struct {
	args   *Args
	source Source
}

var (
	_ fwk.FilterPlugin = &Plugin{}
	_ fwk.ScorePlugin  = &Plugin{}
)

// NewWithSource builds the plugin over a given source of usage.
func NewWithSource(obj runtime.Object, source Source) (*Plugin, error) {
	args, err := argsCodec.Decode(obj)
	if err != nil {
		return nil, err
	}
	return &Plugin{args: args, source: source}, nil
}

// Name returns the plugin name.
func (pl *Plugin) Name() string { return Name }

// load is the node's usage with the pod placed on it. A node whose usage
// is not known (new, or not scraped yet) counts its pods' estimates.
func (pl *Plugin) load(pod *v1.Pod, ni fwk.NodeInfo) Load {
	used, ok := pl.source.NodeLoad(ni)
	if !ok {
		used = Load{}
		for _, pi := range ni.GetPods() {
			used = used.Add(pl.source.Estimate(pi.GetPod()))
		}
	}
	return used.Add(pl.source.Estimate(pod))
}

func allocatable(ni fwk.NodeInfo, r v1.ResourceName) int64 {
	a := ni.GetAllocatable()
	if r == v1.ResourceCPU {
		return a.GetMilliCPU()
	}
	return a.GetMemory()
}

// Filter refuses a node the pod would take above a usage threshold.
func (pl *Plugin) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if len(pl.args.UsageThresholds) == 0 {
		return nil
	}
	used := pl.load(pod, ni)
	var hot []string
	for _, r := range resources {
		limit, ok := pl.args.UsageThresholds[r]
		if !ok {
			continue
		}
		if total := allocatable(ni, r); total > 0 && used.of(r)*100 > limit*total {
			hot = append(hot, fmt.Sprintf("%s usage above %d%%", r, limit))
		}
	}
	if len(hot) > 0 {
		return fwk.NewStatus(fwk.Unschedulable, "node would run hot: "+strings.Join(hot, ", "))
	}
	return nil
}

// Score is the node's weighted free share after the pod's expected usage.
func (pl *Plugin) Score(_ context.Context, _ fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	used := pl.load(pod, ni)
	var sum, weights int64
	for _, r := range resources {
		w := pl.args.ResourceWeights[r]
		total := allocatable(ni, r)
		if w == 0 || total <= 0 {
			continue
		}
		free := max(min((total-used.of(r))*fwk.MaxScore/total, fwk.MaxScore), 0)
		sum += w * free
		weights += w
	}
	if weights == 0 {
		return 0, nil
	}
	return sum / weights, nil
}

// ScoreExtensions: scores are already in [MinScore, MaxScore].
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }
