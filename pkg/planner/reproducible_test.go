package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// everyWalker enables, with no limits, the plugins that ask for evictions
// in Go map order (RemoveDuplicates, topology spread) beside the ones that
// walk sorted nodes, so that any order left to chance shows in the plan.
const everyWalker = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: all
  pluginConfig:
  - name: DefaultEvictor
  - name: HighNodeUtilization
    args:
      thresholds: {cpu: 40, memory: 40}
  - name: RemovePodsViolatingTopologySpreadConstraint
  - name: RemovePodsViolatingInterPodAntiAffinity
  - name: RemovePodsViolatingNodeTaints
  - name: RemoveDuplicates
  plugins:
    balance:
      enabled: [HighNodeUtilization, RemovePodsViolatingTopologySpreadConstraint, RemoveDuplicates]
    deschedule:
      enabled: [RemovePodsViolatingInterPodAntiAffinity, RemovePodsViolatingNodeTaints]
`

// TestPlansAreReproducible: the same snapshot, policy and profile give the
// same plan, byte for byte, however often it is computed.
func TestPlansAreReproducible(t *testing.T) {
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 60, Pods: 1500, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	walkers := filepath.Join(t.TempDir(), "walkers.yaml")
	if err := os.WriteFile(walkers, []byte(everyWalker), 0o600); err != nil {
		t.Fatal(err)
	}
	allWalkers, err := policy.Load(walkers, fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	runs := 20
	if testing.Short() {
		runs = 5
	}
	binpacking, packing := loadPair(t, "binpacking")
	balancing, spreading := loadPair(t, "balancing")
	for _, c := range []struct {
		name string
		pol  *api.DeschedulerPolicy
		prof *config.KubeSchedulerProfile
	}{
		{"binpacking", binpacking, packing},
		{"balancing", balancing, spreading},
		{"walkers", allWalkers, packing},
	} {
		t.Run(c.name, func(t *testing.T) {
			pol, prof := c.pol, c.prof
			var first []byte
			for i := range runs {
				p, err := planOn(context.Background(), pol, prof, snap, Options{ID: "same", MinScoreGain: 1, AllowConflicting: true})
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 && len(p.Moves) == 0 {
					t.Fatal("no moves: the test shows nothing")
				}
				got, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = got
					continue
				}
				if !bytes.Equal(got, first) {
					n := 0
					for n < len(got) && n < len(first) && got[n] == first[n] {
						n++
					}
					lo := max(0, n-200)
					t.Fatalf("run %d differs from run 0 at byte %d:\nrun 0: …%s\nrun %d: …%s", i, n, first[lo:min(len(first), n+200)], i, got[lo:min(len(got), n+200)])
				}
			}
		})
	}
}
