package badinput

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// tiedSnapshot is a cluster of exact ties: identical nodes holding
// identical pods with identical usage, a PDB-limited workload, a DaemonSet,
// kube-system pods and a tainted node. Which tied node a plugin walks first
// decides the plan, and Go's maps give the order anew in every process.
const tiedSnapshot = "test/badinput/testdata/tied-snapshot.json"

// TestPlansAreTheSameInEveryProcess runs `rebalancer plan` many times, each
// a process of its own, on the tied cluster with each shipped pair and with
// a MostAllocated profile that does not follow hints: every plan must be
// the same but for its ID.
func TestPlansAreTheSameInEveryProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	unsteered := filepath.Join(dir, "most-allocated.yaml")
	if err := os.WriteFile(unsteered, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: rebalancer-scheduler
  plugins:
    multiPoint:
      enabled:
      - {name: NodeResourcesFit, weight: 5}
      disabled:
      - {name: NodeResourcesBalancedAllocation}
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
  - name: PodTopologySpread
    args: {defaultingType: List, defaultConstraints: []}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	const runs = 8
	for _, pair := range []struct{ name, policy, scheduler string }{
		{"binpacking", goodPolicy, goodScheduler},
		{"balancing", "policies/balancing-policy.yaml", "policies/balancing-scheduler.yaml"},
		{"load-aware", "policies/load-aware-policy.yaml", "policies/load-aware-scheduler.yaml"},
		{"binpacking, unsteered", goodPolicy, unsteered},
	} {
		t.Run(pair.name, func(t *testing.T) {
			t.Parallel()
			args := planArgs(map[string]string{"--policy": pair.policy, "--scheduler-config": pair.scheduler, "--snapshot": tiedSnapshot}, "-o", "json")
			plans := make([]string, runs)
			var wg sync.WaitGroup
			for i := range runs {
				wg.Go(func() {
					res := rebalancer(t, args)
					if res.exit != 0 {
						t.Errorf("run %d: exit status %d\n%s", i, res.exit, res.stderr)
						return
					}
					plans[i] = withoutID(t, res.stdout)
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if !strings.Contains(plans[0], `"source"`) {
				t.Fatalf("the plan moves nothing, so it shows nothing:\n%s", plans[0])
			}
			for i, p := range plans[1:] {
				if p != plans[0] {
					t.Errorf("run %d differs from run 0:\nrun 0: %s\nrun %d: %s", i+1, plans[0], i+1, p)
				}
			}
		})
	}
}

// withoutID is the JSON plan without its ID, which names the time.
func withoutID(t *testing.T, out string) string {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("not a JSON plan: %v\n%s", err, out)
	}
	delete(p, "id")
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
