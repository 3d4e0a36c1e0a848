//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// replica is one `rebalancer run` process in long-lived mode.
type replica struct {
	*process
	addr string
}

func startReplica(t *testing.T, args ...string) *replica {
	t.Helper()
	return startReplicaWith(t, kubeconfig, "rebalancer-e2e", args...)
}

// startReplicaWith starts a replica that reaches the apiserver through kc and
// competes for the Lease named lease. Without a --history-configmap in args
// it has no cooldown.
func startReplicaWith(t *testing.T, kc, lease string, args ...string) *replica {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--history-configmap") }) {
		args = append(args, "--cooldown=0s")
	}
	p := startProcess(t, "rebalancer", append([]string{"run", "--interval=2s", "--leader-elect", "--bind-address=" + addr,
		"--leader-elect-resource-name=" + lease,
		"--kubeconfig", kc,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml")}, args...)...)
	return &replica{process: p, addr: addr}
}

func (r *replica) get(path string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + r.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *replica) leads() bool {
	_, body := r.get("/metrics")
	return strings.Contains(body, "\nrebalancer_leader 1")
}

// TestRunDeploymentMode: two replicas of the long-lived mode with leader
// election. Exactly one runs cycles and evicts; the cluster consolidates
// over cycles; killing the leader hands over within the lease duration;
// no pod is evicted twice. Both keep one move history: after the handover,
// the new leader leaves the pods the old one moved where they are, even when
// their nodes are tainted for maintenance.
func TestRunDeploymentMode(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("dep", 6)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), append(append([]string{}, nodes...), nodes...))
	e.fragmentedReplicaSet("api", resources("1", "1Gi"), nodes)
	started := time.Now()

	flag, historyName := e.historyFlag()
	a, b := startReplica(t, flag), startReplica(t, flag)
	for _, r := range []*replica{a, b} {
		e.poll("/healthz and /readyz of "+r.addr, func() (bool, error) {
			h, _ := r.get("/healthz")
			rd, _ := r.get("/readyz")
			return h == 200 && rd == 200, nil
		})
	}
	var leader, follower *replica
	e.poll("one leader", func() (bool, error) {
		switch {
		case a.leads() && !b.leads():
			leader, follower = a, b
		case b.leads() && !a.leads():
			leader, follower = b, a
		}
		return leader != nil, nil
	})
	e.poll("consolidation over cycles", func() (bool, error) {
		pods := append(e.boundPods("web", 12), e.boundPods("api", 6)...)
		c, _ := perNode(pods)
		return len(c) <= 3, nil
	})
	if n := evictedCount(follower); n != 0 {
		t.Errorf("the follower evicted %d pods", n)
	}
	if n := evictedCount(leader); n == 0 {
		t.Error("the leader evicted nothing")
	}

	// Kill the leader; the follower takes over within the lease duration (15 s).
	if err := leader.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	handover := time.Now()
	select {
	case <-leader.done:
		if leader.err != nil {
			t.Errorf("the leader exited with %v on SIGTERM, want status 0", leader.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not exit within 30 s of SIGTERM")
	}
	e.poll("the follower to lead", func() (bool, error) { return follower.leads(), nil })
	t.Logf("handover took %s", time.Since(handover).Round(100*time.Millisecond))
	if time.Since(handover) > 20*time.Second {
		t.Errorf("handover took %s, more than the lease duration", time.Since(handover))
	}

	// The old leader's moves are in the history; their targets go under
	// maintenance, and the new leader runs cycles: the moved pods stay.
	targets := map[string]bool{}
	for _, m := range readHistory(t, e, historyName) {
		if slices.Contains(nodes, m.To) {
			targets[m.To] = true
		}
	}
	if len(targets) == 0 {
		t.Fatal("the old leader's moves are not in the history")
	}
	for n := range targets {
		e.taintForMaintenance(n)
	}
	tainted, before := time.Now(), cycles(follower, "ok")
	e.poll("three cycles of the new leader", func() (bool, error) { return cycles(follower, "ok") >= before+3, nil })
	onTargets := map[string]bool{}
	for _, p := range append(e.boundPods("web", 12), e.boundPods("api", 6)...) {
		if targets[p.Spec.NodeName] {
			onTargets[p.Name] = true
		}
	}
	_, afterTaint := auditedRequests(t, "rebalancer/", tainted)
	for _, w := range afterTaint {
		for name := range onTargets {
			if strings.HasPrefix(w, "create ") && strings.HasSuffix(w, "/"+name+"/eviction") {
				t.Errorf("the new leader evicted %s, moved by the old one within the cooldown", name)
			}
		}
	}

	// No pod was evicted twice.
	_, writes := auditedRequests(t, "rebalancer/", started)
	seen := map[string]int{}
	for _, w := range writes {
		if strings.HasPrefix(w, "create ") && strings.HasSuffix(w, "/eviction") {
			seen[w]++
		}
	}
	for w, n := range seen {
		if n > 1 {
			t.Errorf("%s: %d times", w, n)
		}
	}
	t.Logf("%d evictions in the audit log", len(seen))
}

// evictedCount sums a replica's rebalancer_evictions_total{result="evicted"}.
func evictedCount(r *replica) int {
	_, body := r.get("/metrics")
	total := 0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "rebalancer_evictions_total{") && strings.Contains(line, `result="evicted"`) {
			var v float64
			if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v); err != nil {
				return -1 // a malformed line fails the caller's comparison
			}
			total += int(v)
		}
	}
	return total
}
