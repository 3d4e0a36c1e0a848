package conflict_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/pkg/conflict"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

func shipped(name string) string { return filepath.Join("..", "..", "policies", name) }

// check loads a policy and a scheduler config and checks them, with the
// score weights the profile's framework really resolves.
func check(t *testing.T, policyFile, schedulerFile string) conflict.Result {
	t.Helper()
	pol, err := policy.Load(policyFile, fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	_, prof, err := profile.Load(schedulerFile, "")
	if err != nil {
		t.Fatal(err)
	}
	return conflict.Check(pol, prof, weights(t, prof))
}

func weights(t *testing.T, prof *config.KubeSchedulerProfile) map[string]int32 {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sim, err := simulator.New(ctx, []*config.KubeSchedulerProfile{prof}, &snapshot.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	return sim.Schedulers()[0].ScoreWeights
}

func TestShippedPairsAgree(t *testing.T) {
	for _, pair := range []string{"binpacking", "balancing", "load-aware"} {
		r := check(t, shipped(pair+"-policy.yaml"), shipped(pair+"-scheduler.yaml"))
		if len(r.Conflicts)+len(r.Warnings) > 0 {
			t.Errorf("%s: %+v", pair, r)
		}
	}
}

func TestCrossedPairsConflict(t *testing.T) {
	r := check(t, shipped("balancing-policy.yaml"), shipped("binpacking-scheduler.yaml"))
	if len(r.Conflicts) != 1 || !strings.Contains(r.Conflicts[0], "LowNodeUtilization spreads") || !strings.Contains(r.Conflicts[0], "MostAllocated") {
		t.Errorf("LowNodeUtilization with MostAllocated: %+v", r.Conflicts)
	}
	r = check(t, shipped("binpacking-policy.yaml"), shipped("balancing-scheduler.yaml"))
	if len(r.Conflicts) != 2 { // Consolidation and HighNodeUtilization
		t.Errorf("packing plugins with a spreading shape: %+v", r.Conflicts)
	}
}

// TestUsageNeedsLoadAwareScoring: balancing real usage with a profile that
// scores by requests alone is a conflict; the same profile with LoadAware
// is not.
func TestUsageNeedsLoadAwareScoring(t *testing.T) {
	r := check(t, shipped("load-aware-policy.yaml"), shipped("balancing-scheduler.yaml"))
	if len(r.Conflicts) != 1 || !strings.Contains(r.Conflicts[0], "LowNodeUtilization balances the nodes' real usage") ||
		!strings.Contains(r.Conflicts[0], "no LoadAware Score plugin") {
		t.Errorf("usage policy with a requests-only profile: %+v", r.Conflicts)
	}
	// The requests-based balancing policy does not need usage scoring.
	if r := check(t, shipped("balancing-policy.yaml"), shipped("load-aware-scheduler.yaml")); len(r.Conflicts) != 0 {
		t.Errorf("balancing policy with the load-aware profile: %+v", r.Conflicts)
	}
	// Packing against a usage-balancing policy still conflicts.
	if r := check(t, shipped("load-aware-policy.yaml"), shipped("binpacking-scheduler.yaml")); len(r.Conflicts) != 2 {
		t.Errorf("usage policy with the bin-packing profile: %+v", r.Conflicts)
	}
}

func writeConfig(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "sched.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNaiveMostAllocatedWarns: switching only the scoring strategy leaves
// kube-scheduler's spreading in charge; the check says what to change.
func TestNaiveMostAllocatedWarns(t *testing.T) {
	naive := writeConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: naive
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
`)
	r := check(t, shipped("binpacking-policy.yaml"), naive)
	if len(r.Conflicts) != 0 || len(r.Warnings) != 1 {
		t.Fatalf("want one warning and no conflict: %+v", r)
	}
	for _, want := range []string{"weight 1", "PodTopologySpread", "NodeResourcesBalancedAllocation", "defaultConstraints: []"} {
		if !strings.Contains(r.Warnings[0], want) {
			t.Errorf("warning lacks %q: %s", want, r.Warnings[0])
		}
	}
}

// TestPackingShapeIsPacking: a RequestedToCapacityRatio shape that rises
// with utilization packs, and agrees with the packing policy.
func TestPackingShapeIsPacking(t *testing.T) {
	packing := writeConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: shape
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourcesFit
        weight: 10
      disabled:
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: cpu, weight: 1}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
`)
	if r := check(t, shipped("binpacking-policy.yaml"), packing); len(r.Conflicts) != 0 {
		t.Errorf("rising shape with packing policy: %+v", r.Conflicts)
	}
	if r := check(t, shipped("balancing-policy.yaml"), packing); len(r.Conflicts) != 1 {
		t.Errorf("rising shape with LowNodeUtilization: %+v", r.Conflicts)
	}
}
