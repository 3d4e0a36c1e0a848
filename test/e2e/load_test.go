//go:build e2e

package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Figures docs/reliability.md quotes for this load test; the test fails above them.
const (
	loadNodes       = 50
	loadPodsPerNode = 40
	loadMaxRSSMiB   = 400
)

// TestLoadLiveCycles: the long-lived mode against a control plane loaded with
// 2,000 KWOK pods on 50 nodes. Its view of the cluster lists each kind once
// and then watches: over several cycles the audit log shows one initial
// list (or watch-list) per kind, never one per cycle, and the process stays
// within the memory docs/reliability.md quotes.
func TestLoadLiveCycles(t *testing.T) {
	e := newTestEnv(t)
	var nodes []string
	for i := 0; i < loadNodes; i++ {
		nodes = append(nodes, fmt.Sprintf("load-%02d", i))
	}
	e.addNodes("64", nodes...)
	createStart := time.Now()
	e.createBoundPods(nodes, loadPodsPerNode)
	t.Logf("created %d pods in %s", loadNodes*loadPodsPerNode, time.Since(createStart).Round(100*time.Millisecond))

	started := time.Now()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	r := &replica{process: startProcess(t, "rebalancer", "run", "--interval=2s", "--leader-elect=false", "--dry-run",
		"--bind-address="+addr, "--kubeconfig", kubeconfig,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml")), addr: addr}
	const wantCycles = 5
	e.poll(fmt.Sprintf("%d cycles", wantCycles), func() (bool, error) { return cycles(r, "ok") >= wantCycles, nil })
	rss := peakRSSMiB(t, r.cmd.Process.Pid)
	_, metrics := r.get("/metrics")
	t.Logf("%d cycles over %d pods in %s; peak RSS %.0f MiB; %s", cycles(r, "ok"), loadNodes*loadPodsPerNode,
		time.Since(started).Round(100*time.Millisecond), rss, cycleDurations(metrics))
	if rss > loadMaxRSSMiB {
		t.Errorf("peak RSS %.0f MiB, above the %d MiB docs/reliability.md quotes", rss, loadMaxRSSMiB)
	}

	// Requests per resource: initial lists and watches, none per cycle.
	lists, watches := map[string]int{}, map[string]int{}
	historyReads, webhookReads, draDiscovery := 0, 0, 0
	for _, ev := range auditEvents(t, "rebalancer/", started) {
		u, err := url.Parse(ev.RequestURI)
		if err != nil {
			t.Fatal(err)
		}
		kind := strings.TrimPrefix(u.Path, "/api/v1/")
		if strings.HasPrefix(u.Path, "/apis/") {
			kind = strings.Join(strings.Split(u.Path, "/")[2:], "/")
		}
		switch {
		case ev.Verb == "get" && u.Path == "/version":
			// the check that the API server answers, once at start
		case ev.Verb == "get" && u.Path == "/apis/resource.k8s.io/v1":
			draDiscovery++ // whether the cluster serves DRA, once when the informers start
		case ev.Verb == "get" && u.Path == "/api/v1/namespaces/rebalancer-system/configmaps/rebalancer-history":
			historyReads++ // the move history, read at the start of each cycle
		case ev.Verb == "get" && u.Path == "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/rebalancer-webhook":
			webhookReads++ // the webhook's opt-in, read with each plan
		case ev.Verb == "list":
			lists[kind]++
		case ev.Verb == "watch" && u.Query().Get("sendInitialEvents") == "true":
			lists[kind]++ // a watch-list is the informer's initial list
		case ev.Verb == "watch":
			watches[kind]++
		default:
			t.Errorf("unexpected request in --dry-run: %s %s", ev.Verb, ev.RequestURI)
		}
	}
	t.Logf("initial lists by kind: %v; watches: %v; history reads %d, webhook configuration reads %d", lists, watches, historyReads, webhookReads)
	if draDiscovery > 1 {
		t.Errorf("resource.k8s.io/v1 was looked up %d times, want once, when the informers start", draDiscovery)
	}
	// Read after the audit log: a cycle may have started meanwhile.
	ran := cycles(r, "ok")
	if historyReads == 0 || historyReads > ran+1 {
		t.Errorf("the move history was read %d times over %d cycles, want once a cycle", historyReads, ran)
	}
	if webhookReads > ran+1 {
		t.Errorf("the webhook configuration was read %d times over %d cycles, want at most once a cycle", webhookReads, ran)
	}
	if lists["pods"] == 0 || lists["nodes"] == 0 {
		t.Fatalf("no initial list of pods or nodes in the audit log: %v", lists)
	}
	for kind, n := range lists {
		if n > 1 {
			t.Errorf("%s listed %d times over %d cycles, want once", kind, n, wantCycles)
		}
	}
}

// createBoundPods creates perNode bare pods on each node, bound directly
// (no scheduler), with a few workers.
func (e *testEnv) createBoundPods(nodes []string, perNode int) {
	e.t.Helper()
	jobs := make(chan *v1.Pod)
	errs := make(chan error, len(nodes)*perNode)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				if _, err := client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, n := range nodes {
		for i := 0; i < perNode; i++ {
			spec := e.podSpec(schedulerName, resources("100m", "128Mi"))
			spec.NodeName = n
			jobs <- &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", n, i), Namespace: e.ns, Labels: map[string]string{"app": "load"}}, Spec: spec}
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
}

// peakRSSMiB reads a process's peak resident set (VmHWM).
func peakRSSMiB(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// cycleDurations summarizes rebalancer_cycle_duration_seconds.
func cycleDurations(metrics string) string {
	var sum, count string
	for _, line := range strings.Split(metrics, "\n") {
		switch {
		case strings.HasPrefix(line, "rebalancer_cycle_duration_seconds_sum "):
			sum = strings.Fields(line)[1]
		case strings.HasPrefix(line, "rebalancer_cycle_duration_seconds_count "):
			count = strings.Fields(line)[1]
		}
	}
	s, _ := strconv.ParseFloat(sum, 64)
	c, _ := strconv.ParseFloat(count, 64)
	if c == 0 {
		return "no cycle duration"
	}
	return fmt.Sprintf("mean cycle %.2f s over %.0f cycles", s/c, c)
}
