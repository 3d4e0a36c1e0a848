// Package pluginargs serves the arguments of rebalancer's own plugins: it
// names their field path, pluginConfig[plugin].args, under which each
// plugin's validation reports every bad field at once, makes a descheduler
// plugin's registry validator of that validation, and decodes the args of
// rebalancer-scheduler's plugins as a profile's pluginConfig gives them:
// kube-scheduler hands args of out-of-tree plugins over as runtime.Unknown,
// and they are decoded strictly, so that a misspelt field is an error, not a
// default.
package pluginargs

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
)

// Path is the field path of plugin's args: pluginConfig[plugin].args.
func Path(plugin string) *field.Path {
	return field.NewPath("pluginConfig").Key(plugin).Child("args")
}

// Validator is the descheduler registry's validator of plugin's args, a *T
// the descheduler has decoded and defaulted: validate's errors, each under
// Path(plugin), aggregated into one.
func Validator[T any](plugin string, validate func(*field.Path, *T) field.ErrorList) func(runtime.Object) error {
	return func(obj runtime.Object) error {
		args, ok := any(obj).(*T)
		if !ok {
			return fmt.Errorf("%s: want %T, got %T", Path(plugin), args, obj)
		}
		return validate(Path(plugin), args).ToAggregate()
	}
}

// Codec decodes, defaults and validates the args of a rebalancer-scheduler
// plugin, a T.
type Codec[T any] struct {
	// Plugin is the plugin's name.
	Plugin string
	// SetDefaults fills unset fields.
	SetDefaults func(*T)
	// Validate reports every bad field of defaulted args under path.
	Validate func(path *field.Path, args *T) field.ErrorList
}

// Decode decodes obj, YAML or JSON with field names matched
// case-sensitively as the Kubernetes API does and unknown or duplicate
// fields refused, into new args, then defaults and validates them. Errors
// name Path(c.Plugin); Validate's are aggregated into one.
func (c Codec[T]) Decode(obj runtime.Object) (*T, error) {
	path := Path(c.Plugin)
	args := new(T)
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if o != nil && len(o.Raw) > 0 { // a typed nil is no args, as nil is
			data, err := yaml.YAMLToJSONStrict(o.Raw)
			if err == nil {
				err = strictjson.Unmarshal(data, args)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	default:
		return nil, fmt.Errorf("%s: want runtime.Unknown, got %T", path, obj)
	}
	c.SetDefaults(args)
	if err := c.Validate(path, args).ToAggregate(); err != nil {
		return nil, err
	}
	return args, nil
}

// ValidateArgs decodes obj as Decode does and returns its error, so that a
// configuration loader can refuse bad args before any framework is built.
func (c Codec[T]) ValidateArgs(obj runtime.Object) error {
	_, err := c.Decode(obj)
	return err
}
