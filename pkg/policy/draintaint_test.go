package policy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/removepodsviolatingnodetaints"

	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

func taintArgs(t *testing.T, p *api.DeschedulerPolicy) *removepodsviolatingnodetaints.RemovePodsViolatingNodeTaintsArgs {
	t.Helper()
	for _, pc := range p.Profiles[0].PluginConfigs {
		if args, ok := pc.Args.(*removepodsviolatingnodetaints.RemovePodsViolatingNodeTaintsArgs); ok {
			return args
		}
	}
	t.Fatal("no RemovePodsViolatingNodeTaints args")
	return nil
}

// TestLoadExcludesTheDrainTaint: the policy Load returns never counts
// rebalancer's drain taint as a violation: added to excludedTaints (kept
// as written otherwise, once however often applied), dropped from
// includedTaints (the two cannot be combined); the result still validates.
func TestLoadExcludesTheDrainTaint(t *testing.T) {
	for _, tc := range []struct {
		name, args         string
		excluded, included []string
	}{
		{"no args", "", []string{wellknown.DrainTaintKey}, nil},
		{"excludedTaints", "\n    args:\n      excludedTaints: [example.com/a, example.com/b=c]",
			[]string{"example.com/a", "example.com/b=c", wellknown.DrainTaintKey}, nil},
		{"excludedTaints with the drain key", "\n    args:\n      excludedTaints: [" + wellknown.DrainTaintKey + "]",
			[]string{wellknown.DrainTaintKey}, nil},
		{"includedTaints", "\n    args:\n      includedTaints: [example.com/a, " + wellknown.DrainTaintKey + ", " + wellknown.DrainTaintKey + "=p1]",
			nil, []string{"example.com/a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "policy.yaml")
			doc := "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: RemovePodsViolatingNodeTaints" + tc.args +
				"\n  plugins:\n    deschedule:\n      enabled: [RemovePodsViolatingNodeTaints]\n"
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := policy.Load(path, client(), pluginregistry.PluginRegistry)
			if err != nil {
				t.Fatal(err)
			}
			policy.ExcludeDrainTaint(p) // again: no change
			args := taintArgs(t, p)
			if !slices.Equal(args.ExcludedTaints, tc.excluded) || !slices.Equal(args.IncludedTaints, tc.included) {
				t.Errorf("excludedTaints %q, includedTaints %q; want %q, %q", args.ExcludedTaints, args.IncludedTaints, tc.excluded, tc.included)
			}
			if err := removepodsviolatingnodetaints.ValidateRemovePodsViolatingNodeTaintsArgs(args); err != nil {
				t.Errorf("the args no longer validate: %v", err)
			}
		})
	}
	policy.ExcludeDrainTaint(nil)
}
