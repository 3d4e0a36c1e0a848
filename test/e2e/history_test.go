//go:build e2e

package e2e

import (
	"context"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// historyFlag names a move history of the test's own, so tests do not
// share one.
func (e *testEnv) historyFlag() (flag, name string) {
	name = "history-" + e.name
	return "--history-configmap=rebalancer-system/" + name, name
}

// cooldownSkips lists the pods of the namespace a plan skips as cooldown.
func cooldownSkips(p plan.Plan, ns string) []string {
	var out []string
	for _, s := range p.Skipped {
		if s.Reason == plan.ReasonCooldown && strings.HasPrefix(s.Pod, ns+"/") {
			out = append(out, s.Pod)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestHistoryAcrossRuns: `run --once` processes one after another, as a
// CronJob runs them, share the move history kept in the cluster. After the
// first run consolidates, the nodes its replacements went to are tainted
// for maintenance, which would move them again: they stay (cooldown), a
// live `plan` shows the same cooldown skips the run makes, no pod is moved
// twice, and the third run plans nothing. A plan without the history would
// move them: the history is what holds them.
func TestHistoryAcrossRuns(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	flag, name := e.historyFlag()
	nodes := []string{"hist-0-" + e.name, "hist-1-" + e.name, "hist-2-" + e.name, "hist-3-" + e.name, "hist-4-" + e.name, "hist-5-" + e.name}
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), append(append([]string{}, nodes...), nodes...))
	e.fragmentedReplicaSet("api", resources("1", "1Gi"), nodes)

	first := runOnce(t, flag)
	moved := map[string]bool{} // evicted pod names
	targets := map[string]bool{}
	for _, m := range first.Result.Evicted {
		if m.Namespace == e.ns {
			moved[m.Name] = true
			targets[m.Target] = true
		}
	}
	if len(moved) == 0 {
		t.Fatalf("the first run moved nothing here: %+v", first.Result)
	}
	stored := readHistory(t, e, name)
	if len(stored) < len(moved) {
		t.Fatalf("the history holds %d moves, the run evicted %d here", len(stored), len(moved))
	}
	// The replacements settle before their nodes are tainted.
	e.boundPods("web", 12)
	e.boundPods("api", 6)
	for n := range targets {
		e.taintForMaintenance(n)
	}

	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	withHistory, _ := planJSON(t, ctx, "--kubeconfig", kubeconfig, flag)
	held := cooldownSkips(withHistory, e.ns)
	if len(held) == 0 {
		t.Fatalf("plan with the history: no cooldown skips here; moves %d, skips %v", len(withHistory.Moves), withHistory.Summary.SkippedByReason)
	}
	blind, _ := planJSON(t, ctx, "--kubeconfig", kubeconfig, "--history-configmap=")
	blindMoves := 0
	for _, m := range blind.Moves {
		if m.Namespace == e.ns && slices.Contains(held, m.Pod) {
			blindMoves++
		}
	}
	if blindMoves == 0 {
		t.Errorf("without the history the plan moves none of the held pods %v either: the test shows nothing", held)
	}

	second := runOnce(t, flag)
	if got := cooldownSkips(second.Plan, e.ns); !slices.Equal(got, held) {
		t.Errorf("run's cooldown skips %v, plan's %v: want the same", got, held)
	}
	for _, m := range second.Result.Evicted {
		if m.Namespace == e.ns && (moved[m.Name] || slices.Contains(held, m.Pod)) {
			t.Errorf("the second run moved %s again within the cooldown", m.Pod)
		}
	}
	if len(second.Result.Evicted) > 0 {
		// What moved now (pods of no cooldown) settles before the third run.
		e.boundPods("web", 12)
		e.boundPods("api", 6)
	}
	third := runOnce(t, flag)
	for _, m := range third.Plan.Moves {
		if m.Namespace == e.ns {
			t.Errorf("the third run plans %s %s -> %s (%s)", m.Pod, m.Source, m.Target, m.Strategy)
		}
	}
	t.Logf("run 1 moved %d pods here; %d pods held by the cooldown (plan and run 2 agree); a blind plan would move %d of them; run 2 evicted %d; run 3 planned none here",
		len(moved), len(held), blindMoves, len(second.Result.Evicted))
}

// readHistory decodes the stored history, failing if it is not valid.
func readHistory(t *testing.T, e *testEnv, name string) []history.Eviction {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("rebalancer-system").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moves, dropped, err := history.Decode([]byte(cm.Data[history.DataKey]))
	if len(dropped) > 0 {
		t.Errorf("the stored history holds moves that are not valid: %v", dropped)
	}
	if err != nil {
		t.Fatalf("stored history: %v\n%s", err, cm.Data[history.DataKey])
	}
	return moves
}

// TestHistoryCorruptOrDeleted: a history edited into garbage or deleted by
// hand is reported, replaced by a fresh one, and the run goes on within the
// policy's limits; one that cannot be read stops the run before it plans.
func TestHistoryCorruptOrDeleted(t *testing.T) {
	e := newTestEnv(t)
	e.addNodes("8", "corrupt-0-"+e.name, "corrupt-1-"+e.name)
	flag, name := e.historyFlag()
	cms := client.CoreV1().ConfigMaps("rebalancer-system")
	garbage := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{history.DataKey: `{"version":1,"moves":[{"owner":`}}
	if _, err := cms.Create(e.ctx, garbage, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cms.Delete(context.Background(), name, metav1.DeleteOptions{}) })

	_, stderr, err := runOnceVia(t, kubeconfig, flag)
	if err != nil {
		t.Fatalf("run with a corrupt history: %v, want a fresh history\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "The move history is not valid") || !strings.Contains(stderr, "rebalancer-system/"+name) {
		t.Errorf("no clear message naming the corrupt history:\n%s", stderr)
	}
	readHistory(t, e, name) // valid again

	if err := cms.Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runOnceVia(t, kubeconfig, flag); err != nil {
		t.Fatalf("run with the history deleted: %v\n%s", err, stderr)
	}
	if _, err := cms.Get(e.ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the deleted history was not created again: %v", err)
	}

	// A history that cannot be read: a ServiceAccount with no rights at all.
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "no-rights"}}
	if _, err := client.CoreV1().ServiceAccounts(e.ns).Create(e.ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer"), "run", "--once", "--kubeconfig", serviceAccountKubeconfig(t, e.token(e.ns, sa.Name)),
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"), flag)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to plan without the move history") {
		t.Errorf("run that cannot read its history: err %v, want a refusal naming the history\n%s", err, out)
	}
	if _, err := cms.Get(e.ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Error("the history disappeared")
	}
}

