package consolidation

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rebalancer-dev/rebalancer/pkg/pluginargs"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// ValidateArgs checks defaulted args; it is the descheduler registry's
// validator. It reports every bad field at once, each under
// pluginConfig[Consolidation].args.
var ValidateArgs = pluginargs.Validator(Name, validateArgs)

// validateArgs checks defaulted args, reporting every bad field under path.
func validateArgs(path *field.Path, a *Args) field.ErrorList {
	var errs field.ErrorList
	seen := map[v1.ResourceName]bool{}
	for i, r := range a.Resources {
		at := path.Child("resources").Index(i)
		switch {
		case r == "":
			errs = append(errs, field.Required(at, "must not be empty"))
		case seen[r]:
			errs = append(errs, field.Duplicate(at, r))
		case !requests.Schedulable(r):
			errs = append(errs, field.Invalid(at, r, "unknown resource: want cpu, memory, ephemeral-storage, pods, hugepages-<size> or an extended resource (example.com/gpu)"))
		}
		seen[r] = true
	}
	if n := a.MaxNodesPerCycle; n < 0 {
		errs = append(errs, field.Invalid(path.Child("maxNodesPerCycle"), n, "must be positive"))
	}
	if c := a.TargetUtilizationCeiling; c < 0 || c > 100 {
		errs = append(errs, field.Invalid(path.Child("targetUtilizationCeiling"), c, "must be a percentage in [1, 100]"))
	}
	if n := a.MaxDrainCostPercent; n < 0 {
		errs = append(errs, field.Invalid(path.Child("maxDrainCostPercent"), n, "must be 0 (no limit) or a positive percentage"))
	}
	return errs
}
