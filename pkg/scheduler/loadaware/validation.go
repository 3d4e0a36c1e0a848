package loadaware

import (
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rebalancer-dev/rebalancer/pkg/pluginargs"
)

// resources are those metrics.k8s.io reports usage of.
var resources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}

// argsCodec decodes the profile's raw args into defaulted, validated Args,
// for New and, with ValidateArgs, for a configuration loader to refuse bad
// args before any framework is built.
var argsCodec = pluginargs.Codec[Args]{Plugin: Name, SetDefaults: SetDefaults_Args, Validate: validateArgs}

// ValidateArgs is argsCodec.ValidateArgs.
var ValidateArgs = argsCodec.ValidateArgs

// validateArgs checks defaulted args, reporting every bad field under path.
// Resources are checked in name order, so that the errors are in a stable
// order.
func validateArgs(path *field.Path, a *Args) field.ErrorList {
	var errs field.ErrorList
	total := int64(0)
	for _, name := range slices.Sorted(maps.Keys(a.ResourceWeights)) {
		at, w := path.Child("resourceWeights").Key(string(name)), a.ResourceWeights[name]
		if !slices.Contains(resources, name) {
			errs = append(errs, field.NotSupported(at, name, resources))
			continue
		}
		if w < 0 || w > 100 {
			errs = append(errs, field.Invalid(at, w, "must be between 0 and 100"))
			continue
		}
		total += w
	}
	if len(errs) == 0 && total == 0 {
		errs = append(errs, field.Invalid(path.Child("resourceWeights"), a.ResourceWeights, "every weight is 0: at least one must be positive"))
	}
	for _, name := range slices.Sorted(maps.Keys(a.UsageThresholds)) {
		at, t := path.Child("usageThresholds").Key(string(name)), a.UsageThresholds[name]
		if !slices.Contains(resources, name) {
			errs = append(errs, field.NotSupported(at, name, resources))
			continue
		}
		if t <= 0 || t > 100 {
			errs = append(errs, field.Invalid(at, t, "must be between 1 and 100 (percent of allocatable)"))
		}
	}
	return errs
}
