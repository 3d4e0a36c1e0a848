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
)

// TestMakeRoomForAPendingPod: three 8-CPU nodes each hold three 2-CPU pods,
// so a 4-CPU pod fits nowhere though 6 CPUs are free in total. One `run
// --once` with MakeRoom moves one pod off one node onto another's room;
// rebalancer-scheduler places that pod's replacement as planned, and the
// pending pod then runs on the node made room on. Nothing ends pending.
func TestMakeRoomForAPendingPod(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("room", 3)
	e.addNodes("8", nodes...)
	var placed []string
	for _, n := range nodes {
		placed = append(placed, n, n, n)
	}
	e.fragmentedReplicaSet("web", resources("2", "1Gi"), placed)
	before := map[string]bool{}
	for _, p := range e.boundPods("web", len(placed)) {
		before[string(p.UID)] = true
	}
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
      maxMovesPerPod: 2
  plugins:
    balance:
      enabled: [MakeRoom]
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	out := runOnce(t, "--policy", policy)
	room := e.ns + "/" + waiting.Name
	if len(out.Plan.Moves) != 1 || out.Plan.Moves[0].Room != room || out.Plan.Moves[0].Strategy != makeroom.Name {
		t.Fatalf("want one move making room for %s, got %+v (skips %+v)", room, out.Plan.Moves, out.Plan.Skipped)
	}
	if len(out.Result.Evicted) != 1 {
		t.Fatalf("evicted %d pods, want 1: %+v", len(out.Result.Evicted), out.Result)
	}
	m := out.Plan.Moves[0]

	batch := e.boundPods("batch", 1)
	if got := batch[0].Spec.NodeName; got != m.Source {
		t.Errorf("the pending pod runs on %s, want %s, the node the plan made room on", got, m.Source)
	}
	web := e.boundPods("web", len(placed))
	for _, p := range web {
		if p.Name == m.Name {
			t.Errorf("%s was not evicted", p.Name)
		}
	}
	_, byNode := perNode(web)
	t.Logf("moved %s %s -> %s; web pods now %s; batch on %s", m.Pod, m.Source, m.Target, byNode, batch[0].Spec.NodeName)
	onTarget, back := landed(out.Plan.Moves, before, web)
	if onTarget != 1 || back != 0 {
		t.Errorf("replacement on its target: %d of 1, back on its source: %d", onTarget, back)
	}
}
