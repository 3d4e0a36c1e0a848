package rebalancehint

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/pluginargs"
)

// argsCodec decodes the profile's raw args into defaulted, validated Args,
// for New and, with ValidateArgs, for a configuration loader to refuse bad
// args before any framework is built.
var argsCodec = pluginargs.Codec[Args]{Plugin: Name, SetDefaults: SetDefaults_Args, Validate: validateArgs}

// ValidateArgs is argsCodec.ValidateArgs.
var ValidateArgs = argsCodec.ValidateArgs

// validateArgs checks defaulted args, reporting every bad field under path.
func validateArgs(path *field.Path, a *Args) field.ErrorList {
	var errs field.ErrorList
	if hint.ValidateTTL(a.HintTTL.Duration) != nil {
		errs = append(errs, field.Invalid(path.Child("hintTTL"), a.HintTTL, fmt.Sprintf("must be between %s and %s", hint.MinTTL, hint.MaxTTL)))
	}
	return errs
}
