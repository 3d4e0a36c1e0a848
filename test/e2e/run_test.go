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

	"github.com/rebalancer-dev/rebalancer/pkg/executor"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// fragmentedReplicaSet makes a ReplicaSet whose pods are bound to the given
// nodes, as drift leaves them: the pods are created bound and ownerless, and
// the ReplicaSet, created next with as many replicas, adopts them (a
// controller adopts matching orphans before it creates pods). Its template
// asks for rebalancer-scheduler, which places the replacements.
func (e *testEnv) fragmentedReplicaSet(name string, requests v1.ResourceList, nodes []string) {
	e.t.Helper()
	e.fragmentedReplicaSetOf(schedulerName, name, requests, nodes)
}

// fragmentedReplicaSetOf is fragmentedReplicaSet with the pods of scheduler.
func (e *testEnv) fragmentedReplicaSetOf(scheduler, name string, requests v1.ResourceList, nodes []string) {
	e.t.Helper()
	e.fragmentedReplicaSetWith(scheduler, name, requests, nil, nodes)
}

// fragmentedReplicaSetWith is fragmentedReplicaSetOf with annotations on
// the pods and the template.
//
// The ReplicaSet is created after its pods. kube-controller-manager may sync
// it before its own watch has seen them all, create a pod more and then
// delete a surplus one, which changes the cluster the test meant to build.
// Until the ReplicaSet has counted exactly the pods made here, its template
// carries a scheduling gate: a surplus pod stays unassigned, and the
// controller deletes unassigned pods first.
func (e *testEnv) fragmentedReplicaSetWith(scheduler, name string, requests v1.ResourceList, annotations map[string]string, nodes []string) {
	e.t.Helper()
	sel := map[string]string{"app": name}
	want := map[string]string{} // pod name -> node
	for i, n := range nodes {
		spec := e.podSpec(scheduler, requests)
		spec.NodeName = n
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: e.ns, Labels: sel, Annotations: annotations}, Spec: spec}
		if _, err := client.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		want[pod.Name] = n
	}
	template := e.podSpec(scheduler, requests)
	template.SchedulingGates = []v1.PodSchedulingGate{{Name: fixtureGate}}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(len(nodes))),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: annotations}, Spec: template},
		},
	}
	if _, err := client.AppsV1().ReplicaSets(e.ns).Create(e.ctx, rs, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.poll("ReplicaSet "+name+" adopting exactly its pods", func() (bool, error) {
		got, err := client.AppsV1().ReplicaSets(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil || got.Status.ObservedGeneration < got.Generation || got.Status.Replicas != int32(len(nodes)) {
			return false, err
		}
		pods, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(pods.Items) != len(nodes) {
			return false, err
		}
		for _, p := range pods.Items {
			if want[p.Name] != p.Spec.NodeName || p.DeletionTimestamp != nil || metav1.GetControllerOf(&p) == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if _, err := client.AppsV1().ReplicaSets(e.ns).Patch(e.ctx, name, types.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"schedulingGates":null}}}}`), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// fixtureGate holds back the pods a fixture's ReplicaSet creates while it
// adopts the fixture's own.
const fixtureGate = "rebalancer.dev/e2e-fixture"

// landed counts the replacements (pods of after not in before) on their
// move's planned target, and those back on a node their workload's pods
// were evicted from; a workload's pods carry its name in label app.
func landed(moves []plan.Move, before map[string]bool, after []v1.Pod) (onTarget, backOnSource int) {
	planned := map[string]int{} // owner/target -> planned replacements
	sources := map[string]bool{}
	for _, m := range moves {
		planned[m.Owner.Name+"/"+m.Target]++
		sources[m.Owner.Name+"/"+m.Source] = true
	}
	for _, p := range after {
		if before[string(p.UID)] {
			continue
		}
		key := p.Labels["app"] + "/" + p.Spec.NodeName
		if planned[key] > 0 {
			planned[key]--
			onTarget++
		}
		if sources[key] {
			backOnSource++
		}
	}
	return onTarget, backOnSource
}

// evicted names the pods of the test's namespace a cycle evicted.
func (e *testEnv) evicted(res cycleOutput) map[string]bool {
	out := map[string]bool{}
	for _, m := range res.Result.Evicted {
		if m.Namespace == e.ns {
			out[m.Name] = true
		}
	}
	return out
}

func runOnce(t *testing.T, args ...string) cycleOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer"), append([]string{"run", "--once", "-o", "json",
		"--kubeconfig", kubeconfig,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rebalancer run --once: %v\n%s", err, stderr.String())
	}
	var res cycleOutput
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return res
}

type cycleOutput struct {
	Plan   plan.Plan       `json:"plan"`
	Result executor.Result `json:"result"`
}

// TestRunOnceConsolidates: a thinly spread cluster (six nodes at 3 of 8
// CPUs, lower bound 3) under the bin-packing pair. One `run --once` evicts
// through the Eviction API, the ReplicaSets recreate the pods, and
// rebalancer-scheduler puts the replacements on the planned targets, never
// back on their source; nodes in use drop, and a second run plans no move.
func TestRunOnceConsolidates(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("run", 6)
	e.addNodes("8", nodes...)
	twice := append(append([]string{}, nodes...), nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), twice) // 2 per node
	e.fragmentedReplicaSet("api", resources("1", "1Gi"), nodes) // 1 per node
	before := append(e.boundPods("web", 12), e.boundPods("api", 6)...)
	beforeUIDs := uidsOf(before)

	started := time.Now()
	res := runOnce(t)
	var mine []plan.Move
	for _, m := range res.Plan.Moves {
		if m.Namespace == e.ns {
			mine = append(mine, m)
		}
	}
	evicted := 0
	for _, m := range res.Result.Evicted {
		if m.Namespace == e.ns {
			evicted++
		}
	}
	if len(mine) == 0 || evicted != len(mine) {
		t.Fatalf("planned %d moves here, evicted %d; result %+v", len(mine), evicted, res.Result)
	}

	// The replacements: wait for both workloads to be whole again.
	after := append(e.boundPods("web", 12), e.boundPods("api", 6)...)
	onTarget, backOnSource := landed(mine, beforeUIDs, after)
	t.Logf("%d moves evicted; %d replacements on their planned target; %d back on a source node", evicted, onTarget, backOnSource)
	if onTarget*100 < 95*evicted {
		t.Errorf("only %d of %d replacements landed on their planned target", onTarget, evicted)
	}
	if backOnSource > 0 {
		t.Errorf("%d replacements landed back on the node they were evicted from", backOnSource)
	}
	inUse := func(pods []v1.Pod) int { c, _ := perNode(pods); return len(c) }
	_, summary := perNode(after)
	t.Logf("nodes in use %d -> %d: %s", inUse(before), inUse(after), summary)
	if inUse(after) >= inUse(before) {
		t.Errorf("nodes in use did not drop: %d -> %d", inUse(before), inUse(after))
	}
	for _, n := range nodes {
		node, err := client.CoreV1().Nodes().Get(e.ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == wellknown.DrainTaintKey {
				t.Errorf("node %s keeps the drain taint after the run", n)
			}
		}
	}
	// Every eviction went through the Eviction API, none by delete.
	_, writes := auditedRequests(t, "rebalancer/", started)
	for _, w := range writes {
		if strings.HasPrefix(w, "delete ") {
			t.Errorf("rebalancer deleted instead of evicting: %s", w)
		}
	}

	// Converged: a second cycle finds nothing more worth moving here.
	again := runOnce(t)
	for _, m := range again.Plan.Moves {
		if m.Namespace == e.ns {
			t.Errorf("second run plans %s %s -> %s (%s)", m.Pod, m.Source, m.Target, m.Strategy)
		}
	}
}

// TestRunTaintAndPDB: a node gains a NoSchedule taint. `run --once --dry-run`
// shows the plan and writes nothing; `run --once` moves the workload pods
// off the node, but not those whose PodDisruptionBudget allows no
// disruption: they stay, with a RebalanceSkipped event saying why.
func TestRunTaintAndPDB(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	e.addNodes("8", "taint-0", "taint-1", "taint-2")
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), []string{"taint-0", "taint-0"})
	e.fragmentedReplicaSet("db", resources("1", "1Gi"), []string{"taint-0", "taint-0"})
	e.addPDB("db", 2)
	dbBefore := e.boundPods("db", 2)
	e.taintForMaintenance("taint-0")

	// Dry run: the plan, and no write but its events.
	started := time.Now()
	dry := runOnce(t, "--dry-run")
	reads, writes := auditedRequests(t, "rebalancer/", started)
	events := 0
	for _, w := range writes {
		if strings.HasPrefix(w, "create /apis/events.k8s.io/v1/namespaces/") {
			events++
		} else {
			t.Errorf("run --dry-run wrote %s", w)
		}
	}
	if reads == 0 || events != len(dry.Plan.Moves) {
		t.Fatalf("run --dry-run: %d reads, %d events for %d planned moves; want reads and an event a move", reads, events, len(dry.Plan.Moves))
	}

	res := runOnce(t)
	evicted := map[string]bool{}
	for _, m := range res.Result.Evicted {
		if m.Namespace == e.ns {
			evicted[m.Owner.Name] = true
		}
	}
	if !evicted["web"] || evicted["db"] {
		t.Fatalf("evicted workloads %v, want web and not db", evicted)
	}
	pdbSkips := 0
	for _, s := range res.Plan.Skipped {
		if strings.HasPrefix(s.Pod, e.ns+"/db-") && s.Reason == plan.ReasonPDB {
			pdbSkips++
		}
	}
	if pdbSkips == 0 {
		t.Errorf("no pdb skip for db in the plan: %+v", res.Plan.Skipped)
	}
	for _, p := range e.boundPods("web", 2) {
		if p.Spec.NodeName == "taint-0" {
			t.Errorf("web pod %s is still on the tainted node", p.Name)
		}
	}
	dbAfter := e.boundPods("db", 2)
	for i := range dbAfter {
		if dbAfter[i].UID != dbBefore[i].UID && dbAfter[i].UID != dbBefore[1-i].UID {
			t.Errorf("db pod %s was replaced despite its PDB", dbAfter[i].Name)
		}
	}
	evs, err := client.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	skipped, rebalanced := 0, 0
	for _, ev := range evs.Items {
		switch {
		case ev.Reason == executor.EventRebalanceSkipped && strings.HasPrefix(ev.Regarding.Name, "db-") && strings.Contains(ev.Note, "pdb"):
			skipped++
		case ev.Reason == executor.EventRebalanced && strings.HasPrefix(ev.Regarding.Name, "web-"):
			rebalanced++
		}
	}
	if skipped == 0 || rebalanced != 2 {
		t.Errorf("events: %d RebalanceSkipped on db (want > 0), %d Rebalanced on web (want 2)", skipped, rebalanced)
	}
}
