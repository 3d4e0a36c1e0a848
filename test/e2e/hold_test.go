//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// holdGate keeps the replacements pending while the burst is scheduled.
const holdGate = "rebalancer.dev/e2e-hold"

// TestBurstTakesNoPromisedRoom: rebalancer-scheduler keeps the room a
// plan promises its replacements. `run --once` consolidates a fragmented
// cluster; its replacements are held back (a scheduling gate on their
// template) until a burst of unrelated pods as large as they are has been
// scheduled, the interleaving a busy cluster makes by chance. MostAllocated
// would put the burst on the plan's targets, the most allocated nodes with
// room; the held room lets it take on a target only what the plan leaves
// free there, and once let go every replacement lands on its planned
// target, none back on a source. Two layouts: one whose plan fills its
// targets, one whose plan leaves a target a CPU the burst may take.
func TestBurstTakesNoPromisedRoom(t *testing.T) {
	needScheduler(t)
	for _, tc := range []struct {
		name string
		// web places the 12 pods of web over the 6 nodes, by index; api
		// has one pod on each.
		web []int
	}{
		{"filled targets", []int{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}},
		{"a target left with room", []int{0, 1, 0, 3, 4, 5, 0, 1, 2, 3, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) { burstTakesNoPromisedRoom(t, tc.web) })
	}
}

func burstTakesNoPromisedRoom(t *testing.T, web []int) {
	e := newTestEnv(t)
	nodes := e.nodeNames("hold", 6)
	spare := e.nodeNames("hold-spare", 1)[0]
	e.addNodes("8", append(append([]string{}, nodes...), spare)...)
	webNodes := make([]string, len(web))
	for i, n := range web {
		webNodes[i] = nodes[n]
	}
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), webNodes)
	e.fragmentedReplicaSet("api", resources("1", "1Gi"), nodes)
	for _, rs := range []string{"web", "api"} {
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"schedulingGates":[{"name":%q}]}}}}`, holdGate)
		if _, err := client.AppsV1().ReplicaSets(e.ns).Patch(e.ctx, rs, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]bool{}
	used := map[string]int64{}  // node -> CPU requested by its pods before the run, in millicores
	asked := map[string]int64{} // pod UID -> CPU it requests, in millicores
	pods, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		before[string(p.UID)] = true
		used[p.Spec.NodeName] += cpuOf(&p)
		asked[string(p.UID)] = cpuOf(&p)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer"), "run", "--once", "-o", "json", "--kubeconfig", kubeconfig,
		"--policy", e.narrowedPolicy(), "--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"),
		"--history-configmap=", "--drain-timeout=3m")
	var stdout, stderr strings.Builder
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()

	// The executor evicts the plan's pods back to back; their replacements
	// wait at the gate. Wait until the evictions stop.
	var gated []v1.Pod
	settled, last := time.Time{}, -1
	e.poll("the replacements waiting at the gate", func() (bool, error) {
		pods, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		gated = gated[:0]
		for _, p := range pods.Items {
			if len(p.Spec.SchedulingGates) > 0 {
				gated = append(gated, p)
			}
		}
		if len(gated) != last {
			last, settled = len(gated), time.Now()
		}
		return len(gated) > 0 && time.Since(settled) > 3*time.Second, nil
	})
	t.Logf("%d replacements wait at the gate", len(gated))

	// The burst: as many pods, as large, of another workload, ungated.
	burst := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: e.ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(len(gated))),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "burst"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "burst"}}, Spec: e.podSpec(schedulerName, resources("1", "1Gi"))},
		},
	}
	if _, err := client.AppsV1().ReplicaSets(e.ns).Create(e.ctx, burst, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	burstNodes := e.boundPods("burst", len(gated))

	// Let the replacements go.
	for _, p := range gated {
		if _, err := client.CoreV1().Pods(e.ns).Patch(e.ctx, p.Name, types.StrategicMergePatchType, []byte(`{"spec":{"schedulingGates":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("run --once: %v\n%s", err, stderr.String())
	}
	var res cycleOutput
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout.String())
	}
	// What the plan leaves free on each target: its CPU less the pods that
	// stay on it and the replacements promised to it.
	free := map[string]int64{}
	for _, m := range res.Plan.Moves {
		if _, ok := free[m.Target]; ok {
			continue
		}
		node, err := client.CoreV1().Nodes().Get(e.ctx, m.Target, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		free[m.Target] = node.Status.Allocatable.Cpu().MilliValue() - used[m.Target]
	}
	for _, m := range res.Plan.Moves {
		free[m.Target] -= asked[m.UID]
		if _, ok := free[m.Source]; ok {
			free[m.Source] += asked[m.UID]
		}
	}
	took := map[string]int64{}
	for _, p := range burstNodes {
		if _, ok := free[p.Spec.NodeName]; ok {
			took[p.Spec.NodeName] += cpuOf(&p)
		}
	}
	for n, m := range took {
		if m > free[n] {
			t.Errorf("the burst took %dm on %s, a target the plan leaves %dm free", m, n, free[n])
		}
	}
	after := append(e.boundPods("web", len(web)), e.boundPods("api", 6)...)
	onTarget, backOnSource := landed(res.Plan.Moves, before, after)
	if onTarget != len(res.Plan.Moves) || backOnSource > 0 {
		t.Errorf("%d of %d replacements on their targets, %d back on a source", onTarget, len(res.Plan.Moves), backOnSource)
	}
	where := map[string]int{}
	for _, p := range burstNodes {
		where[p.Spec.NodeName]++
	}
	t.Logf("%d moves; the burst of %d went to %v (room left free on the targets, in millicores: %v); %d replacements on target", len(res.Plan.Moves), len(burstNodes), where, free, onTarget)
}

// cpuOf is the CPU pod requests as kube-scheduler counts it, in millicores.
func cpuOf(pod *v1.Pod) int64 {
	r := requests.Of(pod)
	return r.Cpu().MilliValue()
}
