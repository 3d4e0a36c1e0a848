//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// KWOK reports a pod's usage from these annotations (hack/kwok-metrics.yaml).
const (
	usageCPU    = "kwok.x-k8s.io/usage-cpu"
	usageMemory = "kwok.x-k8s.io/usage-memory"
)

// nodeUsage reads every node's CPU usage, in millicores, from
// metrics.k8s.io as metrics-server serves it.
func (e *testEnv) nodeUsage() (map[string]int64, error) {
	raw, err := client.Discovery().RESTClient().Get().AbsPath(live.NodeMetricsPath).DoRaw(e.ctx)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", live.NodeMetricsPath, err)
	}
	var l metricsv1beta1.NodeMetricsList
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, m := range l.Items {
		out[m.Name] = m.Usage.Cpu().MilliValue()
	}
	return out, nil
}

// waitUsage polls metrics.k8s.io, for up to two minutes, until cond holds
// for the nodes' CPU usage.
func (e *testEnv) waitUsage(what string, cond func(map[string]int64) bool) map[string]int64 {
	e.t.Helper()
	var got map[string]int64
	var last error
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		got, last = e.nodeUsage()
		return last == nil && cond(got), nil
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: %v; usage %v (last read: %v)", what, err, got, last)
	}
	return got
}

// using are the annotations with which KWOK reports a pod using cpu.
func using(cpu string) map[string]string {
	return map[string]string{usageCPU: cpu, usageMemory: "256Mi"}
}

// rebalancerJSON runs the rebalancer binary with -o json, as the user of
// kc, and decodes what it prints into out.
func rebalancerJSON(t *testing.T, kc string, out any, args ...string) {
	t.Helper()
	stdout, stderr, err := rebalancerOutput(kc, args...)
	if err != nil {
		t.Fatalf("rebalancer %s: %v\nstderr:\n%s\nstdout (%d bytes):\n%.2000s", strings.Join(args, " "), err, stderr, len(stdout), stdout)
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("rebalancer %s: output is not JSON: %v\n%s", args[0], err, stdout)
	}
}

func rebalancerOutput(kc string, args ...string) (stdout []byte, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer"), append(args, "-o", "json", "--kubeconfig", kc)...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	stdout, err = cmd.Output()
	return stdout, errOut.String(), err
}

// readsUsage fails the test unless user listed metrics.k8s.io's nodes and
// pods since then, and every request it made was allowed.
func readsUsage(t *testing.T, user string, since time.Time) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range auditedVerbs(t, user, since) {
		if r.code == 403 {
			t.Errorf("%s was refused %s", user, r)
		}
		if r.group == "metrics.k8s.io" && r.verb == "list" && r.code == 200 {
			seen[r.resource] = true
		}
	}
	if !seen["nodes"] || !seen["pods"] {
		t.Errorf("%s listed metrics.k8s.io nodes %v, pods %v; want both, granted by its shipped RBAC", user, seen["nodes"], seen["pods"])
	}
}

