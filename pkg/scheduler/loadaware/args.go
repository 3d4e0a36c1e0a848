package loadaware

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/pluginargs"
)

// Args configures LoadAware through the profile's pluginConfig, with the
// field names of koordinator's LoadAwareScheduling:
//
//	pluginConfig:
//	- name: LoadAware
//	  args:
//	    resourceWeights: {cpu: 1, memory: 1}
//	    usageThresholds: {cpu: 70, memory: 90}
type Args struct {
	metav1.TypeMeta `json:",inline"`
	// ResourceWeights weigh each resource's free share in the score: cpu
	// and memory, the resources metrics.k8s.io reports. Default: 1 each.
	ResourceWeights map[v1.ResourceName]int64 `json:"resourceWeights,omitempty"`
	// UsageThresholds, in percent of allocatable, make a node infeasible
	// for a pod that would take its usage above them: no placement makes
	// a node hot. A resource without a threshold is not filtered on.
	UsageThresholds map[v1.ResourceName]int64 `json:"usageThresholds,omitempty"`
}

// resources are those metrics.k8s.io reports usage of.
var resources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}

// SetDefaults fills unset fields.
func (a *Args) SetDefaults() {
	if len(a.ResourceWeights) == 0 {
		a.ResourceWeights = map[v1.ResourceName]int64{v1.ResourceCPU: 1, v1.ResourceMemory: 1}
	}
}

// Validate returns an error naming the offending field.
func (a *Args) Validate() error {
	total := int64(0)
	for name, w := range a.ResourceWeights {
		if !slices.Contains(resources, name) {
			return fmt.Errorf("pluginConfig[%s].args.resourceWeights: unknown resource %q, want cpu or memory", Name, name)
		}
		if w < 0 || w > 100 {
			return fmt.Errorf("pluginConfig[%s].args.resourceWeights[%s]: %d, want 0 to 100", Name, name, w)
		}
		total += w
	}
	if total == 0 {
		return fmt.Errorf("pluginConfig[%s].args.resourceWeights: every weight is 0, want at least one positive", Name)
	}
	for name, t := range a.UsageThresholds {
		if !slices.Contains(resources, name) {
			return fmt.Errorf("pluginConfig[%s].args.usageThresholds: unknown resource %q, want cpu or memory", Name, name)
		}
		if t <= 0 || t > 100 {
			return fmt.Errorf("pluginConfig[%s].args.usageThresholds[%s]: %d, want 1 to 100 (percent of allocatable)", Name, name, t)
		}
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
