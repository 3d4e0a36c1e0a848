//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rebalancer-dev/rebalancer/pkg/makeroom"
	"github.com/rebalancer-dev/rebalancer/pkg/optout"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestMakeRoomFindsTheRoomThatExists is roomLayout's cluster (pkg/planner), live: four
// 8-CPU nodes, one at 5 CPUs (two 2-CPU pods and a 1-CPU pod that opts
// out), three at 7 (two 2-CPU pods and three 1-CPU pods each), and a
// 4-CPU pod pending. Moving the two 2-CPU pods off a 7-CPU node, the
// fewest that free enough, cannot hold (the second has nowhere to go);
// moving a 2-CPU pod onto the 5-CPU node and a 1-CPU pod elsewhere does.
// `rebalancer plan` plans those two moves off one node; `run --once`
// carries them out, rebalancer-scheduler places the replacements as
// planned, and the pending pod then runs on the node made room on.
func TestMakeRoomFindsTheRoomThatExists(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("roomy", 4)
	e.addNodes("8", nodes...)
	var big, small []string
	for i, n := range nodes {
		big = append(big, n, n)
		if i > 0 {
			small = append(small, n, n, n)
		}
	}
	e.fragmentedReplicaSet("big", resources("2", "1Gi"), big)
	e.fragmentedReplicaSet("small", resources("1", "1Gi"), small)
	e.fragmentedReplicaSetWith(schedulerName, "pinned", resources("1", "1Gi"), map[string]string{optout.SafeToEvict: "false"}, nodes[:1])
	before := map[string]bool{}
	for _, app := range []string{"big", "small"} {
		for _, p := range e.boundPods(app, map[string]int{"big": len(big), "small": len(small)}[app]) {
			before[string(p.UID)] = true
		}
	}
	e.boundPods("pinned", 1)
	e.addDeployment("batch", 1, resources("4", "1Gi"))
	var waiting v1.Pod
	e.poll("the batch pod found unschedulable", func() (bool, error) {
		list, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: labels.Set{"app": "batch"}.String()})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		waiting = list.Items[0]
		for _, c := range waiting.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(1100 * time.Millisecond) // unschedulableFor below

	policy := filepath.Join(t.TempDir(), "policy.yaml")
	err := os.WriteFile(policy, []byte(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
nodeSelector: `+testLabel+"="+e.name+`
profiles:
- name: room
  pluginConfig:
  - name: DefaultEvictor
  - name: MakeRoom
    args:
      unschedulableFor: 1s
      maxMovesPerPod: 3
  plugins:
    balance:
      enabled: [MakeRoom]
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	room := e.ns + "/" + waiting.Name
	checkRoom := func(what string, p plan.Plan) {
		t.Helper()
		var moves []plan.Move
		for _, m := range p.Moves {
			if m.Room == room {
				moves = append(moves, m)
			}
		}
		if len(moves) != 2 {
			t.Fatalf("%s: want two moves making room for %s, got %+v (skips %+v)", what, room, p.Moves, p.Skipped)
		}
		source := moves[0].Source
		if source == nodes[0] {
			t.Errorf("%s: room made on %s, which holds nothing movable but its 2-CPU pods", what, source)
		}
		for _, m := range moves {
			if m.Strategy != makeroom.Name || m.Source != source || m.Target == source || !m.Steered {
				t.Errorf("%s: move %s: strategy %s, %s -> %s, steered %v; want MakeRoom's, off %s, steered", what, m.Pod, m.Strategy, m.Source, m.Target, m.Steered, source)
			}
		}
		if moves[0].Owner.Name != "big" || moves[0].Target != nodes[0] || moves[1].Owner.Name != "small" {
			t.Errorf("%s: want a 2-CPU pod moved onto %s, then a 1-CPU pod; got %s -> %s, %s -> %s", what, nodes[0],
				moves[0].Pod, moves[0].Target, moves[1].Pod, moves[1].Target)
		}
	}

	var planned plan.Plan
	rebalancerJSON(t, kubeconfig, &planned, "plan", "--policy", policy, "--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"))
	checkRoom("rebalancer plan", planned)

	out := runOnce(t, "--policy", policy)
	checkRoom("rebalancer run --once", out.Plan)
	if len(e.evicted(out)) != 2 {
		t.Fatalf("evicted %v, want the two pods planned: %+v", e.evicted(out), out.Result)
	}
	var moves []plan.Move
	for _, m := range out.Plan.Moves {
		if m.Room == room {
			moves = append(moves, m)
		}
	}
	batch := e.boundPods("batch", 1)
	if got := batch[0].Spec.NodeName; got != moves[0].Source {
		t.Errorf("the pending pod runs on %s, want %s, the node the plan made room on", got, moves[0].Source)
	}
	after := append(e.boundPods("big", len(big)), e.boundPods("small", len(small))...)
	onTarget, back := landed(moves, before, after)
	_, byNode := perNode(append(after, batch...))
	t.Logf("moved %s %s -> %s and %s %s -> %s; pods now %s", moves[0].Pod, moves[0].Source, moves[0].Target, moves[1].Pod, moves[1].Source, moves[1].Target, byNode)
	if onTarget != 2 || back != 0 {
		t.Errorf("replacements on their target: %d of 2, back on their source: %d", onTarget, back)
	}
}