// TestLoadAwareMovesPodsOffAHotNode: four nodes, every pod requesting
// 1 CPU, but the pods of one node use far more than they request. metrics-server
// (built from its module, scraping KWOK's emulated kubelets) reports it.
// `run --once` with the shipped load-aware pair moves pods off the hot node
// only; rebalancer-scheduler, running the same profile with its LoadAware
// plugin, puts the replacements where the plan said; no node ends hot and a
// second plan moves nothing. Then one node spikes: a plan on the newest
// sample alone would move a pod off it, but a spike shorter than
// --usage-window moves nothing.
func TestLoadAwareMovesPodsOffAHotNode(t *testing.T) {
	needScheduler(t) // TestSchedulerRBAC then counts this test's requests too
	e := newTestEnv(t)
	started := time.Now()
	// Both run as their shipped ServiceAccounts, with the shipped RBAC.
	schedulerKC := schedulerServiceAccount(t)
	kc := e.asServiceAccount(filepath.Join(repoRoot, "manifests", "rebalancer", "rbac.yaml"), "rebalancer")
	schedName := "load-" + e.name
	config := schedulerConfig(t, "load-aware-scheduler.yaml", func(cfg map[string]any) {
		cfg["clientConnection"] = map[string]any{"kubeconfig": schedulerKC}
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
		cfg["profiles"].([]any)[0].(map[string]any)["schedulerName"] = schedName
	})
	startProcess(t, "rebalancer-scheduler", "--config="+config, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t)), "-v=2")
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	shipped, err := os.ReadFile(filepath.Join(repoRoot, "policies", "load-aware-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policy, fmt.Appendf(shipped, "\nnodeSelector: %s=%s\n", testLabel, e.name), 0o600); err != nil {
		t.Fatal(err)
	}
	// A short window keeps the test short; the spike below is shorter still.
	usageFlags := []string{"--usage-window", "20s", "--usage-interval", "5s"}
	common := append([]string{"--policy", policy, "--scheduler-config", config}, usageFlags...)

	nodes := e.nodeNames("la", 4)
	hot := nodes[0]
	// The hot pods come first, onto the only node there is; the cool ones
	// after, onto the others. Requests: 2 of 4 CPUs on every node.
	e.addNodes("4", hot)
	e.addDeploymentOf(schedName, "hot", 2, resources("1", "1Gi"), using("1700m"))
	hotPods := e.boundPods("hot", 2)
	e.addNodes("4", nodes[1:]...)
	e.addDeploymentOf(schedName, "cool", 6, resources("1", "1Gi"), using("100m"))
	cool := e.boundPods("cool", 6)
	_, layout := perNode(append(hotPods, cool...))
	t.Logf("placed: %s", layout)
	usage := e.waitUsage("metrics-server to report the hot node", func(u map[string]int64) bool {
		for _, n := range nodes {
			if _, ok := u[n]; !ok {
				return false
			}
		}
		return u[hot] >= 3400
	})
	t.Logf("usage (millicores): %v", usage)

	before := uidsOf(append(hotPods, cool...))
	var res cycleOutput
	rebalancerJSON(t, kc, &res, append([]string{"run", "--once"}, common...)...)
	moves := res.Plan.Moves
	if len(moves) == 0 {
		t.Fatalf("no moves; skipped %v; warnings %q", res.Plan.Summary.SkippedByReason, res.Plan.Warnings)
	}
	for _, m := range moves {
		if m.Source != hot || m.Owner == nil || m.Owner.Name == "" || !strings.HasPrefix(m.Name, "hot-") {
			t.Errorf("move %s %s → %s: want hot pods off %s only", m.Pod, m.Source, m.Target, hot)
		}
		if m.Usage == nil || m.Usage.MilliCPU < 1500 || m.Requests.MilliCPU != 1000 {
			t.Errorf("move %s: requests %v, usage %v; want 1 CPU requested and about 1700m used", m.Pod, m.Requests, m.Usage)
		}
	}
	if len(res.Result.Evicted) != len(moves) {
		t.Fatalf("planned %d moves, evicted %d", len(moves), len(res.Result.Evicted))
	}
	for i := range moves {
		// landed matches replacements by owner name; the Deployment's
		// ReplicaSet is named after it plus a hash.
		moves[i].Owner.Name = "hot"
	}
	after := append(e.boundPods("hot", 2), e.boundPods("cool", 6)...)
	onTarget, backOnSource := landed(moves, before, after)
	_, layout = perNode(after)
	t.Logf("%d moves; %d replacements on their target, %d back on the source; now %s", len(moves), onTarget, backOnSource, layout)
	if onTarget != len(moves) || backOnSource != 0 {
		t.Errorf("%d of %d replacements on their planned target, %d back on the hot node", onTarget, len(moves), backOnSource)
	}
	// Settled: no node above the policy's 70 % of 4 CPUs.
	usage = e.waitUsage("the usage to settle with no node hot", func(u map[string]int64) bool {
		for _, n := range nodes {
			if v, ok := u[n]; !ok || v > 2800 {
				return false
			}
		}
		return true
	})
	t.Logf("usage after (millicores): %v", usage)

	var again plan.Plan
	rebalancerJSON(t, kc, &again, append([]string{"plan"}, common...)...)
	if len(again.Moves) != 0 {
		t.Errorf("a second plan moves %d pods: %+v", len(again.Moves), again.Moves)
	}

	// A spike: one cool pod starts using 3.5 CPUs, on a node that runs no
	// hot pod, so the node measures what a machine can (3.6 of 4 CPUs):
	// rebalancer refuses a sample beyond the node's capacity.
	hotOn := map[string]bool{}
	for _, p := range after {
		if p.Labels["app"] == "hot" {
			hotOn[p.Spec.NodeName] = true
		}
	}
	var spiking *v1.Pod
	for i, p := range after {
		if p.Labels["app"] == "cool" && !hotOn[p.Spec.NodeName] {
			spiking = &after[i]
			break
		}
	}
	if spiking == nil {
		t.Fatalf("every cool pod shares a node with a hot one: %s", layout)
	}
	t.Logf("spiking %s on %s", spiking.Name, spiking.Spec.NodeName)
	setUsage := func(cpu string) {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, usageCPU, cpu)
		if _, err := client.CoreV1().Pods(e.ns).Patch(e.ctx, spiking.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setUsage("3500m")
	e.waitUsage("the spike to show", func(u map[string]int64) bool { return u[spiking.Spec.NodeName] > 2800 })
	// The newest sample alone calls the node hot.
	var momentary plan.Plan
	rebalancerJSON(t, kc, &momentary, "plan", "--policy", policy, "--scheduler-config", config, "--usage-window", "0")
	if len(momentary.Moves) == 0 {
		t.Errorf("on the newest sample alone, the spiking node %s moves nothing; the spike test would prove nothing", spiking.Spec.NodeName)
	}
	// Over a window that outlasts the spike, it is not hot.
	type output struct {
		stdout []byte
		stderr string
		err    error
	}
	done := make(chan output, 1)
	go func() {
		var o output
		o.stdout, o.stderr, o.err = rebalancerOutput(kc, "plan", "--policy", policy, "--scheduler-config", config, "--usage-window", "45s", "--usage-interval", "5s")
		done <- o
	}()
	time.Sleep(10 * time.Second)
	setUsage("100m")
	o := <-done
	var windowed plan.Plan
	if o.err != nil || json.Unmarshal(o.stdout, &windowed) != nil {
		t.Fatalf("plan over a 45s window: %v\n%s\n%s", o.err, o.stdout, o.stderr)
	}
	if len(windowed.Moves) != 0 {
		t.Errorf("a spike shorter than the window moved %d pods: %+v", len(windowed.Moves), windowed.Moves)
	}
	readsUsage(t, "system:serviceaccount:rebalancer-system:rebalancer", started)
	readsUsage(t, "system:serviceaccount:rebalancer-system:rebalancer-scheduler", started)
}
