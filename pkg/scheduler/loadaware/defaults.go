package loadaware

import (
	v1 "k8s.io/api/core/v1"
)

// SetDefaults_Args fills the unset fields of LoadAware's args.
func SetDefaults_Args(a *Args) {
	if len(a.ResourceWeights) == 0 {
		a.ResourceWeights = map[v1.ResourceName]int64{v1.ResourceCPU: 1, v1.ResourceMemory: 1}
	}
}
