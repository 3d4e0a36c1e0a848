package makeroom

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// SetDefaults_Args fills the unset fields of MakeRoom's args; it has the
// descheduler registry's defaulter signature.
func SetDefaults_Args(obj runtime.Object) {
	a := obj.(*Args)
	if a.UnschedulableFor.Duration == 0 {
		a.UnschedulableFor.Duration = time.Minute
	}
	if a.MaxMovesPerPod == 0 {
		a.MaxMovesPerPod = 3
	}
	if a.MaxPodsPerCycle == 0 {
		a.MaxPodsPerCycle = 5
	}
}
