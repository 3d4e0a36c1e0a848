package makeroom

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Args configures MakeRoom in a DeschedulerPolicy:
//
//	pluginConfig:
//	- name: MakeRoom
//	  args:
//	    unschedulableFor: 5m
//	    maxMovesPerPod: 3
//	    maxPodsPerCycle: 5
type Args struct {
	metav1.TypeMeta `json:",inline"`
	// UnschedulableFor is how long a pod must have been unschedulable (its
	// PodScheduled condition False with reason Unschedulable) before room
	// is made for it: the scheduler, a preemption or an autoscaler gets
	// the first chance. Default 1m.
	UnschedulableFor metav1.Duration `json:"unschedulableFor,omitempty"`
	// MaxMovesPerPod is the most pods moved to make room for one pending
	// pod. Default 3.
	MaxMovesPerPod int32 `json:"maxMovesPerPod,omitempty"`
	// MaxPodsPerCycle is the most pending pods one plan makes room for.
	// Default 5, at most 1000.
	MaxPodsPerCycle int32 `json:"maxPodsPerCycle,omitempty"`
}

// DeepCopyObject makes Args a runtime.Object, as the descheduler's plugin
// registry requires of plugin arguments.
func (a *Args) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	out := *a
	return &out
}

// SetDefaults fills unset fields; it has the descheduler registry's
// defaulter signature.
func SetDefaults(obj runtime.Object) {
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

// ValidateArgs checks defaulted args; it has the descheduler registry's
// validator signature. Messages name the field.
func ValidateArgs(obj runtime.Object) error {
	a, ok := obj.(*Args)
	if !ok {
		return fmt.Errorf("%s args: want %T, got %T", Name, a, obj)
	}
	if d := a.UnschedulableFor.Duration; d < 0 {
		return fmt.Errorf("%s args: unschedulableFor: invalid value %q: must not be negative", Name, d)
	}
	if n := a.MaxMovesPerPod; n < 0 || n > maxMoves {
		return fmt.Errorf("%s args: maxMovesPerPod: invalid value %d: must be between 1 and %d", Name, n, maxMoves)
	}
	if n := a.MaxPodsPerCycle; n < 0 || n > maxPodsPerCycle {
		return fmt.Errorf("%s args: maxPodsPerCycle: invalid value %d: must be between 1 and %d", Name, n, maxPodsPerCycle)
	}
	return nil
}

// maxMoves bounds maxMovesPerPod: making room by moving more pods than
// that disrupts more than one pending pod is worth.
const maxMoves = 20

// maxPodsPerCycle bounds maxPodsPerCycle. A plan searches for room for at
// most maxExamined times as many pending pods (those of a shape that an
// earlier pod of the queue got no room for are not searched; see
// Balance), each search simulating at most maxTries sets of moves: the
// bound is what keeps a plan's time finite when room can rarely be made,
// and 2^31-1 made it none (10,000 pending pods then took minutes). At 1000
// a plan makes room for 200 times the default, up to 1000 ×
// maxMovesPerPod evictions in one cycle, more than a cluster should take
// at once; pods left over get room in the next cycles.
const maxPodsPerCycle = 1000
