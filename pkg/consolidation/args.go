package consolidation

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Args configures Consolidation in a DeschedulerPolicy:
//
//	pluginConfig:
//	- name: Consolidation
//	  args:
//	    resources: [cpu, memory]
//	    maxNodesPerCycle: 3
//	    targetUtilizationCeiling: 90
//	    maxDrainCostPercent: 200
type Args struct {
	metav1.TypeMeta `json:",inline"`
	// Resources decide how utilized a node is (which nodes are tried first)
	// and what the ceiling applies to. Default: cpu and memory.
	Resources []v1.ResourceName `json:"resources,omitempty"`
	// MaxNodesPerCycle is the most nodes one plan empties. Default 3.
	MaxNodesPerCycle int32 `json:"maxNodesPerCycle,omitempty"`
	// TargetUtilizationCeiling, in percent of allocatable: a pod moves only
	// to a node that stays at or below it for every resource above after the
	// move. Default 100 (any node the pod fits on).
	TargetUtilizationCeiling int32 `json:"targetUtilizationCeiling,omitempty"`
	// MaxDrainCostPercent weighs what emptying a node costs against what it
	// saves, as Karpenter's Balanced consolidation does: a node is emptied
	// only when evicting its pods costs at most this percentage of what a
	// node in use costs on average (disruption.Cost: 1 a pod, more for a
	// pod-deletion-cost or a priority). Emptying one node of N saves 1/N of
	// the nodes; at 200, as Karpenter's k = 2, it may cost up to 2/N of the
	// disruption of them all. 0, the default, weighs no cost. It is the
	// profile's: HighNodeUtilization in the same profile, which empties
	// nodes too, is held to it (configured here even when Consolidation is
	// not enabled).
	MaxDrainCostPercent int32 `json:"maxDrainCostPercent,omitempty"`
}

// DeepCopyObject makes Args a runtime.Object, as the descheduler's plugin
// registry requires of plugin arguments.
func (a *Args) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	out := *a
	out.Resources = append([]v1.ResourceName(nil), a.Resources...)
	return &out
}

// SetDefaults fills unset fields; it has the descheduler registry's
// defaulter signature.
func SetDefaults(obj runtime.Object) {
	a := obj.(*Args)
	if len(a.Resources) == 0 {
		a.Resources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}
	}
	if a.MaxNodesPerCycle == 0 {
		a.MaxNodesPerCycle = 3
	}
	if a.TargetUtilizationCeiling == 0 {
		a.TargetUtilizationCeiling = 100
	}
}

// ValidateArgs checks defaulted args; it has the descheduler registry's
// validator signature. Messages name the field.
func ValidateArgs(obj runtime.Object) error {
	a, ok := obj.(*Args)
	if !ok {
		return fmt.Errorf("%s args: want %T, got %T", Name, a, obj)
	}
	seen := map[v1.ResourceName]bool{}
	for i, r := range a.Resources {
		if r == "" {
			return fmt.Errorf("%s args: resources[%d]: must not be empty", Name, i)
		}
		if seen[r] {
			return fmt.Errorf("%s args: resources[%d]: duplicate resource %q", Name, i, r)
		}
		if !requests.Schedulable(r) {
			return fmt.Errorf("%s args: resources[%d]: unknown resource %q: want cpu, memory, ephemeral-storage, pods, hugepages-<size> or an extended resource (example.com/gpu)", Name, i, r)
		}
		seen[r] = true
	}
	if a.MaxNodesPerCycle < 0 {
		return fmt.Errorf("%s args: maxNodesPerCycle: invalid value %d: must be positive", Name, a.MaxNodesPerCycle)
	}
	if c := a.TargetUtilizationCeiling; c < 0 || c > 100 {
		return fmt.Errorf("%s args: targetUtilizationCeiling: invalid value %d: must be a percentage in [1, 100]", Name, c)
	}
	if a.MaxDrainCostPercent < 0 {
		return fmt.Errorf("%s args: maxDrainCostPercent: invalid value %d: must be 0 (no limit) or a positive percentage", Name, a.MaxDrainCostPercent)
	}
	return nil
}
