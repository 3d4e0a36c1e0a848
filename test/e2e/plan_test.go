//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestPlanLiveMakesNoWrites: `rebalancer plan --kubeconfig` against the real
// cluster plans the moves a tainted node calls for, and the API server's
// audit log shows that it only read.
func TestPlanLiveMakesNoWrites(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	e.addNodes("8", "live-a", "live-b", "live-c")
	e.addDeployment("web", 4, resources("1", "1Gi"))
	pods := e.boundPods("web", 4)
	counts, summary := perNode(pods)
	if len(counts) != 1 {
		t.Fatalf("the bin-packing profile spread 4 small pods: %s", summary)
	}
	tainted := pods[0].Spec.NodeName
	e.taintForMaintenance(tainted)

	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, out := planJSON(t, ctx, "--kubeconfig", kubeconfig)
	moved := 0
	for _, m := range p.Moves {
		if m.Namespace != e.ns {
			continue
		}
		if m.Source != tainted || m.Target == tainted {
			t.Errorf("move %s %s -> %s, want every web pod off %s", m.Pod, m.Source, m.Target, tainted)
		}
		moved++
	}
	if moved != 4 {
		t.Errorf("planned %d moves of web off the tainted node, want 4; plan: %s", moved, out)
	}

	// The same cluster captured to a file, in YAML or JSON, plans the same
	// moves offline.
	moves := func(p plan.Plan) []string {
		var out []string
		for _, m := range p.Moves {
			if m.Namespace == e.ns {
				out = append(out, m.Pod+" "+m.Source+" -> "+m.Target)
			}
		}
		return out
	}
	for _, name := range []string{"cluster.yaml", "cluster.json"} {
		file := filepath.Join(t.TempDir(), name)
		capture := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer"), "snapshot", "capture", "--kubeconfig", kubeconfig, "-o", file)
		if b, err := capture.CombinedOutput(); err != nil {
			t.Fatalf("rebalancer snapshot capture -o %s: %v\n%s", name, err, b)
		}
		p2, _ := planJSON(t, ctx, "--snapshot", file)
		if a, b := moves(p), moves(p2); !slices.Equal(a, b) {
			t.Errorf("plan on the snapshot captured as %s differs from the live plan:\nlive:     %v\ncaptured: %v", name, a, b)
		}
	}

	// Every request rebalancer made, from the audit log: reads only.
	reads, writes := auditedRequests(t, "rebalancer/", started)
	if reads == 0 {
		t.Fatal("no request of rebalancer in the audit log: the check would prove nothing")
	}
	if len(writes) > 0 {
		t.Fatalf("rebalancer plan or snapshot capture wrote to the cluster: %v", writes)
	}
	t.Logf("rebalancer plan and snapshot capture: %d read requests, 0 writes; %d moves planned", reads, len(p.Moves))
}

// planJSON runs `rebalancer plan -o json` with the shipped bin-packing pair
// and the given cluster flags, and returns the plan and its output.
func planJSON(t *testing.T, ctx context.Context, cluster ...string) (plan.Plan, []byte) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer"), append([]string{"plan", "-o", "json",
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml")}, cluster...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rebalancer plan %s: %v\n%s", strings.Join(cluster, " "), err, stderr.String())
	}
	var p plan.Plan
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("plan output is not JSON: %v\n%s", err, out)
	}
	return p, out
}

// auditedRequests reads the API server's audit log (JSON lines, written by
// hack/local-cluster.sh) and returns, for requests whose user agent starts
// with agent since the given time, how many read and which wrote.
func auditedRequests(t *testing.T, agent string, since time.Time) (reads int, writes []string) {
	t.Helper()
	path := envOr("AUDIT_LOG", filepath.Join(filepath.Dir(kubeconfig), "audit.log"))
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Verb                     string    `json:"verb"`
			UserAgent                string    `json:"userAgent"`
			RequestURI               string    `json:"requestURI"`
			RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line: %v", err)
		}
		if !strings.HasPrefix(ev.UserAgent, agent) || ev.RequestReceivedTimestamp.Before(since) {
			continue
		}
		switch ev.Verb {
		case "get", "list", "watch":
			reads++
		default:
			writes = append(writes, ev.Verb+" "+ev.RequestURI)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return reads, writes
}
