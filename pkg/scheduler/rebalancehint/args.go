package rebalancehint

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/pluginargs"
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
func decodeArgs(obj runtime.Object) (*Args, error) {
	args := &Args{}
	if err := pluginargs.Decode(Name, obj, args); err != nil {
		return nil, err
	}
	return args, nil
}
