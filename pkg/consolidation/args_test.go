package consolidation

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestArgsDefaults(t *testing.T) {
	a := &Args{}
	SetDefaults(a)
	if len(a.Resources) != 2 || a.MaxNodesPerCycle != 3 || a.TargetUtilizationCeiling != 100 {
		t.Fatalf("defaults: %+v", a)
	}
	if err := ValidateArgs(a); err != nil {
		t.Fatal(err)
	}
	b := &Args{Resources: []v1.ResourceName{v1.ResourcePods}, MaxNodesPerCycle: 1, TargetUtilizationCeiling: 80}
	SetDefaults(b)
	if len(b.Resources) != 1 || b.MaxNodesPerCycle != 1 || b.TargetUtilizationCeiling != 80 {
		t.Fatalf("defaults overrode set fields: %+v", b)
	}
}

func TestArgsValidation(t *testing.T) {
	cases := map[string]struct {
		args Args
		want string
	}{
		"negative max nodes": {Args{MaxNodesPerCycle: -1}, "maxNodesPerCycle"},
		"ceiling above 100":  {Args{TargetUtilizationCeiling: 120}, "targetUtilizationCeiling"},
		"negative ceiling":   {Args{TargetUtilizationCeiling: -5}, "targetUtilizationCeiling"},
		"negative cost":      {Args{MaxDrainCostPercent: -1}, "maxDrainCostPercent"},
		"empty resource":     {Args{Resources: []v1.ResourceName{"cpu", ""}}, "resources[1]"},
		"duplicate resource": {Args{Resources: []v1.ResourceName{"cpu", "cpu"}}, "resources[1]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := tc.args
			SetDefaults(&a)
			err := ValidateArgs(&a)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %s", err, tc.want)
			}
		})
	}
	if err := ValidateArgs(&v1.Pod{}); err == nil {
		t.Fatal("accepted args of another type")
	}
}

func TestDeepCopy(t *testing.T) {
	a := &Args{Resources: []v1.ResourceName{"cpu"}}
	b := a.DeepCopyObject().(*Args)
	b.Resources[0] = "memory"
	if a.Resources[0] != "cpu" {
		t.Fatal("DeepCopyObject shares the resources slice")
	}
}
