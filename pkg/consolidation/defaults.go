package consolidation

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// SetDefaults_Args fills the unset fields of Consolidation's args; it has
// the descheduler registry's defaulter signature.
func SetDefaults_Args(obj runtime.Object) {
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
