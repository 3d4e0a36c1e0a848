package makeroom

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rebalancer-dev/rebalancer/pkg/pluginargs"
)

// validateArgs checks defaulted args, reporting every bad field under path.
func validateArgs(path *field.Path, a *Args) field.ErrorList {
	var errs field.ErrorList
	if a.UnschedulableFor.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("unschedulableFor"), a.UnschedulableFor, "must not be negative"))
	}
	if n := a.MaxMovesPerPod; n < 0 || n > maxMoves {
		errs = append(errs, field.Invalid(path.Child("maxMovesPerPod"), n, fmt.Sprintf("must be between 1 and %d", maxMoves)))
	}
	if n := a.MaxPodsPerCycle; n < 0 || n > maxPodsPerCycle {
		errs = append(errs, field.Invalid(path.Child("maxPodsPerCycle"), n, fmt.Sprintf("must be between 1 and %d", maxPodsPerCycle)))
	}
	return errs
}

// ValidateArgs checks defaulted args; it is the descheduler registry's
// validator. It reports every bad field at once, each under
// pluginConfig[MakeRoom].args.
var ValidateArgs = pluginargs.Validator(Name, validateArgs)

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
