package makeroom_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rebalancer-dev/rebalancer/pkg/makeroom"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
)

func TestArgsDefaults(t *testing.T) {
	a := &makeroom.Args{}
	makeroom.SetDefaults_Args(a)
	if a.UnschedulableFor.Duration != time.Minute || a.MaxMovesPerPod != 3 || a.MaxPodsPerCycle != 5 {
		t.Fatalf("defaults: %+v", a)
	}
	if err := makeroom.ValidateArgs(a); err != nil {
		t.Fatal(err)
	}
	b := &makeroom.Args{UnschedulableFor: metav1.Duration{Duration: time.Hour}, MaxMovesPerPod: 1, MaxPodsPerCycle: 2}
	makeroom.SetDefaults_Args(b)
	if b.UnschedulableFor.Duration != time.Hour || b.MaxMovesPerPod != 1 || b.MaxPodsPerCycle != 2 {
		t.Fatalf("defaults overrode set fields: %+v", b)
	}
}

func TestArgsValidation(t *testing.T) {
	cases := map[string]struct {
		args makeroom.Args
		want string
	}{
		"negative wait":      {makeroom.Args{UnschedulableFor: metav1.Duration{Duration: -time.Second}}, `pluginConfig[MakeRoom].args.unschedulableFor: Invalid value: "-1s": must not be negative`},
		"negative moves":     {makeroom.Args{MaxMovesPerPod: -1}, "pluginConfig[MakeRoom].args.maxMovesPerPod: Invalid value: -1: must be between 1 and 20"},
		"too many moves":     {makeroom.Args{MaxMovesPerPod: 21}, "pluginConfig[MakeRoom].args.maxMovesPerPod: Invalid value: 21: must be between 1 and 20"},
		"negative pod count": {makeroom.Args{MaxPodsPerCycle: -2}, "pluginConfig[MakeRoom].args.maxPodsPerCycle: Invalid value: -2: must be between 1 and 1000"},
		"too many pods":      {makeroom.Args{MaxPodsPerCycle: 1001}, "pluginConfig[MakeRoom].args.maxPodsPerCycle: Invalid value: 1001: must be between 1 and 1000"},
		"int32's most pods":  {makeroom.Args{MaxPodsPerCycle: 2147483647}, "pluginConfig[MakeRoom].args.maxPodsPerCycle: Invalid value: 2147483647: must be between 1 and 1000"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := tc.args
			makeroom.SetDefaults_Args(&a)
			err := makeroom.ValidateArgs(&a)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
	most := makeroom.Args{MaxMovesPerPod: 20, MaxPodsPerCycle: 1000}
	makeroom.SetDefaults_Args(&most)
	if err := makeroom.ValidateArgs(&most); err != nil {
		t.Errorf("the most moves and pods: %v", err)
	}
	if err := makeroom.ValidateArgs(&v1.Pod{}); err == nil {
		t.Fatal("accepted args of another type")
	}
	// Every bad field at once, in one error.
	both := makeroom.Args{UnschedulableFor: metav1.Duration{Duration: -time.Minute}, MaxPodsPerCycle: 1001}
	makeroom.SetDefaults_Args(&both)
	want := `[pluginConfig[MakeRoom].args.unschedulableFor: Invalid value: "-1m0s": must not be negative, ` +
		`pluginConfig[MakeRoom].args.maxPodsPerCycle: Invalid value: 1001: must be between 1 and 1000]`
	if err := makeroom.ValidateArgs(&both); err == nil || err.Error() != want {
		t.Errorf("two bad fields: err = %v, want %s", err, want)
	}
}

// TestPolicyFile: MakeRoom's args decode from a policy file as users write
// them, and a bad one is refused naming the field and the file.
func TestPolicyFile(t *testing.T) {
	write := func(args string) string {
		path := filepath.Join(t.TempDir(), "policy.yaml")
		body := `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: room
  pluginConfig:
  - name: MakeRoom
    args:
` + args + `  plugins:
    balance:
      enabled: [MakeRoom]
`
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	pol, err := policy.Load(write("      unschedulableFor: 10m\n      maxMovesPerPod: 2\n"), fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	var got *makeroom.Args
	for _, pc := range pol.Profiles[0].PluginConfigs {
		if a, ok := pc.Args.(*makeroom.Args); ok {
			got = a
		}
	}
	if got == nil || got.UnschedulableFor.Duration != 10*time.Minute || got.MaxMovesPerPod != 2 || got.MaxPodsPerCycle != 5 {
		t.Fatalf("decoded args %+v", got)
	}
	path := write("      maxMovesPerPod: 100\n")
	if _, err := policy.Load(path, fake.NewClientset(), policy.Registry()); err == nil || !strings.Contains(err.Error(), "maxMovesPerPod") {
		t.Fatalf("err = %v, want it to name maxMovesPerPod", err)
	}
	path = write("      maxPodsPerCycle: 2147483647\n")
	if _, err := policy.Load(path, fake.NewClientset(), policy.Registry()); err == nil || !strings.Contains(err.Error(), "pluginConfig[MakeRoom].args.maxPodsPerCycle: Invalid value: 2147483647: must be between 1 and 1000") {
		t.Fatalf("err = %v, want it to name maxPodsPerCycle and its maximum", err)
	}
	// Both bad fields in one error, each once under its path, with the
	// profile.
	path = write("      maxMovesPerPod: 100\n      maxPodsPerCycle: 2000\n")
	_, err = policy.Load(path, fake.NewClientset(), policy.Registry())
	for _, want := range []string{"in profile room: ",
		"pluginConfig[MakeRoom].args.maxMovesPerPod: Invalid value: 100: must be between 1 and 20, ",
		"pluginConfig[MakeRoom].args.maxPodsPerCycle: Invalid value: 2000: must be between 1 and 1000"} {
		if err == nil || strings.Count(err.Error(), want) != 1 {
			t.Errorf("err = %v, want %q in it once", err, want)
		}
	}
	path = write("      maxMovesPerPods: 2\n")
	if _, err := policy.Load(path, fake.NewClientset(), policy.Registry()); err == nil || !strings.Contains(err.Error(), "maxMovesPerPods") {
		t.Fatalf("err = %v, want it to name the unknown field maxMovesPerPods", err)
	}
}
