package rebalancehint

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// Args configures RebalanceHint through the profile's pluginConfig:
//
//	pluginConfig:
//	- name: RebalanceHint
//	  args:
//	    hintTTL: 10m
type Args struct {
	metav1.TypeMeta `json:",inline"`
	// HintTTL is how long a hint steers the owner's next pod after the hinted
	// pod is seen leaving. A hint written longer than HintTTL before that is
	// stale (its eviction failed and the pod left later for another reason)
	// and is ignored.
	HintTTL metav1.Duration `json:"hintTTL,omitempty"`
}

// DefaultHintTTL is hint.DefaultTTL.
const DefaultHintTTL = hint.DefaultTTL

// SetDefaults fills unset fields.
func (a *Args) SetDefaults() {
	if a.HintTTL.Duration == 0 {
		a.HintTTL.Duration = DefaultHintTTL
	}
}

// Validate returns an error naming the offending field.
func (a *Args) Validate() error {
	if err := hint.ValidateTTL(a.HintTTL.Duration); err != nil {
		return fmt.Errorf("pluginConfig[%s].args.hintTTL: %w", Name, err)
	}
	return nil
}

// ValidateArgs decodes and validates the profile's raw args as New does, so a
// configuration loader can reject bad args before any framework is built.
func ValidateArgs(obj runtime.Object) error {
	_, err := decodeArgs(obj)
	return err
}

// decodeArgs turns the profile's raw args into defaulted, validated Args.
// kube-scheduler hands args of out-of-tree plugins over as runtime.Unknown;
// they are decoded strictly so a misspelt field is an error, not a default.
func decodeArgs(obj runtime.Object) (*Args, error) {
	args := &Args{}
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			if err := decodeStrict(o.Raw, args); err != nil {
				return nil, fmt.Errorf("pluginConfig[%s].args: %w", Name, err)
			}
		}
	default:
		return nil, fmt.Errorf("pluginConfig[%s].args: want runtime.Unknown, got %T", Name, obj)
	}
	args.SetDefaults()
	if err := args.Validate(); err != nil {
		return nil, err
	}
	return args, nil
}

// decodeStrict decodes YAML or JSON, matching field names case-sensitively as
// the Kubernetes API does, and fails on unknown or duplicate fields.
func decodeStrict(raw []byte, into any) error {
	data, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return err
	}
	return strictjson.Unmarshal(data, into)
}
