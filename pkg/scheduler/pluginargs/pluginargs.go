// Package pluginargs decodes the arguments of rebalancer-scheduler's own
// plugins as a profile's pluginConfig gives them: kube-scheduler hands args
// of out-of-tree plugins over as runtime.Unknown, and they are decoded
// strictly, so that a misspelt field is an error, not a default.
package pluginargs

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
)

// Args are a plugin's arguments.
type Args interface {
	// SetDefaults fills unset fields.
	SetDefaults()
	// Validate returns an error naming the offending field.
	Validate() error
}

// Decode decodes obj, YAML or JSON with field names matched
// case-sensitively as the Kubernetes API does and unknown or duplicate
// fields refused, into args, then defaults and validates them. Errors name
// pluginConfig[plugin].args.
func Decode(plugin string, obj runtime.Object, args Args) error {
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if o != nil && len(o.Raw) > 0 { // a typed nil is no args, as nil is
			data, err := yaml.YAMLToJSONStrict(o.Raw)
			if err == nil {
				err = strictjson.Unmarshal(data, args)
			}
			if err != nil {
				return fmt.Errorf("pluginConfig[%s].args: %w", plugin, err)
			}
		}
	default:
		return fmt.Errorf("pluginConfig[%s].args: want runtime.Unknown, got %T", plugin, obj)
	}
	args.SetDefaults()
	return args.Validate()
}