// TestHistoryNamespaceMissing: on a fresh cluster, `run --once` whose move
// history would go to a namespace that does not exist fails before it
// evicts anything, saying what to create; `plan` keeps planning (it writes
// nothing), and the same run with a history in memory evicts.
func TestHistoryNamespaceMissing(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := []string{"nohist-0-" + e.name, "nohist-1-" + e.name, "nohist-2-" + e.name, "nohist-3-" + e.name}
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), nodes)
	before := e.podUIDs()
	missing := "fresh-" + e.name
	flag := "--history-configmap=" + missing + "/rebalancer-history"

	res, stderr, err := runOnceVia(t, kubeconfig, flag)
	if err == nil {
		t.Fatalf("run --once with the history in a missing namespace succeeded: %+v", res.Result)
	}
	if !strings.Contains(stderr, `namespace "`+missing+`" does not exist`) || !strings.Contains(stderr, "kubectl create namespace "+missing) {
		t.Errorf("the error does not say which namespace to create:\n%s", stderr)
	}
	if after := e.podUIDs(); !maps.Equal(before, after) {
		t.Errorf("pods changed although the run failed: %v -> %v", before, after)
	}
	if _, err := client.CoreV1().Namespaces().Get(e.ctx, missing, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want it still absent", missing, err)
	}

	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	p, _ := planJSON(t, ctx, "--kubeconfig", kubeconfig, flag)
	planned := 0
	for _, m := range p.Moves {
		if m.Namespace == e.ns {
			planned++
		}
	}
	if planned == 0 {
		t.Fatal("plan moves nothing here: the test shows nothing")
	}
	res, stderr, err = runOnceVia(t, kubeconfig, "--history-configmap=")
	if err != nil || len(res.Result.Evicted) == 0 {
		t.Errorf("run --once with the history in memory: %v, %d evicted\n%s", err, len(res.Result.Evicted), stderr)
	}
}

// podUIDs maps the test namespace's pods to their UIDs.
func (e *testEnv) podUIDs() map[string]types.UID {
	e.t.Helper()
	pods, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		out[p.Name] = p.UID
	}
	return out
}

// TestHistoryBadEntriesAndNewerVersion: the built binary against a stored
// history with one bad move among good ones keeps the good ones (their
// cooldown holds) and warns naming the bad one; against a history of a
// newer format it refuses to plan and leaves the ConfigMap as it was.
func TestHistoryBadEntriesAndNewerVersion(t *testing.T) {
	e := newTestEnv(t)
	e.addNodes("8", "hbad-0-"+e.name, "hbad-1-"+e.name)
	flag, name := e.historyFlag()
	cms := client.CoreV1().ConfigMaps("rebalancer-system")
	at := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	mixed := `{"version":1,"moves":[
{"owner":"uid-kept-1","workload":"ReplicaSet shop/web-1","from":"node-a","to":"node-b","at":"` + at + `","plan":"p"},
{"owner":"","to":"node-b","at":"` + at + `"},
{"owner":"uid-kept-2","to":"node-c","at":"` + at + `"}
]}`
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{history.DataKey: mixed}}
	if _, err := cms.Create(e.ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cms.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if _, stderr, err := runOnceVia(t, kubeconfig, flag); err != nil || !strings.Contains(stderr, "dropped a move the history holds") || !strings.Contains(stderr, "moves[1]") {
		t.Errorf("run with one bad move: %v, want it to go on warning about moves[1]\n%s", err, stderr)
	}
	// Nothing to write this run (no move here): what is stored still holds
	// the good moves, the bad one dropped when read.
	stored, err := cms.Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, _, err := history.Decode([]byte(stored.Data[history.DataKey]))
	owners := map[string]bool{}
	for _, m := range kept {
		owners[string(m.Owner)] = true
	}
	if err != nil || !owners["uid-kept-1"] || !owners["uid-kept-2"] {
		t.Errorf("the good moves were not kept: %v %v", owners, err)
	}

	newer := `{"version":2,"moves":[],"shards":["a"]}`
	cm, err = cms.Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{history.DataKey: newer}
	if _, err := cms.Update(e.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runOnceVia(t, kubeconfig, flag)
	if err == nil || !strings.Contains(stderr, "format version 2, written by a newer rebalancer") {
		t.Errorf("run with a newer history: %v, want a refusal naming its version\n%s", err, stderr)
	}
	if cm, err := cms.Get(e.ctx, name, metav1.GetOptions{}); err != nil || cm.Data[history.DataKey] != newer {
		t.Errorf("the newer history was changed: %v %q", err, cm.Data[history.DataKey])
	}
}
