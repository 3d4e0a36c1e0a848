//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// TestDrainHeldUntilReplacementsBound: the scheduler is paused while a
// `run --once` drains nodes, so the replacements stay pending after the
// evictions. The drained nodes keep their taint while they are pending (no
// replacement can land back on them), and lose it once the scheduler is back
// and the replacements are bound; none lands on a drained node.
func TestDrainHeldUntilReplacementsBound(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	flag, _ := e.historyFlag()
	nodes := []string{"held-0-" + e.name, "held-1-" + e.name, "held-2-" + e.name, "held-3-" + e.name}
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), append(append([]string{}, nodes...), nodes...))

	scheduler.Lock()
	proc := scheduler.cmd.Process
	scheduler.Unlock()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := proc.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(resume)

	cmd := exec.CommandContext(e.ctx, filepath.Join(binDir, "rebalancer"), "run", "--once", "-o", "json", "--kubeconfig", kubeconfig,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"), flag)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Evictions done, replacements pending: the drained nodes stay tainted.
	var drained []string
	e.poll("evictions with their replacements pending", func() (bool, error) {
		pods, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pending := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				pending++
			}
		}
		drained = taintedNodes(t, e, nodes)
		return pending > 0 && len(drained) > 0, nil
	})
	time.Sleep(3 * time.Second)
	if still := taintedNodes(t, e, nodes); len(still) < len(drained) {
		t.Errorf("drained nodes %v, tainted 3 s later with replacements pending: %v", drained, still)
	}
	select {
	case err := <-done:
		t.Fatalf("run --once returned while replacements were pending: %v\n%s", err, stderr.String())
	default:
	}
	resume()

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run --once: %v\n%s", err, stderr.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("run --once did not return within 90 s of the scheduler's resumption\n%s", stderr.String())
	}
	var res cycleOutput
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	drainedNow := map[string]bool{}
	for _, m := range res.Result.Evicted {
		if m.Drain && m.Namespace == e.ns {
			drainedNow[m.Source] = true
		}
	}
	if left := taintedNodes(t, e, nodes); len(left) > 0 {
		t.Errorf("drain taints left after the run: %v", left)
	}
	for _, p := range e.boundPods("web", 8) {
		if drainedNow[p.Spec.NodeName] {
			t.Errorf("pod %s landed on %s, a node the plan emptied", p.Name, p.Spec.NodeName)
		}
	}
	t.Logf("drained %v; tainted while replacements were pending, untainted after they were bound", drained)
}

func taintedNodes(t *testing.T, e *testEnv, names []string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		node, err := client.CoreV1().Nodes().Get(e.ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == wellknown.DrainTaintKey && taint.Effect == v1.TaintEffectNoSchedule {
				out = append(out, n)
			}
		}
	}
	return out
}
