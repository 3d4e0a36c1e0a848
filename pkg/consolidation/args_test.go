package consolidation

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestArgsDefaults(t *testing.T) {
	a := &Args{}
	SetDefaults_Args(a)
	if len(a.Resources) != 2 || a.MaxNodesPerCycle != 3 || a.TargetUtilizationCeiling != 100 {
		t.Fatalf("defaults: %+v", a)
	}
	if err := ValidateArgs(a); err != nil {
		t.Fatal(err)
	}
	b := &Args{Resources: []v1.ResourceName{v1.ResourcePods}, MaxNodesPerCycle: 1, TargetUtilizationCeiling: 80}
	SetDefaults_Args(b)
	if len(b.Resources) != 1 || b.MaxNodesPerCycle != 1 || b.TargetUtilizationCeiling != 80 {
		t.Fatalf("defaults overrode set fields: %+v", b)
	}
}

func TestArgsValidation(t *testing.T) {
	cases := map[string]struct {
		args Args
		want string
	}{
		"negative max nodes": {Args{MaxNodesPerCycle: -1}, "pluginConfig[Consolidation].args.maxNodesPerCycle: Invalid value: -1: must be positive"},
		"ceiling above 100":  {Args{TargetUtilizationCeiling: 120}, "pluginConfig[Consolidation].args.targetUtilizationCeiling: Invalid value: 120: must be a percentage in [1, 100]"},
		"negative ceiling":   {Args{TargetUtilizationCeiling: -5}, "pluginConfig[Consolidation].args.targetUtilizationCeiling: Invalid value: -5"},
		"negative cost":      {Args{MaxDrainCostPercent: -1}, "pluginConfig[Consolidation].args.maxDrainCostPercent: Invalid value: -1"},
		"empty resource":     {Args{Resources: []v1.ResourceName{"cpu", ""}}, "pluginConfig[Consolidation].args.resources[1]: Required value: must not be empty"},
		"duplicate resource": {Args{Resources: []v1.ResourceName{"cpu", "cpu"}}, `pluginConfig[Consolidation].args.resources[1]: Duplicate value: "cpu"`},
		"unknown resource":   {Args{Resources: []v1.ResourceName{"cpu", "gpu"}}, `pluginConfig[Consolidation].args.resources[1]: Invalid value: "gpu": unknown resource`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := tc.args
			SetDefaults_Args(&a)
			err := ValidateArgs(&a)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
	if err := ValidateArgs(&v1.Pod{}); err == nil || !strings.Contains(err.Error(), "pluginConfig[Consolidation].args: want *consolidation.Args, got *v1.Pod") {
		t.Fatalf("args of another type: err = %v", err)
	}
}

// TestArgsValidationEveryField: every bad field is reported, in one error.
func TestArgsValidationEveryField(t *testing.T) {
	a := Args{Resources: []v1.ResourceName{"cpu", "cpu"}, MaxNodesPerCycle: -1, MaxDrainCostPercent: -2}
	SetDefaults_Args(&a)
	err := ValidateArgs(&a)
	want := `[pluginConfig[Consolidation].args.resources[1]: Duplicate value: "cpu", ` +
		`pluginConfig[Consolidation].args.maxNodesPerCycle: Invalid value: -1: must be positive, ` +
		`pluginConfig[Consolidation].args.maxDrainCostPercent: Invalid value: -2: must be 0 (no limit) or a positive percentage]`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
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
